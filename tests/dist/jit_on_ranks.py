"""eddy.jit of a distributed step from Python, under mpirun (ctest python_jit_np2): the step of
docs/distributed.md's placement-search example, jitted through eddy.value_and_grad over two
arguments, answers in its nested form with the eager step's values (to 1e-12) and gradient
placements at the traced and at the compiled call; rank 0 then prints what the search chose (run with
EDDY_COMPILER_VERBOSE=1 by the ctest entry, which checks that line)."""

import numpy as np

import eddy
from eddy import dist

rng = np.random.default_rng(0)
mesh = dist.ProcessMesh([dist.size()], ["x"])
x = dist.shard_tensor(eddy.tensor(rng.standard_normal((64, 16))), mesh, [dist.Shard(0)])
w1 = dist.shard_tensor(eddy.tensor(rng.standard_normal((16, 48)), requires_grad=True), mesh, [dist.Shard(1)])
w2 = dist.shard_tensor(eddy.tensor(rng.standard_normal((48, 2)), requires_grad=True), mesh, [dist.Shard(0)])


def step(w1, w2):
    return eddy.mean(eddy.square(eddy.tanh(x @ w1) @ w2))


eager = eddy.value_and_grad(step, argnums=(0, 1))
jitted = eddy.jit(eager)
want_value, want_grads = eager(w1, w2)
for call in ("traced", "compiled"):
    value, grads = jitted(w1, w2)
    assert isinstance(grads, tuple) and len(grads) == 2, (call, grads)
    # On several ranks the search gathers x and sums the product (the loss comes back whole where
    # eagerly it is a partial sum); the gradients keep their weights' placements.
    searched = dist.size() > 1
    assert dist.placements(want_value) == [dist.Partial("sum")]
    assert dist.placements(value) == [dist.Replicate() if searched else dist.Partial("sum")], (call, value)
    for name, got, want in (("value", value, want_value), ("w1 gradient", grads[0], want_grads[0]),
                            ("w2 gradient", grads[1], want_grads[1])):
        if name != "value":
            assert dist.placements(got) == dist.placements(want), (call, name, dist.placements(got))
        got_whole, want_whole = dist.full_tensor(got).numpy(), dist.full_tensor(want).numpy()
        difference = np.max(np.abs(got_whole - want_whole)) / max(1.0, np.max(np.abs(want_whole)))
        assert difference < 1e-12, (call, name, difference)
assert jitted.stats.traces == 1 and jitted.stats.calls == 2, jitted.stats
if dist.rank() == 0:
    print("jit on ranks: the values agree")
