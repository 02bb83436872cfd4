#!/bin/bash
# Installs sinklab without root, apt or network on a machine that has a pip PyTorch, CMake and a C++20
# compiler (and the CUDA toolkit, for the GPU backend): a cluster's GPU node or login node. Run it in the
# folder that scripts/pack-node.sh's archive unpacks to. It builds the runtime against the PyTorch of the
# python3 on PATH (or --python) with scripts/setup-gpu.sh, as a GPU job's build is made, and installs
#   PREFIX/bin/sinkc           the front end, statically linked (portable/bin/sinkc in the archive)
#   PREFIX/bin/sinkc-runtime   the runtime, which sinkc finds beside itself
#   PREFIX/share/sinklab/      the standard library, the builtin corpus, scripts
#   scripts/install-node.sh PREFIX [--python PYTHON] [--build DIR] [--no-cuda] [-DOPTION=VALUE...]
# --no-cuda installs a runtime without the CUDA backend where the toolkit's headers are missing (otherwise
# that is an error: on a GPU node it means the toolkit is not loaded, e.g. `module load cuda`).
set -euo pipefail
usage="usage: scripts/install-node.sh PREFIX [--python PYTHON] [--build DIR] [--no-cuda] [-DOPTION=VALUE...]"
prefix=$(realpath -m "${1:?$usage}")
shift
build=build-gpu python="" options=() require_cuda=ON
while (($#)); do
  case $1 in
    --python) python=${2:?$usage}; shift ;;
    --build) build=${2:?$usage}; shift ;;
    --no-cuda) require_cuda=OFF ;;
    -D*) options+=("$1") ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
[[ -z $python ]] || python=$(realpath -s "$python")  # absolute, links kept: an environment is found by its path
cd "$(dirname "$0")/.."
fail() { echo "install-node: $*" >&2; exit 1; }
[[ -x portable/bin/sinkc ]] || fail "portable/bin/sinkc is missing: run this in the folder scripts/pack-node.sh's \
archive unpacks to (a clone has no portable front end; make the archive on a machine with Debian's packages)"
[[ -d .deps/include ]] || fail ".deps/ is missing: the archive of scripts/pack-node.sh carries it"
if [[ -n $python ]]; then
  # setup-gpu.sh asks the python3 on PATH for its PyTorch: the one in --python's folder (a virtual or conda
  # environment's bin/, found through its own folder, so not through a link made elsewhere).
  [[ -x $(dirname "$python")/python3 ]] || fail "--python: $(dirname "$python")/python3 is not an executable"
  PATH="$(cd "$(dirname "$python")" && pwd):$PATH"
fi
python3 -c 'import torch' 2> /dev/null || fail "$(command -v python3 || echo python3) has no torch: \
pip install torch (into a virtual environment of yours), or name its python with --python"
echo "install-node: the runtime against torch $(python3 -c 'import torch; print(torch.__version__)') ($(command -v python3))"

# The runtime only: the front end comes built; no tests (GoogleTest is not on a node).
scripts/setup-gpu.sh .deps "$build" -DSINKLAB_REQUIRE_CUDA="$require_cuda" -DSINKLAB_TESTS=OFF "${options[@]}" \
  --target sinkc-runtime
cmake --install "$build" --prefix "$prefix" > /dev/null
install -m 755 portable/bin/sinkc "$prefix/bin/sinkc"
# The installed pair answers: the front end, and the runtime it found beside itself.
"$prefix/bin/sinkc" --version || fail "the installed sinkc does not start"
"$prefix/bin/sinkc" --version | grep -q '^sinkc-runtime ' || fail "the installed sinkc does not find its runtime"
echo "install-node: installed in $prefix; put $prefix/bin on PATH"
