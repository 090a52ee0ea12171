#!/usr/bin/env bash
# python_solve_on_ranks.sh DIR PYTHON LAUNCHER...: runs tests/dist/python_solve_on_ranks.py as one
# process, then under LAUNCHER (mpiexec -n 2 ...) against the one-process loss.
set -eu
dir=$1 python=$2
shift 2
script="$(dirname "$0")/python_solve_on_ranks.py"
rm -rf "$dir"
loss=$("$python" "$script" "$dir/one_process")
"$@" "$python" "$script" "$dir/ranks" "$loss"
echo "python solve on ranks: loss $loss on one process and on the ranks"
