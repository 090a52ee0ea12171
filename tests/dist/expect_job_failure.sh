#!/usr/bin/env bash
# expect_job_failure.sh SECONDS PATTERN COMMAND...: passes when COMMAND ends within SECONDS with
# a non-zero status and PATTERN (an extended regex) in its output; a hang fails, not stalls.
set -u
limit=$1 pattern=$2
shift 2
start=$(date +%s)
output=$(timeout --kill-after=5 "$limit" "$@" 2>&1)
status=$?
elapsed=$(( $(date +%s) - start ))
printf '%s\n' "$output"
# timeout's own statuses (124, or 137 after --kill-after) only when the limit was reached: a job
# whose rank died from SIGKILL also ends with 137, at once.
if { [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; } && [ "$elapsed" -ge "$limit" ]; then
  echo "expect_job_failure: FAIL: still running after ${limit}s (a hang)"
  exit 1
fi
if [ "$status" -eq 0 ]; then
  echo "expect_job_failure: FAIL: the job succeeded"
  exit 1
fi
if ! printf '%s\n' "$output" | grep -Eq -- "$pattern"; then
  echo "expect_job_failure: FAIL: exit status $status, but no line matches: $pattern"
  exit 1
fi
echo "expect_job_failure: ok (exit status $status)"
