#!/usr/bin/env bash
# tensor_parallel_example.sh PYTHON LAUNCHER...: runs examples/dist/tensor_parallel.py as one
# process and under LAUNCHER (mpiexec -n N ...), and checks that every step's loss agrees to 1e-10.
set -eu
python=$1
shift
example="$(dirname "$0")/../../examples/dist/tensor_parallel.py"
one=$("$python" "$example")
ranks=$("$@" "$python" "$example")
"$python" - "$one" "$ranks" <<'PY'
import sys
one, ranks = ([float(line.split()[-1]) for line in text.splitlines()] for text in sys.argv[1:])
assert len(one) == len(ranks) == 20, (len(one), len(ranks))
for step, (a, b) in enumerate(zip(one, ranks)):
    assert abs(a - b) <= 1e-10 * abs(a), f"step {step}: {a} on one process, {b} on the ranks"
print(f"tensor parallel example: the losses agree at every step ({one[0]:.6f} -> {one[-1]:.6f})")
PY
