"""A two-layer network trained with Adam, written for one process and made tensor parallel by the
three lines marked `# parallel`: a mesh over the job's ranks, the first layer's weights split by
columns and the second's by rows (Megatron's layout). The rest of the script is unchanged; the
sharding rules keep the hidden layer split and sum the second layer's partial products once.

    python examples/dist/tensor_parallel.py                         # one process
    mpirun -np 2 python examples/dist/tensor_parallel.py            # the same losses on 2 ranks
    EDDY_DIST_VERBOSE=1 mpirun -np 2 python examples/dist/tensor_parallel.py   # and what it did

Every rank prints nothing but rank 0, which prints the loss after each step.
"""

import numpy as np

import eddy
from eddy import dist

steps = 20
rng = np.random.default_rng(0)
x = eddy.tensor(rng.standard_normal((64, 16)))
y = eddy.tensor(rng.standard_normal((64, 4)))
w1 = eddy.tensor(rng.standard_normal((16, 32)) / 4, requires_grad=True)
b1 = eddy.tensor(np.zeros(32), requires_grad=True)
w2 = eddy.tensor(rng.standard_normal((32, 4)) / 6, requires_grad=True)
b2 = eddy.tensor(np.zeros(4), requires_grad=True)

mesh = dist.ProcessMesh([dist.size()], ["mp"])                                      # parallel
w1, b1 = (dist.shard_tensor(t, mesh, [dist.Shard(-1)]) for t in (w1, b1))            # parallel
w2 = dist.shard_tensor(w2, mesh, [dist.Shard(0)])                                     # parallel

optimizer = eddy.optim.Adam([w1, b1, w2, b2], lr=1e-2)
for step in range(steps):
    optimizer.zero_grad()
    prediction = eddy.tanh(x @ w1 + b1) @ w2 + b2
    loss = eddy.mean(eddy.square(prediction - y))
    loss.backward()
    optimizer.step()
    if dist.rank() == 0:
        print(f"step {step} loss {loss.item():.17g}")
