#!/usr/bin/env bash
# Creates .venv-bench with the side-by-side peers of `make bench-peers` (PyTorch and JAX on CPU,
# from PyPI, plus NumPy and safetensors; bench/peers/requirements.txt). Idempotent: a stamp holds
# the requirements' checksum. eddy itself is not installed here: bench/peers/run.py puts the
# build's Python package (BUILD/python, target _eddy) on PYTHONPATH, so the benchmark always runs
# the eddy just built. Neither `make test` nor CI uses this environment.
#
# Size: about 6 GB on disk and 4 GB downloaded (torch's CUDA libraries are most of it); about a
# minute on a fast link. See docs/dependencies.md.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv-bench"
requirements="$root/bench/peers/requirements.txt"
stamp="$venv/.requirements.sha256"
wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "install-bench-deps: installing PyTorch, JAX, NumPy and safetensors into .venv-bench"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$requirements"
  echo "$wanted" > "$stamp"
fi
"$venv/bin/python" -c "import torch, jax, numpy, safetensors; print('install-bench-deps: torch', torch.__version__, '| jax', jax.__version__)"
