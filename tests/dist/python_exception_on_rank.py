"""Rank 1 raises before a collective that rank 0 enters, or with the argument `exit` calls
sys.exit with an error (as argparse does; with `exit_status`, sys.exit(3), whose status the job
must end with), or with `builtin_exit` the built-in exit(): the job must end (eddy's excepthook, or its exit hook,
calls MPI_Abort) instead of rank 0 waiting for rank 1 forever."""

import sys

import numpy as np

import eddy
from eddy import dist

mesh = dist.ProcessMesh([dist.size()], ["mp"])
if dist.rank() == 1:
    if sys.argv[1:] == ["exit"]:
        sys.exit("deliberate exit on rank 1")
    if sys.argv[1:] == ["exit_status"]:
        sys.exit(3)
    if sys.argv[1:] == ["builtin_exit"]:
        exit("deliberate exit on rank 1")
    raise ValueError("deliberate failure on rank 1")
weights = dist.shard_tensor(eddy.tensor(np.ones((4, 4))), mesh, [dist.Shard(0)])
print("rank", dist.rank(), "sum", dist.full_tensor(eddy.sum(weights)).item())
