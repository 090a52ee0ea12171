#!/usr/bin/env bash
# `eddy train` of an FNO-2D on 128 x 128 fields on one process and on 2 ranks of one thread each:
# the grid split (parallel.names [grid]), the batch split as distributed tensors (parallel.names
# [dp]) and the hand-written data parallelism (no parallel section); docs/distributed.md, "An
# FNO's grid over the ranks". The data are 32 random fields and their low-pass filtered copies
# (written with the project's .venv, h5py and NumPy). An epoch's time is the difference between
# runs of 4 and 1 epochs divided by 3, after an untimed run per layout that compiles its kernels;
# the peak RSS is the largest process's, from /usr/bin/time.
#
#   bash bench/fno_ranks.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
python="$root/.venv/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" - "$work/fields.h5" <<'PY'
import sys
import h5py
import numpy as np
rng = np.random.default_rng(0)
n = 128
k = np.fft.fftfreq(n)[:, None] ** 2 + np.fft.fftfreq(n)[None, :] ** 2
with h5py.File(sys.argv[1], "w") as f:
    for split, count in (("train", 32), ("test", 8)):
        a = rng.standard_normal((count, n, n)).astype(np.float32)
        f[f"{split}/a"] = a
        f[f"{split}/u"] = np.real(np.fft.ifft2(np.fft.fft2(a) * np.exp(-200 * k))).astype(np.float32)
PY
cat > "$work/fno.yaml" <<EOF
description: FNO-2D on a 128 x 128 grid, for timing
data:
  file: $work/fields.h5
  train: {input: train/a, output: train/u}
  test: {name: t, input: test/a, output: test/u}
model: {type: fno, modes: [16, 16], width: 32, layers: 4, projection_width: 64}
training: {epochs: 1, batch_size: 8, learning_rate: 1.0e-3}
output: {checkpoint_every: 0, vtk: false}
EOF

export OMP_NUM_THREADS=1
# run NAME RANKS EPOCHS OVERRIDES...: prints "seconds peak-RSS-KB".
run() {
  local name=$1 ranks=$2 epochs=$3
  shift 3
  local launcher=()
  [ "$ranks" -gt 1 ] && launcher=(mpiexec -n "$ranks" --oversubscribe --allow-run-as-root)
  /usr/bin/time -f "%e %M" -o "$work/time" "${launcher[@]}" "$build/bin/eddy" train "$work/fno.yaml" \
    training.epochs="$epochs" "$@" output.dir="$work/$name-$epochs" --quiet > /dev/null
  cat "$work/time"
}
for layout in "one-process 1" "grid 2 parallel.mesh=[2] parallel.names=[grid]" \
              "dp-section 2 parallel.mesh=[2] parallel.names=[dp]" "hand-written 2"; do
  # shellcheck disable=SC2086
  set -- $layout
  name=$1 ranks=$2
  shift 2
  run "$name-warm" "$ranks" 1 "$@" > /dev/null
  read -r short _ < <(run "$name" "$ranks" 1 "$@")
  read -r long rss < <(run "$name" "$ranks" 4 "$@")
  printf '%-13s %.2f s per epoch, peak RSS %.2f GB\n' "$name" "$(echo "($long - $short) / 3" | bc -l)" \
    "$(echo "$rss / 1000000" | bc -l)"
done
