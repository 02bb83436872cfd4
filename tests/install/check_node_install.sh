#!/bin/bash
# A GPU node's install, as a researcher with no root makes it: scripts/pack-node.sh's archive unpacked in a
# fresh folder, scripts/install-node.sh PREFIX run there against a pip PyTorch (the runtime built by
# setup-gpu.sh with the header-only dependencies from the archive, never the machine's packages), then every
# command of a study run from the prefix in an unrelated folder: check, run, table, diff, report, bisect,
# submit's batch script, and a SentencePiece corpus tokenized and trained with no spm program on PATH. The
# portable sinkc must be static (ldd) and carry no source path.
#   check_node_install.sh ARCHIVE_DIR PYTHON WORK_DIR
# WORK_DIR is a scratch folder inside the source tree's clone, so that ccache serves the runtime's build from
# the one the torch 2.11 leg made (the same relative paths); it is removed afterwards.
set -euo pipefail
archive_dir=$1 python=$2 work=$3
archive=$(ls "$archive_dir"/sinklab-*-linux-*.tar.gz 2> /dev/null | head -1 || true)
if [[ -z $archive ]]; then
  echo "SKIP: no archive in $archive_dir (scripts/pack-node.sh $archive_dir makes it; scripts/test.sh does)"
  exit 77
fi
if ! "$python" -c 'import torch' 2> /dev/null; then
  echo "SKIP: $python has no torch (scripts/torch-venv.sh makes the environment)"
  exit 77
fi
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
trap 'rm -rf "$work"' EXIT
unset SINKLAB_HOME SINKLAB_STDLIB
export SINKLAB_KERNEL_CACHE=$work/kernels  # never into $HOME

tar -xzf "$archive" -C "$work"
tree=$(ls -d "$work"/sinklab-*/)
sinkc=$tree/portable/bin/sinkc
[[ -x $sinkc ]] || fail "the archive has no portable/bin/sinkc"
if ldd "$sinkc" > "$work/ldd.txt" 2>&1; then cat "$work/ldd.txt"; fail "the portable sinkc is dynamically linked"; fi
grep -q "SOURCE_COMMIT" <(ls "$tree") || fail "the archive does not say its commit"

prefix=$work/prefix
(cd "$tree" && scripts/install-node.sh "$prefix" --python "$python") > "$work/install.log" 2>&1 ||
  { tail -40 "$work/install.log"; fail "install-node.sh"; }
tail -3 "$work/install.log"
echo "node install: installed in ${SECONDS} s"
bin=$prefix/bin
for tool in sinkc sinkc-runtime; do [[ -x $bin/$tool ]] || fail "$tool not installed"; done
if grep -qF "$tree" "$bin/sinkc"; then fail "sinkc contains the archive's path"; fi
# The build folder goes, as a researcher may delete it: the install must not need it.
rm -rf "$tree"

mkdir "$work/project" && cd "$work/project"
"$bin/sinkc" --version | tee version.txt
grep -q "^sinkc-runtime .*LibTorch 2\." version.txt || fail "the runtime is not the pip PyTorch's"
grep -Eq "commit [0-9a-f]{40}" version.txt || fail "the runtime does not know its commit (SOURCE_COMMIT)"
cat > spec.sink << 'SPEC'
import "stdlib/presets.sink"
experiment softmax extends micro {}
experiment sigmoid extends micro { attention { score = sigmoid(qk)  normalize = none } }
SPEC
"$bin/sinkc" check spec.sink
"$bin/sinkc" run spec.sink --out runs --no-progress > run.log 2>&1 || { cat run.log; fail "sinkc run"; }
[[ $(grep -c '^completed' run.log) == 2 ]] || { cat run.log; fail "both runs should complete"; }
echo "node install: trained at ${SECONDS} s"
"$bin/sinkc" table spec.sink --out runs --format csv > table.csv || fail "sinkc table"
[[ $(grep -c . table.csv) -ge 3 ]] || { cat table.csv; fail "the table has fewer than two runs"; }
"$bin/sinkc" diff runs/softmax-* runs/sigmoid-* > diff.txt || fail "sinkc diff"
grep -q "normalize" diff.txt || { cat diff.txt; fail "the diff does not name the field that differs"; }
"$bin/sinkc" report spec.sink --out runs -o report.html > /dev/null || fail "sinkc report"
grep -q "<svg" report.html || fail "the report has no plot"
"$bin/sinkc" bisect runs/softmax-* runs/sigmoid-* --metric valid_loss --seeds 2 --max-runs 2 --out runs \
  > bisect.txt 2>&1 || { cat bisect.txt; fail "sinkc bisect"; }
grep -qi "attention" bisect.txt || { cat bisect.txt; fail "the bisection names no field"; }
# Text through SentencePiece: the portable sinkc tokenizes with the library linked into it, the runtime trains
# from the token cache; neither finds a program on PATH (spm_train, spm_encode).
head -n 300 "$prefix/share/sinklab/data/builtin/default.jsonl" > small.jsonl
cat > text.sink << 'SPEC'
import "stdlib/presets.sink"
experiment text extends micro {
  model { vocab = 512 }
  data { corpus = file("small.jsonl")  tokenizer = sentencepiece(vocab = 512)  bos = false }
}
SPEC
PATH=/nonexistent "$bin/sinkc" tokenize text.sink --out runs > tokenize.log 2>&1 || { cat tokenize.log; fail "tokenize"; }
PATH=/nonexistent "$bin/sinkc" run text.sink --out runs --no-progress > text.log 2>&1 || { cat text.log; fail "run text"; }
grep -q '^completed' text.log || { cat text.log; fail "the text run did not complete"; }
"$bin/sinkc" submit spec.sink --slurm --dry-run --gpus-per-run 1 --out runs-cluster > submit.txt ||
  fail "sinkc submit --dry-run"
grep -qF "$bin/sinkc-runtime" submit.txt || { cat submit.txt; fail "the batch script does not run the installed runtime"; }
echo "node install: ok (${SECONDS} s in all)"
