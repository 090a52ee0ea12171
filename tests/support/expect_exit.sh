#!/usr/bin/env bash
# Runs a command-line test's command and passes only when it exits with STATUS and its output
# (stdout and stderr together) matches the extended regular expression PATTERN. ctest's own
# PASS_REGULAR_EXPRESSION ignores the exit status, so an `eddy` run that printed the expected line
# and then failed would pass.
#
#   expect_exit.sh STATUS PATTERN COMMAND [ARGUMENTS...]
set -u
expected_status=$1 pattern=$2
shift 2
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$status" -ne "$expected_status" ]; then
  echo "expect_exit: $1 exited with status $status, expected $expected_status" >&2
  exit 1
fi
if ! grep -Eq -- "$pattern" <<<"$output"; then
  echo "expect_exit: the output of $1 has no line matching '$pattern'" >&2
  exit 1
fi
