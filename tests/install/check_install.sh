#!/bin/bash
# The installed tool on its own: `cmake --install` into a temporary prefix,
# the prefix moved elsewhere, then run from an unrelated folder with no
# sinklab variable set. It must check, train and measure (stdlib and the
# builtin corpus found beside the executables), and no binary may carry the
# source tree's path.
#   check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sinklab-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset SINKLAB_HOME SINKLAB_STDLIB
export SINKLAB_KERNEL_CACHE=$tmp/kernels  # never into $HOME
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" --strip > "$tmp/install.log"
mv "$tmp/prefix" "$tmp/moved"
bin=$tmp/moved/bin
for tool in sinkc sinkc-runtime; do
  [[ -x $bin/$tool ]] || fail "$tool not installed"
  if grep -qF "$src" "$bin/$tool"; then fail "$tool contains the source path $src"; fi
done
[[ -f $tmp/moved/share/sinklab/stdlib/presets.sink ]] || fail "stdlib not installed"
[[ -f $tmp/moved/share/sinklab/data/builtin/default.jsonl ]] || fail "builtin corpus not installed"

mkdir "$tmp/project" && cd "$tmp/project"
"$bin/sinkc" --version | tee version.txt
grep -q "^sinkc [0-9]" version.txt || fail "sinkc --version"
grep -q "^sinkc-runtime [0-9].*LibTorch" version.txt || fail "sinkc --version lacks the runtime's line"

cat > spec.sink <<'SPEC'
import "stdlib/presets.sink"
experiment synthetic extends micro {}
experiment text extends micro {
  data { corpus = builtin("default")  tokenizer = bytes  bos = false }
}
SPEC
"$bin/sinkc" check spec.sink
"$bin/sinkc" run spec.sink --out runs --no-progress > run.log 2>&1 || { cat run.log; fail "sinkc run"; }
cat run.log
[[ $(grep -c '^completed' run.log) == 2 ]] || fail "both runs should complete"
run=$(ls -d runs/synthetic-*)
"$bin/sinkc" measure "$run" --n 4 --T 16 --format json > measure.json || fail "sinkc measure"
grep -q '"alpha"' measure.json || fail "measure --format json has no alpha"

# A named home that lacks the stdlib is an error that says what to set.
mkdir empty
if SINKLAB_HOME=$tmp/project/empty "$bin/sinkc" check spec.sink > err.txt 2>&1; then fail "an empty SINKLAB_HOME checked clean"; fi
grep -q "SINKLAB_HOME" err.txt || { cat err.txt; fail "the error does not name SINKLAB_HOME"; }
echo "install: ok"
