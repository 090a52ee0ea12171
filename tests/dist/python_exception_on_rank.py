"""Rank 1 ends early, before a collective that rank 0 enters, in the way the argument names: no
argument raises an exception, `exit` calls sys.exit with a message (as argparse does), `exit_status`
calls sys.exit(3), `builtin_exit` the built-in exit(). The job must end (eddy's excepthook, or its
exit hook, calls MPI_Abort, with the rank's exit status) instead of rank 0 waiting for rank 1
forever. With `caught_exit`, rank 1 catches its own sys.exit(2) and goes on: the job must end
normally, with status 0."""

import sys

import numpy as np

import eddy
from eddy import dist

mesh = dist.ProcessMesh([dist.size()], ["mp"])
if dist.rank() == 1:
    mode = sys.argv[1:]
    if mode == ["exit"]:
        sys.exit("deliberate exit on rank 1")
    if mode == ["exit_status"]:
        sys.exit(3)
    if mode == ["builtin_exit"]:
        exit("deliberate exit on rank 1")
    if mode == ["caught_exit"]:
        try:
            sys.exit(2)
        except SystemExit:
            pass
    else:
        raise ValueError("deliberate failure on rank 1")
weights = dist.shard_tensor(eddy.tensor(np.ones((4, 4))), mesh, [dist.Shard(0)])
total = dist.full_tensor(eddy.sum(weights)).item()
if dist.rank() == 0:  # one rank prints: mpirun interleaves the ranks' lines
    print("rank 0 sum", total)
