#!/usr/bin/env bash
# Creates .venv-bench with the side-by-side peers of `make bench-peers` (PyTorch and JAX on CPU,
# from PyPI, plus NumPy and safetensors; bench/peers/requirements.txt), and transformers and pytest
# for the Hugging Face interop test (docs/lm.md). Idempotent
# (scripts/sync-venv.sh). eddy itself is not installed here: bench/peers/run.py puts the build's
# Python package (BUILD/python, target _eddy) on PYTHONPATH, so the benchmark always runs the
# eddy just built. Neither `make test` nor CI uses this environment.
#
# Size: about 6 GB on disk and 4 GB downloaded (torch's CUDA libraries are most of it); about a
# minute on a fast link. See docs/dependencies.md.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv-bench"
source "$root/scripts/sync-venv.sh"
sync_venv "$venv" "$root/bench/peers/requirements.txt" install-bench-deps
"$venv/bin/python" -c "import torch, jax, numpy, safetensors, transformers; print('install-bench-deps: torch', torch.__version__, '| jax', jax.__version__, '| transformers', transformers.__version__)"
