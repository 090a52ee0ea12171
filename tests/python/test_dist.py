"""eddy.dist from Python on one process: meshes, placements and distributed tensors through the
ordinary ops, autodiff and optimisers. Several ranks: tests/dist (the tensor-parallel example
under mpirun, and the C++ tests of every sharding rule)."""

import numpy as np
import pytest

import eddy
from eddy import dist

RNG = np.random.default_rng(3)


def test_mesh_and_placements():
    assert dist.size() == 1 and dist.rank() == 0
    mesh = dist.ProcessMesh([1, 1], ["dp", "mp"])
    assert mesh.shape == [1, 1] and mesh.names == ["dp", "mp"]
    assert mesh.axis("mp") == 1 and mesh.coordinate(0) == 0
    assert repr(mesh) == "mesh [1, 1] (dp, mp)"
    assert repr(dist.Shard(1)) == "Shard(1)" and dist.Shard(1).axis == 1
    assert dist.Replicate() == dist.Replicate() and dist.Replicate().axis is None
    assert dist.Replicate() != "x" and dist.Shard(0) not in ["x", None]
    assert dist.Partial().is_partial and repr(dist.Partial("max")) == "Partial(max)"
    with pytest.raises(eddy.Error, match="mpirun -np 2"):
        dist.ProcessMesh([2], ["x"])
    with pytest.raises(eddy.Error, match="'sum' or 'max'"):
        dist.Partial("mean")


def test_ops_gradients_and_adam_on_distributed_tensors():
    mesh = dist.ProcessMesh([1], ["mp"])
    x = RNG.standard_normal((6, 4))
    w = RNG.standard_normal((4, 3))
    whole = eddy.tensor(w, requires_grad=True)
    sharded = dist.shard_tensor(eddy.tensor(w, requires_grad=True), mesh, [dist.Shard(-1)])
    assert dist.is_distributed(sharded) and not dist.is_distributed(whole)
    assert dist.placements(sharded) == [dist.Shard(1)]
    assert "DistributedTensor(shape=[4, 3], placements=[Shard(1)]" in repr(sharded)

    y = eddy.tensor(x) @ sharded
    assert dist.placements(y) == [dist.Shard(1)]
    np.testing.assert_allclose(np.asarray(dist.full_tensor(y)), x @ w, rtol=1e-12)
    eddy.sum(eddy.square(y)).backward()
    eddy.sum(eddy.square(eddy.tensor(x) @ whole)).backward()
    assert dist.placements(sharded.grad) == [dist.Shard(1)]
    np.testing.assert_allclose(np.asarray(dist.to_local(sharded.grad)), np.asarray(whole.grad), rtol=1e-12)

    optimizer = eddy.optim.Adam([sharded], lr=0.1)
    optimizer.step()
    reference = eddy.optim.Adam([whole], lr=0.1)
    reference.step()
    np.testing.assert_allclose(np.asarray(dist.full_tensor(sharded)), np.asarray(whole), rtol=1e-12)


def test_grad_with_respect_to_a_distributed_argument_that_does_not_require_grad():
    # The fresh leaf grad makes for it required grad on the whole, not on its local part, whose
    # derivatives a distributed tensor carries: the gradient came back zero.
    mesh = dist.ProcessMesh([1], ["mp"])
    w = RNG.standard_normal(4)
    for placement in (dist.Replicate(), dist.Shard(0)):
        sharded = dist.shard_tensor(eddy.tensor(w), mesh, [placement])
        gradient = eddy.grad(lambda t: eddy.sum(eddy.square(t)))(sharded)
        np.testing.assert_allclose(np.asarray(dist.full_tensor(gradient)), 2 * w)


def test_jacobian_of_a_distributed_function_in_reverse_mode_says_to_use_forward_mode():
    # It failed naming a grad_outputs the caller never passed; forward mode gives the jacobian.
    mesh = dist.ProcessMesh([1], ["mp"])
    x = dist.shard_tensor(eddy.tensor(RNG.standard_normal(3)), mesh, [dist.Shard(0)])
    with pytest.raises(eddy.Error, match="jacobian: reverse mode of a distributed function is not supported"):
        eddy.jacobian(lambda t: eddy.square(t), x)
    forward = eddy.jacobian(lambda t: eddy.square(t), x, mode="forward")
    np.testing.assert_allclose(np.asarray(dist.full_tensor(forward)), np.diag(2 * np.asarray(dist.full_tensor(x))))


def test_partial_and_sharded_values_are_not_read_as_a_whole():
    mesh = dist.ProcessMesh([1], ["x"])
    partial = dist.from_local(eddy.tensor(np.ones(3)), mesh, [dist.Partial()])
    assert dist.placements(dist.reshard(partial, [dist.Replicate()])) == [dist.Replicate()]
    with pytest.raises(eddy.Error, match="full_tensor"):
        np.asarray(partial)
    # Replicated on every mesh axis: readable as it is.
    replicated = dist.shard_tensor(eddy.tensor(np.arange(3.0)), mesh, [dist.Replicate()])
    np.testing.assert_array_equal(np.asarray(replicated), [0.0, 1.0, 2.0])


def test_from_local_takes_the_global_shape_and_refuses_a_part_that_is_not_this_ranks():
    mesh = dist.ProcessMesh([1], ["x"])
    part = eddy.tensor(np.arange(6.0).reshape(3, 2))
    placed = dist.from_local(part, mesh, [dist.Shard(0)], shape=[3, 2])
    assert list(placed.shape) == [3, 2]
    np.testing.assert_array_equal(np.asarray(dist.full_tensor(placed)), np.arange(6.0).reshape(3, 2))
    # On one rank the part of a [4, 2] tensor is all 4 rows.
    with pytest.raises(eddy.Error, match=r"part has shape \[3, 2\], but its part of a tensor of shape \[4, 2\]"):
        dist.from_local(part, mesh, [dist.Shard(0)], shape=[4, 2])


def test_sharded_optimizer_on_one_process_is_the_optimiser_it_wraps():
    w0 = RNG.standard_normal((5, 3))
    x, y = RNG.standard_normal((8, 5)), RNG.standard_normal((8, 3))
    plain_w, sharded_w = (eddy.tensor(w0, requires_grad=True) for _ in range(2))
    plain = eddy.optim.AdamW([plain_w], lr=0.05, weight_decay=0.1)
    sharded = dist.ShardedOptimizer([sharded_w], lambda slices: eddy.optim.AdamW(slices, lr=0.05, weight_decay=0.1))
    for _ in range(4):
        for w, optimizer in ((plain_w, plain), (sharded_w, sharded)):
            optimizer.zero_grad()
            ((eddy.tensor(x) @ w - eddy.tensor(y)) ** 2).sum().backward()
            optimizer.step()
    np.testing.assert_array_equal(sharded_w.numpy(), plain_w.numpy())
    assert sharded.owned == (0, 15) and sharded.steps == 4
    # One rank holds the whole state: Adam's two moments of the one slice, and the step.
    assert sorted(sharded.local_state_dict()) == ["adamw.m.0", "adamw.step", "adamw.v.0"]
    whole, expected = sharded.state_dict(), plain.state_dict()
    assert sorted(whole) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(whole[key].numpy(), expected[key].numpy())


def test_sharded_optimizer_refuses_what_it_cannot_shard():
    w = eddy.tensor(RNG.standard_normal((4, 4)), requires_grad=True)
    with pytest.raises(eddy.Error, match="soap cannot have its state sharded"):
        dist.ShardedOptimizer([w], lambda slices: eddy.optim.SOAP(slices))
    with pytest.raises(eddy.Error, match="must return an eddy.optim optimiser .*, got LBFGS"):
        dist.ShardedOptimizer([w], lambda slices: eddy.optim.LBFGS(slices))
    with pytest.raises(eddy.Error, match="gradients must be 'to_average'"):
        dist.ShardedOptimizer([w], lambda slices: eddy.optim.SGD(slices), gradients="summed")


def test_deferred_gradient_sums_from_python():
    # One process: the parts are the whole gradients, and the calls are what a multi-rank script
    # makes (tests/dist's DeferredGradientSumsGiveTheSameSteps checks the sums on 2 and 4 ranks).
    mesh = dist.ProcessMesh([1], ["dp"])
    x = dist.shard_tensor(eddy.tensor(RNG.standard_normal((8, 5))), mesh, [dist.Shard(0)])
    w0 = RNG.standard_normal((5, 3))
    plain_w, deferred_w = (eddy.tensor(w0, requires_grad=True) for _ in range(2))
    eddy.sum(eddy.square(x @ plain_w)).backward()
    with dist.defer_gradient_sums(mesh, "dp"):
        eddy.sum(eddy.square(x @ deferred_w)).backward()
    dist.sum_gradients([deferred_w], mesh, "dp")
    np.testing.assert_allclose(np.asarray(deferred_w.grad), np.asarray(plain_w.grad), rtol=1e-12)
    zero = dist.ShardedOptimizer([deferred_w], lambda slices: eddy.optim.SGD(slices, lr=0.1), gradients="to_sum",
                                 mesh=mesh, axis="dp")
    zero.step()
    np.testing.assert_allclose(deferred_w.numpy(), w0 - 0.1 * np.asarray(plain_w.grad), rtol=1e-12)
    with pytest.raises(eddy.Error, match=r"no axis .mp. in mesh \[1\] \(dp\)"):
        dist.defer_gradient_sums(mesh, "mp")


def test_an_update_in_place_of_a_distributed_tensor_says_so():
    # It said "inside eddy.jit": a distributed tensor's global shell is abstract too.
    mesh = dist.ProcessMesh([1], ["x"])
    w = dist.shard_tensor(eddy.tensor(np.ones((4, 2))), mesh, [dist.Shard(0)])
    with pytest.raises(eddy.Error, match="on a distributed tensor is not done in place; write x = x - y"):
        w -= 0.1
    # A slice's write went into a copy and left the tensor as it was, silently.
    for placement in (dist.Replicate(), dist.Shard(0), dist.Shard(1)):
        y = dist.shard_tensor(eddy.tensor(np.zeros((4, 4))), mesh, [placement])
        with pytest.raises(eddy.Error, match=r"t\[...\] = v on a distributed tensor is not supported"):
            y[1:3, 0:2] = 5.0
