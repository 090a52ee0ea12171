#!/usr/bin/env bash
# `eddy lm train` of examples/lm/fortunes_gpt.yaml on one process with 2 threads, and on 2 ranks
# of one thread data parallel and tensor parallel (docs/lm.md, "On several ranks"). A step's time
# is the difference between runs of 14 and 4 steps divided by 10, so start-up, tokenising and
# compiling cancel out.
#
#   bash bench/lm_ranks.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$root"
common=(training.schedule.warmup=2 training.evaluate_every=1000 training.evaluation_batches=1
        output.checkpoint_every=0)

seconds() {  # name, ranks, steps, then overrides
  local name=$1 ranks=$2 steps=$3
  shift 3
  local launcher=(env OMP_NUM_THREADS=2)
  [ "$ranks" -gt 1 ] && launcher=(env OMP_NUM_THREADS=1 mpiexec -n "$ranks" --oversubscribe --allow-run-as-root)
  local start end
  start=$(date +%s.%N)
  "${launcher[@]}" "$build/bin/eddy" lm train examples/lm/fortunes_gpt.yaml "${common[@]}" training.steps="$steps" \
    "$@" output.dir="$work/$name" --quiet > /dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

for config in "one-process 1" "data-parallel 2" "tensor-parallel 2 parallel.mesh=[2] parallel.names=[mp]"; do
  # shellcheck disable=SC2086
  set -- $config
  name=$1 ranks=$2
  shift 2
  # Each layout compiles programs of its own: a first run fills the kernel cache for them, so
  # that neither timed run compiles.
  seconds "$name-warm" "$ranks" 3 "$@" > /dev/null
  short=$(seconds "$name-4" "$ranks" 4 "$@")
  long=$(seconds "$name-14" "$ranks" 14 "$@")
  printf '%-16s %.3f s per step\n' "$name" "$(echo "($long - $short) / 10" | bc -l)"
done
