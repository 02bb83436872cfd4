#!/bin/bash
# The pip PyTorch a GPU node runs (scripts/requirements-torch.txt: torch 2.11.0
# with its CUDA 13 nvidia-* wheels, and Hugging Face's transformers), in a
# virtual environment of Debian's python3, never system-wide. It is kept
# between runs on this machine, one per version of the requirements, under
# SINKLAB_CACHE (default ~/.cache/sinklab); the first install downloads about
# 3 GB and takes 2-3 minutes. Prints the environment's folder.
#   venv=$(scripts/torch-venv.sh) && PATH=$venv/bin:$PATH scripts/setup-gpu.sh ...
#
# Why the nvidia-* wheels and not the toolkit in /usr/local/cuda: torch alone
# with the three libraries the toolkit lacks (cuSPARSELt, NVSHMEM, cuFile) is
# 1.6 GB instead of 4.6 GB, but then every program linking its LibTorch needs
# LD_LIBRARY_PATH=/usr/local/cuda/lib64, and cuDNN and NCCL come from other
# releases than the ones this torch was built with. With the wheels the
# layout is a GPU node's own (docs/MEASUREMENTS.md has the measurements).
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=scripts/requirements-torch.txt
cache=${SINKLAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sinklab}
key=$(sha256sum "$requirements" | cut -c1-12)
venv=$cache/venv-torch-$key
if [[ ! -f $venv/.installed ]]; then
  echo "torch-venv: installing $requirements into $venv" >&2
  mkdir -p "$cache"
  # Environments of earlier requirements: 4-5 GB each.
  find "$cache" -maxdepth 1 -name 'venv-torch-*' ! -name "venv-torch-$key" -exec rm -rf {} + 2> /dev/null || true
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --no-input -r "$requirements" >&2
  "$venv/bin/python" -c 'import torch, transformers; print("torch-venv: torch", torch.__version__,
        "transformers", transformers.__version__)' >&2
  touch "$venv/.installed"
fi
echo "$venv"
