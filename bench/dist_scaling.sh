#!/usr/bin/env bash
# Data-parallel scaling of `eddy solve` and `eddy train`: time per Adam step (per epoch for
# `train`) on 1 rank and on 2 ranks, one OpenMP thread per rank, and the parallel efficiency
# T(1) / (2 T(2)). A step's time is the difference between a long and a short run divided by the
# step difference, so start-up, compilation (cached) and writing the results cancel out; each
# figure is the median of REPEATS such differences. Used for the table in docs/distributed.md.
#
#   bash bench/dist_scaling.sh [BUILD_DIR]        (REPEATS=3 by default)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
repeats="${REPEATS:-3}"
eddy="$build/bin/eddy"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$root"

seconds() {  # ranks, then the eddy arguments
  local ranks=$1
  shift
  local start end
  start=$(date +%s.%N)
  OMP_NUM_THREADS=1 mpirun -np "$ranks" --oversubscribe --allow-run-as-root "$eddy" "$@" --quiet > /dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# name, short count, long count, then the command with COUNT where the count goes
measure() {
  local name=$1 short=$2 long=$3
  shift 3
  declare -A per_unit
  for ranks in 1 2; do
    local samples=()
    for ((i = 0; i < repeats; ++i)); do
      local a b
      a=$(seconds "$ranks" "${@//COUNT/$short}" "output.dir=$work/run")
      b=$(seconds "$ranks" "${@//COUNT/$long}" "output.dir=$work/run")
      samples+=("$(echo "($b - $a) * 1000 / ($long - $short)" | bc -l)")
    done
    per_unit[$ranks]=$(median "${samples[@]}")
  done
  printf '| %s | %.1f | %.1f | %.2f |\n' "$name" "${per_unit[1]}" "${per_unit[2]}" \
    "$(echo "${per_unit[1]} / (2 * ${per_unit[2]})" | bc -l)"
}

echo "| run (time per unit) | 1 rank (ms) | 2 ranks (ms) | efficiency |"
echo "|---|---|---|---|"
measure "eddy solve examples/pinn/burgers.yaml (Adam step, 10,800 points, float64)" 50 200 \
  solve examples/pinn/burgers.yaml training.adam.steps=COUNT training.lbfgs.iterations=0 validation.every=0 \
  output.vtk=false
measure "eddy solve examples/pinn/burgers.yaml (L-BFGS evaluation)" 20 80 \
  solve examples/pinn/burgers.yaml training.adam.steps=0 training.lbfgs.iterations=COUNT \
  training.lbfgs.evaluations=COUNT validation.every=0 output.vtk=false
measure "eddy train examples/operator/burgers_fno1d.yaml (epoch, float32)" 2 8 \
  train examples/operator/burgers_fno1d.yaml training.epochs=COUNT output.vtk=false
