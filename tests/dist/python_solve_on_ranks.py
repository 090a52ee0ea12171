"""eddy.solve from Python under mpirun: `python_solve_on_ranks.py DIR` solves a short Burgers run
on every rank of the job and prints rank 0's loss; `python_solve_on_ranks.py DIR ONE_PROCESS_LOSS`
also checks it against a one-process run's (ctest runs this file both ways, tests/CMakeLists.txt).
Then one epoch of eddy.train, whose test errors every rank must return (rank 0 computes them)."""

import os
import pathlib
import sys

import eddy

ROOT = pathlib.Path(__file__).resolve().parents[2]

result = eddy.solve(str(ROOT / "examples/pinn/burgers.yaml"),
                    {"training.adam.steps": 4, "training.lbfgs.iterations": 3, "conditions.pde.points": 201,
                     "validation.every": 0, "output.grid": [16, 10], "output.dir": sys.argv[1]})
assert result["finished"], result["message"]
if os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "0":
    print(repr(result["loss"]))
if len(sys.argv) > 2:
    expected = float(sys.argv[2])
    assert abs(result["loss"] - expected) <= 1e-9 * abs(expected), (result["loss"], expected)
    assert (pathlib.Path(sys.argv[1]) / "solution.pvti").exists()

trained = eddy.train(str(ROOT / "examples/operator/darcy16.yaml"),
                     {"training.epochs": 1, "output.dir": sys.argv[1] + "/operator"})
assert set(trained["test_relative_l2"]) == {"16", "8"}, trained
