#!/usr/bin/env bash
# Runs the libFuzzer harnesses of a fuzz build (`make fuzz`, docs/fuzzing.md), one at a time, each
# for SECONDS on a working copy of its seeds (tests/fuzz/corpus/NAME is only read), and prints
# per harness the seconds, the executions, the corpus size and the findings. Exits 1 when any
# harness found something: a crash or sanitizer report (crash-*), a leak (leak-*), an input over
# the time limit (timeout-*) or the memory limit (oom-*), all kept in BUILD/findings/NAME/.
#
#   scripts/fuzz.sh BUILD SECONDS NAME...
set -uo pipefail
build=$1 seconds=$2
shift 2
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$build" && pwd)"

# The allocation and time limits of a finding; ASan and UBSan stop at the first report.
limits=(-rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=30)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/fuzz/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1

failed=0
summary=()
for name in "$@"; do
  binary="$build/fuzz/fuzz_$name"
  if [ ! -x "$binary" ]; then
    echo "fuzz: no harness $binary; the harnesses are: $(cd "$build/fuzz" && ls fuzz_* | sed 's/^fuzz_//' | tr '\n' ' ')" >&2
    exit 2
  fi
  corpus="$build/fuzz-corpus/$name" findings="$build/findings/$name" work="$build/fuzz-work/$name"
  mkdir -p "$corpus" "$findings" "$work"
  cp -n "$root/tests/fuzz/corpus/$name"/* "$corpus"/ 2>/dev/null
  dict=()
  [ -f "$root/tests/fuzz/$name.dict" ] && dict=(-dict="$root/tests/fuzz/$name.dict")
  before=$(find "$findings" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  log="$build/findings/$name.log"
  echo "fuzz: $name for ${seconds} s (log: $log)"
  start=$(date +%s)
  # Run in a scratch folder of its own: a config may name output files relative to it.
  # libhdf5 has no frame pointers: the suppression of its leak (tests/fuzz/lsan.supp) needs the
  # slow unwinder to see the HDF5 function that allocated.
  unwind=""
  [ "$name" = hdf5 ] && unwind=":fast_unwind_on_malloc=0"
  (cd "$work" && ASAN_OPTIONS="$ASAN_OPTIONS$unwind" "$binary" "${limits[@]}" "${dict[@]}" -max_total_time="$seconds" -print_final_stats=1 \
     -artifact_prefix="$findings/" "$corpus") >"$log" 2>&1
  status=$?
  elapsed=$(( $(date +%s) - start ))
  executions=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
  size=$(find "$corpus" -type f | wc -l)
  after=$(find "$findings" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  found=$(( after - before ))
  if [ "$status" -ne 0 ] || [ "$found" -gt 0 ]; then
    failed=1
    grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error:|==[0-9]+==' "$log" | sed 's/^/  /'
  fi
  summary+=("$(printf '%-18s %6s s %12s executions %6s corpus %3s findings' "$name" "$elapsed" "${executions:-?}" "$size" "$found")")
done
printf '%s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "fuzz: findings in $build/findings/ (reproduce: $build/fuzz/fuzz_NAME FILE; docs/fuzzing.md)" >&2
  exit 1
fi
