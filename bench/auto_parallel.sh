#!/usr/bin/env bash
# The auto-parallel steps of bench/auto_parallel.cpp on 1 and on 2 ranks, one OpenMP thread per
# rank, one after the other in one run, and the speed-up of 2 ranks over 1 (docs/distributed.md).
#
#   bash bench/auto_parallel.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
run() { OMP_NUM_THREADS=1 mpirun -np "$1" --oversubscribe --allow-run-as-root "$build/bench/auto_parallel"; }
one=$(run 1)
two=$(run 2)
printf '%s\n%s\n' "$one" "$two"
python3 - "$one" "$two" <<'PY'
import re, sys
def times(text):
    return {line[:30].strip(): float(re.search(r"([\d.]+) ms/step", line).group(1)) for line in text.splitlines()}
one, two = times(sys.argv[1]), times(sys.argv[2])
for name in one:
    print(f"{name}: 2 ranks run a step {one[name] / two[name]:.2f}x as fast as 1 (efficiency {one[name] / (2 * two[name]):.2f})")
PY
