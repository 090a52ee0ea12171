#!/usr/bin/env bash
# The GPU suite and the GPU benchmarks in one go (docs/gpu.md): every test labelled `gpu`, the
# compiler's generated kernels on the GPU, `eddy solve` with `device: cuda`, eddy's eager CUDA ops
# beside PyTorch's, and the PINN and FNO training steps of bench/peers beside PyTorch eager and
# torch.compile, all on the same GPU. Sized to finish in under 8 minutes on one GPU.
#
#   scripts/gpu-check.sh [BUILD_DIR]
#
# BUILD_DIR is a build tree (default: build), or a folder laid out like one that
# scripts/gpu-bundle.sh made for a GPU machine that has the CUDA toolkit and PyTorch but not
# eddy's build dependencies (its lib/ then holds the libraries the programs need).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
[ -d "$build/lib" ] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuBLAS, cuFFT and NVRTC from the machine's own CUDA toolkit, wherever it keeps them: the
# system's library path, the toolkit's folder, or the CUDA wheels beside PyTorch.
for library in libcublas.so.13 libnvrtc.so.13 libcufft.so.12; do
  ldconfig -p 2>/dev/null | grep -q "$library" && continue
  found=$(find /usr/local/cuda/ /usr/local/lib /opt -maxdepth 8 -name "$library" 2>/dev/null | head -1)
  [ -n "$found" ] && export LD_LIBRARY_PATH="$(dirname "$found"):${LD_LIBRARY_PATH:-}"
done
missing=$(ldd "$build/tests/cuda_tests" | grep "not found")
[ -n "$missing" ] && { echo "libraries not found:"; echo "$missing"; exit 1; }

status=0
echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not found"
echo "== cuda_tests"
# Each step has a time limit, so that a hung kernel costs minutes, not the GPU lease.
timeout 300 "$build/tests/cuda_tests" --gtest_brief=1 || status=1
echo "== compiler_tests (generated kernels on the GPU)"
timeout 60 "$build/tests/compiler_tests" --gtest_brief=1 --gtest_filter='CudaRunner.*' || status=1

echo "== eager ops: eddy beside PyTorch (median seconds per call; ratio > 1: eddy faster)"
eddy_times=$(mktemp) torch_times=$(mktemp)
timeout 120 "$build/bench/gpu_eager_ops" > "$eddy_times" || status=1
timeout 120 python3 "$here/bench/gpu/torch_ops.py" > "$torch_times" || status=1
join <(sort "$eddy_times") <(sort "$torch_times") |
  awk '{ printf "%-26s eddy %.3e s  torch %.3e s  torch/eddy %.2f\n", $1, $2, $3, $3 / $2 }'
rm -f "$eddy_times" "$torch_times"

echo "== eddy solve with device: cuda beside device: cpu (examples/pinn/burgers.yaml, 500 Adam steps)"
# The same file on both devices: each must finish, and their errors after the same steps agree
# as two float64 trajectories do (the GPU sums in another order).
runs=$(mktemp -d)
for device in cpu cuda; do
  start=$(date +%s.%N)
  timeout 150 "$build/bin/eddy" solve "$here/examples/pinn/burgers.yaml" --device "$device" --quiet \
    training.adam.steps=500 training.lbfgs.iterations=0 validation.every=0 output.dir="$runs/$device" \
    output.vtk=false > "$runs/$device.log" 2>&1 || status=1
  echo "$device: $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f s", e - s }'); $(tr '\n' ' ' < "$runs/$device.log")"
done
rm -rf "$runs"

echo "== training steps: eddy beside PyTorch on the GPU (bench/peers)"
timeout 420 python3 "$here/bench/peers/run.py" --build "$build" --device cuda --threads 1 --min-time 2 \
  --data "${TMPDIR:-/tmp}/eddy-gpu-peers/inputs.safetensors" --workloads burgers kovasznay fno \
  --impls "eddy C++" "eddy compiled" "torch eager" "torch.compile" || status=1
exit $status
