"""eddy.jit: compiled Python functions equal their eager runs, retrace on new signatures, run
without calling back into Python once traced, and let Python exceptions through unchanged."""

import collections
import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import eddy


def rng_tensor(seed, shape):
    return eddy.tensor(np.random.default_rng(seed).standard_normal(shape))


def test_values_and_output_form_match_eager():
    def f(x, y):
        return eddy.tanh(x) * y + eddy.exp(-x * x), eddy.sum(x * y)

    jitted = eddy.jit(f)
    for seed in (1, 2):  # the traced call, then the compiled program
        x, y = rng_tensor(seed, (6, 5)), rng_tensor(seed + 10, (6, 5))
        got, expected = jitted(x, y), f(x, y)
        assert isinstance(got, tuple) and len(got) == 2
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    assert isinstance(eddy.jit(lambda x: [x * 2.0])(x), list)
    single = eddy.jit(lambda x: eddy.sin(x))
    single(x)
    assert isinstance(single(x), eddy.Tensor)


def test_a_namedtuple_comes_back_as_itself():
    # It came back as a plain tuple, so `result.loss` worked eagerly and failed under jit.
    Step = collections.namedtuple("Step", "loss gradient")
    Pair = collections.namedtuple("Pair", "first second")

    def step(x):
        return Step(eddy.sum(x * x), [Pair(2 * x, (x,)), Step(x, x)])

    jitted = eddy.jit(step)
    for seed in (1, 2):  # the traced call, then the compiled program
        x = rng_tensor(seed, (3,))
        got = jitted(x)
        assert type(got) is Step and type(got.gradient[0]) is Pair and type(got.gradient[1]) is Step
        assert type(got.gradient[0].second) is tuple
        np.testing.assert_allclose(got.loss.numpy(), step(x).loss.numpy(), rtol=1e-12)
        np.testing.assert_allclose(got.gradient[0].first.numpy(), 2 * x.numpy(), rtol=1e-12)
    assert jitted.stats.traces == 1


def test_nested_tuples_lists_and_dicts_come_back_as_the_function_gave_them():
    # value_and_grad over two arguments gives (value, (g0, g1)); the inner tuple used to be stacked
    # into one tensor. Shapes differ here, which stacking could not have hidden.
    def loss(a, b):
        return eddy.sum(a * a) + eddy.sum(b) * eddy.sum(a)

    def structured(a, b):
        value, (ga, gb) = eddy.value_and_grad(loss, argnums=(0, 1))(a, b)
        return {"value": value, "gradients": [ga, (gb,)]}

    jitted_pair = eddy.jit(eddy.value_and_grad(loss, argnums=(0, 1)))
    jitted = eddy.jit(structured)
    for seed in (6, 7):  # the traced call, then the compiled program
        a, b = rng_tensor(seed, (3, 2)), rng_tensor(seed + 10, (4,))
        value, (ga, gb) = jitted_pair(a, b)
        want_value, (want_a, want_b) = eddy.value_and_grad(loss, argnums=(0, 1))(a, b)
        for got, want in ((value, want_value), (ga, want_a), (gb, want_b)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
        out = jitted(a, b)
        assert list(out) == ["value", "gradients"] and isinstance(out["gradients"], list)
        assert isinstance(out["gradients"][1], tuple) and out["gradients"][1][0].shape == (4,)
        np.testing.assert_allclose(out["gradients"][0].numpy(), want_a.numpy(), rtol=1e-12, atol=1e-12)
    assert jitted.stats.traces == 1 and jitted.stats.calls == 2
    with pytest.raises(eddy.Error, match=r"the keys of a returned dict must be str"):
        eddy.jit(lambda x: {1: x})(a)


def test_grad_inside_the_function_matches_eager():
    def loss(w, x):
        return eddy.sum(eddy.sin(x * w) * w)

    def step(w, x):
        gradient = eddy.grad(loss)(w, x)
        second = eddy.grad(lambda v: eddy.sum(eddy.grad(loss)(v, x)))(w)
        return w - 0.1 * gradient, second

    jitted = eddy.jit(step)
    x = rng_tensor(3, (8,))
    for seed in (4, 5):
        w = rng_tensor(seed, (8,))
        for a, b in zip(jitted(w, x), step(w, x)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    assert jitted.stats.traces == 1 and jitted.stats.calls == 2


def test_retraces_on_a_new_shape_and_skips_python_on_a_known_one():
    bodies_run = []

    def f(x):
        bodies_run.append(x.shape)
        return eddy.sum(x * x, axis=0)

    jitted = eddy.jit(f)
    jitted(rng_tensor(1, (4, 3)))
    jitted(rng_tensor(2, (4, 3)))
    assert jitted.stats.traces == 1 and bodies_run == [(4, 3)]
    out = jitted(rng_tensor(3, (7, 2)))
    assert out.shape == (2,)
    assert jitted.stats.traces == 2 and jitted.stats.calls == 3 and bodies_run == [(4, 3), (7, 2)]
    # NumPy arrays are inputs like tensors.
    array = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(jitted(array).numpy(), (array * array).sum(axis=0))


def test_python_exception_inside_the_function_propagates():
    class Stop(Exception):
        pass

    fail = [True]

    def f(x):
        if fail[0]:
            raise Stop("raised inside the traced function")
        return x + 1.0

    jitted = eddy.jit(f)
    x = rng_tensor(1, (3,))
    with pytest.raises(Stop, match="raised inside the traced function"):
        jitted(x)
    fail[0] = False  # nothing was cached by the failed trace
    np.testing.assert_allclose(jitted(x).numpy(), x.numpy() + 1.0)
    assert jitted.stats.traces == 1


def test_the_traced_call_sees_abstract_tensors():
    # As JAX's tracers: a shape and a dtype, no values; print shows them, NumPy refuses them.
    shown = []
    jitted = eddy.jit(lambda x: (shown.append(repr(x)), x * 2.0)[1])
    x = rng_tensor(1, (3,))
    np.testing.assert_allclose(jitted(x).numpy(), x.numpy() * 2.0)
    assert shown == ["tensor(abstract, shape=[3], dtype=float64)"]
    with pytest.raises(eddy.Error, match=r"Tensor.numpy\(\): the tensor of shape \[3\] is abstract"):
        eddy.jit(lambda x: eddy.tensor(x.numpy() * 2.0))(x)


def test_value_dependent_branch_is_an_eddy_error():
    def f(x):
        return x if eddy.sum(x).item() > 0 else -x

    with pytest.raises(eddy.Error, match="reads the elements"):
        eddy.jit(f)(rng_tensor(1, (3,)))


def test_calls_from_several_threads():
    jitted = eddy.jit(lambda x: eddy.tanh(x) * 3.0)
    inputs = [rng_tensor(seed, (50,)) for seed in range(16)]
    results = [None] * len(inputs)

    def work(i):
        results[i] = jitted(inputs[i]).numpy()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for x, result in zip(inputs, results):
        np.testing.assert_allclose(result, np.tanh(x.numpy()) * 3.0, rtol=1e-12)
    assert jitted.stats.traces == 1 and jitted.stats.calls == len(inputs)


@pytest.mark.parametrize("make_index", [lambda: np.array([0, 0, 3]), lambda: [0, -1],
                                        lambda: eddy.tensor(np.array([4, 1]))])
def test_integer_array_indices_compile(make_index):
    x = eddy.tensor(np.arange(20.0).reshape(5, 4))
    index = make_index()
    compiled = eddy.jit(lambda a: a[index] * 2.0)
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.arange(20.0).reshape(5, 4)[np.asarray(index)] * 2)
    columns = eddy.jit(lambda a: a[:, np.array([1, 2])])
    np.testing.assert_array_equal(np.asarray(columns(x)), np.arange(20.0).reshape(5, 4)[:, [1, 2]])


def test_an_index_passed_as_an_input_compiles_and_is_checked_when_run():
    x = eddy.tensor(np.arange(20.0).reshape(5, 4))
    take = eddy.jit(lambda a, i: a[i])
    np.testing.assert_array_equal(np.asarray(take(x, eddy.tensor(np.array([0, 3])))), np.asarray(x)[[0, 3]])
    with pytest.raises(eddy.Error, match="out of range"):
        take(x, eddy.tensor(np.array([0, 9])))
    # Negative indices count from the end once: -6 on an axis of 5 was wrapped twice, to row 4.
    np.testing.assert_array_equal(np.asarray(take(x, eddy.tensor(np.array([-1, -5])))), np.asarray(x)[[-1, -5]])
    with pytest.raises(eddy.Error, match="index -6 is out of range"):
        take(x, eddy.tensor(np.array([-6])))


def test_tensors_made_from_numbers_inside_a_jitted_function():
    # eddy.tensor(2.0) failed while tracing (the recorded constant has no values to copy yet),
    # though jit's own message for number arguments suggests it.
    x = eddy.tensor(np.arange(3.0))
    for number in (2.0, 3, True, np.float64(2.0)):
        def scaled(a, number=number):
            return a * eddy.tensor(number)
        np.testing.assert_array_equal(np.asarray(eddy.jit(scaled)(x)), np.asarray(scaled(x)))
    # eddy.tensor of a traced input is a new tensor of its values, as outside.
    np.testing.assert_array_equal(np.asarray(eddy.jit(lambda a: eddy.tensor(a) + 1)(x)), [1, 2, 3])


def test_a_boolean_mask_inside_a_jitted_function_is_named():
    x = eddy.tensor(np.arange(4.0))
    with pytest.raises(IndexError, match="a boolean mask computed inside eddy.jit"):
        eddy.jit(lambda a, m: a[m])(x, eddy.tensor(np.array([True, False, True, False])))


def test_out_of_bounds_constant_index_is_an_index_error():
    x = eddy.tensor(np.arange(5.0))
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 5"):
        eddy.jit(lambda a: a[np.array([7])])(x)


def test_returning_none_is_named():
    with pytest.raises(eddy.Error, match="returned None"):
        eddy.jit(lambda a: None)(eddy.ones([2]))


def test_an_inplace_write_inside_jit_says_what_to_do():
    def step(a):
        a[0] = 1.0
        return a
    with pytest.raises(eddy.Error, match="run in-place updates"):
        eddy.jit(step)(eddy.ones([2]))


def test_backward_inside_jit_is_refused():
    # It left .grad holding a tensor without values, and later calls never wrote it again.
    weight = eddy.tensor([1.0, 2.0, 3.0]).requires_grad_()

    def step(x):
        loss = eddy.sum(weight * weight * x)
        loss.backward()
        return loss

    with pytest.raises(eddy.Error, match="backward: called inside a compiled function"):
        eddy.jit(step)(eddy.tensor([1.0, 1.0, 2.0]))
    assert weight.grad is None
    # Outside, on the compiled result, backward reaches the captured weight.
    eddy.jit(lambda x: eddy.sum(weight * weight * x))(eddy.tensor([1.0, 1.0, 2.0])).backward()
    assert weight.grad.tolist() == [2.0, 4.0, 12.0]


def test_reading_grad_inside_jit_is_refused():
    # backward() makes a new .grad each time: a compiled update captured the first one and applied
    # it at every call, silently.
    w = eddy.tensor([1.0, 2.0, 3.0]).requires_grad_()
    eddy.sum(w * 2.0).backward()
    with pytest.raises(eddy.Error, match=r"Tensor.grad inside eddy.jit: .* pass it as an argument"):
        eddy.jit(lambda lr: w.detach() - lr * w.grad)(eddy.tensor(0.1))
    # Clearing them inside ran once, at the trace: later calls piled the gradients up.
    sgd = eddy.optim.SGD([w], lr=0.1)
    with pytest.raises(eddy.Error, match=r"zero_grad \(or .grad = None\) inside a compiled function"):
        eddy.jit(lambda x: (sgd.zero_grad(), eddy.sum(w * x))[1])(eddy.tensor([1.0, 1.0, 1.0]))

    def clearing(x):
        w.grad = None
        return eddy.sum(w * x)
    with pytest.raises(eddy.Error, match="inside a compiled function"):
        eddy.jit(clearing)(eddy.tensor([1.0, 1.0, 1.0]))
    step = eddy.jit(lambda w, g, lr: w - lr * g)
    for k in (1.0, 10.0):
        w.grad = None
        eddy.sum(w * k).backward()
        np.testing.assert_allclose(np.asarray(step(w.detach(), w.grad, eddy.tensor(0.1))), [1 - 0.1 * k, 2 - 0.1 * k,
                                                                                           3 - 0.1 * k])


def test_autocast_is_part_of_the_signature():
    a, b = eddy.ones([8, 8]), eddy.ones([8, 8]) * 1.001
    product = eddy.jit(lambda a, b: eddy.matmul(a, b))
    assert product(a, b).dtype == eddy.float32
    with eddy.autocast("bfloat16"):
        assert product(a, b).dtype == eddy.bfloat16
    assert product(a, b).dtype == eddy.float32
    assert product.stats.traces == 2


@pytest.mark.parametrize("argument, name", [(2.5, "float"), (3, "int"), (True, "bool"), ("hi", "str"), (None, "NoneType"),
                                            ([1.0, 2.0], "list")])
def test_arguments_other_than_tensors_are_named(argument, name):
    # A float became a float64 tensor (eager keeps the tensor's float32); an int used as a shape
    # or an axis failed with messages about lists and 0-d tensors.
    with pytest.raises(eddy.Error, match=f"eddy.jit: argument 1 is .*, of type {name}; a compiled function takes"):
        eddy.jit(lambda x, s: x * s)(eddy.ones([3]), argument)
    np.testing.assert_array_equal(np.asarray(eddy.jit(lambda x: x * 2)(np.ones(2))), [2, 2])


def test_keyword_arguments_are_named():
    with pytest.raises(eddy.Error, match=r"eddy.jit: keyword arguments \(y\) are not taken"):
        eddy.jit(lambda x, y=None: x + y)(eddy.ones([3]), y=eddy.ones([3]))


def test_one_tensor_passed_twice_is_refused_on_every_call():
    # Refused when it traced, accepted once a program existed for the signature.
    product = eddy.jit(lambda a, b: a * b)
    x, y = eddy.ones([3]), eddy.ones([3])
    product(x, y)
    with pytest.raises(eddy.Error, match="compile: input 1 is the same tensor as input 0"):
        product(x, x)


def test_a_jitted_method_is_named_at_the_attribute():
    # The object became no argument at all, and f failed inside with a missing argument.
    class Model:
        @eddy.jit
        def forward(self, x):
            return x

    with pytest.raises(eddy.Error, match="eddy.jit: forward is used as a method of Model; a compiled function takes"):
        Model().forward(eddy.ones([2]))


def test_derivatives_of_a_jitted_function_stop_at_detach_and_no_grad():
    # A detached handle named the same graph value, so grad(jit(f)) went through it (2x, not x).
    x = eddy.tensor(np.array([1.0, 2.0, 3.0]))

    def f(a):
        with eddy.no_grad():
            c = a * a
        return eddy.sum(a.detach() * a) + eddy.sum(c * a)

    np.testing.assert_allclose(np.asarray(eddy.grad(eddy.jit(f))(x)), np.asarray(eddy.grad(f)(x)))
    detached = lambda a: eddy.sum(a.detach() * a)
    ones = eddy.ones_like(x)
    assert float(eddy.jvp(eddy.jit(detached), (x,), (ones,))[1]) == float(eddy.jvp(detached, (x,), (ones,))[1]) == 6.0
    w = eddy.tensor([0.5, 1.5, -1.0], requires_grad=True)
    loss = lambda a: eddy.sum(eddy.square(a * w - eddy.stop_gradient(a * w) * 0.9))
    loss(x).backward()
    eager = np.asarray(w.grad)
    w.grad = None
    eddy.jit(loss)(x).backward()
    np.testing.assert_allclose(np.asarray(w.grad), eager)


def test_a_captured_tensor_read_on_the_host_is_read_again_when_it_changes():
    # The graph froze what the trace read: after s[...] = 1, the jitted function still used 3.
    x = eddy.tensor(np.array([2.0, 3.0]))
    s = eddy.tensor(3.0)
    scaled = eddy.jit(lambda a: a * float(s))
    np.testing.assert_allclose(np.asarray(scaled(x)), [6.0, 9.0])
    s[...] = 1.0
    np.testing.assert_allclose(np.asarray(scaled(x)), [2.0, 3.0])
    assert scaled.stats.traces == 2
    np.testing.assert_allclose(np.asarray(scaled(x)), [2.0, 3.0])
    assert scaled.stats.traces == 2
    mask = eddy.tensor(np.array([True, False, False, False]))
    rows = eddy.jit(lambda a: a[mask] * 1)
    table = eddy.tensor(np.arange(8.0).reshape(4, 2))
    assert rows(table).shape == (1, 2)
    mask[1] = True
    np.testing.assert_allclose(np.asarray(rows(table)), [[0.0, 1.0], [2.0, 3.0]])


def test_a_copy_of_a_captured_tensor_or_array_is_made_at_every_call():
    # eddy.tensor(w) copied w while tracing, and the graph kept that copy as a constant.
    w = eddy.tensor(np.array([1.0, 2.0, 3.0]))
    table = np.array([1.0, 1.0, 1.0])
    x = eddy.tensor(np.ones(3))
    copied = eddy.jit(lambda a: a * eddy.tensor(w) + eddy.tensor(table, dtype="float64"))
    np.testing.assert_allclose(np.asarray(copied(x)), [2.0, 3.0, 4.0])
    with eddy.no_grad():
        w[...] = eddy.tensor(np.array([10.0, 20.0, 30.0]))
    table[0] = 5.0
    np.testing.assert_allclose(np.asarray(copied(x)), [15.0, 21.0, 31.0])
    assert copied.stats.traces == 1
    # The copy is detached, as eager's: a recorded identity sent gradients back to the source.
    p = eddy.tensor([1.0, 2.0, 3.0], requires_grad=True)
    frozen = lambda a: eddy.sum(eddy.tensor(p) * a)
    assert not eddy.jit(frozen)(x).requires_grad
    own = lambda a: eddy.sum(eddy.tensor(a) * a)
    np.testing.assert_allclose(np.asarray(eddy.grad(eddy.jit(own))(x)), np.asarray(eddy.grad(own)(x)))
    fresh_leaf = eddy.jit(lambda a: eddy.sum(eddy.tensor(p, requires_grad=True) * a))
    assert float(fresh_leaf(x)) == 6.0


def test_writes_into_captured_tensors_and_results_that_are_not_tensors_are_refused_clearly():
    c = eddy.tensor([5.0, 5.0, 5.0])
    with pytest.raises(eddy.Error, match=r"writes in place \(copy_\) to a tensor of shape \[\] from a value of the trace"):
        eddy.jit(lambda a: (c.__setitem__(0, 0.0), a * c)[1])(eddy.tensor(np.ones(3)))
    with pytest.raises(TypeError, match=r"eddy.jit: the function returned 'hi' \(str\), which is not a tensor"):
        eddy.jit(lambda a: "hi")(eddy.tensor(np.ones(3)))


def test_a_jitted_output_computed_from_no_input_requires_no_grad():
    # It was marked requires_grad, so backward() through it gave zeros where eager refused.
    x = eddy.tensor(np.array([1.0, 2.0]), requires_grad=True)
    both = eddy.jit(lambda a: (eddy.ones((2,)) * 3, a * 2))
    constant, scaled = both(x)
    assert not constant.requires_grad and scaled.requires_grad
    np.testing.assert_allclose(np.asarray(constant), [3.0, 3.0])
    eddy.sum(scaled).backward()
    np.testing.assert_allclose(np.asarray(x.grad), [2.0, 2.0])


def test_a_leaf_made_from_an_input_stops_derivatives_as_eagerly():
    x = eddy.tensor(np.array([1.0, 2.0, 3.0]))

    def fresh_leaf(v):
        y = v.detach().requires_grad_()
        return eddy.sum(y * v)

    np.testing.assert_allclose(np.asarray(eddy.grad(eddy.jit(fresh_leaf))(x)), [1, 2, 3])
    np.testing.assert_allclose(np.asarray(eddy.jit(eddy.grad(fresh_leaf))(x)), [1, 2, 3])
    tangent = eddy.jvp(eddy.jit(fresh_leaf), (x,), (eddy.ones_like(x),))[1]
    assert float(tangent) == pytest.approx(6.0)

    # A PINN-style step: derivatives with respect to a leaf of the points, then a loss in the points.
    def step(v):
        y = v.detach().requires_grad_()
        u = eddy.tanh(2 * y)
        (u_x,) = eddy.gradients([u], [y], [eddy.ones_like(u)], create_graph=True)
        return eddy.sum(u_x * v)

    np.testing.assert_allclose(np.asarray(eddy.grad(eddy.jit(step))(x)), np.asarray(eddy.grad(step)(x)), rtol=1e-12)


def test_detached_and_no_grad_outputs_of_a_compiled_function_require_no_grad():
    def outputs(v):
        with eddy.no_grad():
            target = eddy.exp(v)
        return v * 3, target, v.detach()

    x = eddy.tensor(np.array([1.0, 2.0, 3.0])).requires_grad_()
    scaled, target, detached = eddy.jit(outputs)(x)
    assert scaled.requires_grad and not target.requires_grad and not detached.requires_grad
    (eddy.sum(scaled) + eddy.sum(target) + eddy.sum(detached * detached)).backward()
    np.testing.assert_allclose(np.asarray(x.grad), [3, 3, 3])


def test_a_compiled_step_traces_again_when_its_models_training_mode_changes():
    # Traced under eval(), the step ran without dropout after train(), silently: the mode is now
    # read as a guarded host value, so switching it traces again (and a traced dropout draw is
    # refused, as it always was).
    model = eddy.nn.GPT2(50, context_length=16, hidden_size=32, layers=2, heads=4, dropout=0.5, seed=1)
    tokens = eddy.tensor(np.random.default_rng(0).integers(0, 50, (2, 16)))
    targets = eddy.tensor(np.random.default_rng(1).integers(0, 50, (2, 16)))
    step = eddy.jit(lambda t, y: eddy.nn.cross_entropy(model(t), y))
    model.eval()
    evaluated = step(tokens, targets).item()
    model.train()
    with pytest.raises(eddy.Error, match="draws random numbers"):
        step(tokens, targets)
    model.eval()
    assert step(tokens, targets).item() == evaluated


def test_results_share_memory_with_nothing_else():
    # A folded constant, two equal results and a result simplified to the input were one buffer:
    # writing into one result changed the next call's, the other result, or the caller's input.
    x = eddy.tensor([1.0, 2.0, 3.0])
    with_constant = eddy.jit(lambda a: (a + eddy.ones([3]) * 2, eddy.ones([3]) * 2))
    _, constant = with_constant(x)
    constant[...] = 12.0
    total, constant = with_constant(x)
    np.testing.assert_array_equal(np.asarray(total), [3.0, 4.0, 5.0])
    np.testing.assert_array_equal(np.asarray(constant), [2.0, 2.0, 2.0])
    m, v = eddy.jit(lambda a: (eddy.zeros_like(a), eddy.zeros_like(a)))(x)
    m[...] = 5.0
    np.testing.assert_array_equal(np.asarray(v), [0.0, 0.0, 0.0])
    w = eddy.tensor([7.0, 8.0, 9.0])
    same_as_input, same_as_captured = eddy.jit(lambda a: (a * 1, w * 1))(x)
    same_as_input[...] = 0.0
    same_as_captured[...] = 0.0
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(w), [7.0, 8.0, 9.0])


@pytest.mark.parametrize("read", [lambda c: float(c.numpy()[0]), lambda c: c.tolist()[0],
                                  lambda c: float(np.asarray(c)[0]), lambda c: c.item()])
def test_every_host_read_of_a_captured_tensor_is_guarded(read):
    c = eddy.tensor([2.0])
    x = eddy.tensor([1.0, 2.0])
    scaled = eddy.jit(lambda a: a * read(c))
    np.testing.assert_array_equal(np.asarray(scaled(x)), [2.0, 4.0])
    c[...] = 5.0
    np.testing.assert_array_equal(np.asarray(scaled(x)), [5.0, 10.0])
    assert scaled.stats.traces == 2


@pytest.mark.parametrize("read", [lambda c: float(c[0]), lambda c: (c * 2).item()])
def test_a_host_read_of_a_value_computed_from_captured_tensors_says_what_to_read(read):
    # Refused as "computed from its inputs", which it was not.
    c = eddy.tensor([2.0])
    with pytest.raises(eddy.Error, match="reads the elements of a tensor it computed from captured tensors"):
        eddy.jit(lambda a: a * read(c))(eddy.tensor([1.0, 2.0]))


def test_a_numpy_mask_closed_over_is_read_again_when_it_changes():
    mask = np.array([True, False])
    x = eddy.tensor([1.0, 2.0])
    picked = eddy.jit(lambda a: a[mask] * 2)
    np.testing.assert_array_equal(np.asarray(picked(x)), [2.0])
    mask[:] = [False, True]
    np.testing.assert_array_equal(np.asarray(picked(x)), [4.0])


def test_a_numpy_array_closed_over_is_read_at_every_call():
    # Folded into the graph's constants when it went through an op first (x * (w * 2)), while
    # x * w read it at every call.
    weights = np.array([1.0, 2.0])
    x = eddy.tensor([1.0, 1.0])
    scaled = eddy.jit(lambda a: a * (eddy.as_tensor(weights) * 2))
    np.testing.assert_array_equal(np.asarray(scaled(x)), [2.0, 4.0])
    weights[:] = [10.0, 20.0]
    np.testing.assert_array_equal(np.asarray(scaled(x)), [20.0, 40.0])


def test_augmented_assignment_inside_jit_is_refused():
    # The name was rebound, so a write through a view was lost and the caller's input unchanged.
    def halve_the_head(a):
        y = a * 2
        head = y[:2]
        head *= 0.5
        return y

    with pytest.raises(eddy.Error, match=r"x \*= y inside eddy.jit: a traced function cannot write in place"):
        eddy.jit(halve_the_head)(eddy.tensor([1.0, 2.0, 3.0]))
    total = eddy.zeros([3])

    def accumulate(a):
        nonlocal total
        total += a
        return total * 1

    with pytest.raises(eddy.Error, match=r"x \+= y inside eddy.jit"):
        eddy.jit(accumulate)(eddy.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(total), [0.0, 0.0, 0.0])


def test_threads_compiling_the_same_kernels_at_once(tmp_path, monkeypatch):
    # Threads of one process wrote the same temporary files in the kernel cache.
    monkeypatch.setenv("EDDY_KERNEL_CACHE", str(tmp_path))
    x = eddy.tensor(np.linspace(0.0, 1.0, 7))
    results, errors = [None] * 6, []

    def work(i):
        try:
            results[i] = np.asarray(eddy.jit(lambda a: eddy.exp(a) * 0.75 - 0.125)(x))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for result in results:
        np.testing.assert_allclose(result, np.exp(np.linspace(0.0, 1.0, 7)) * 0.75 - 0.125, rtol=1e-12)


def test_a_damaged_library_in_the_kernel_cache_is_compiled_again(tmp_path):
    # Each run in a process of its own: a library this process has loaded is not opened again.
    program = ("import numpy as np, eddy; x = eddy.tensor([0.5, 1.5]); "
               "print(np.asarray(eddy.jit(lambda a: eddy.sin(a) * 0.25 + 1.0)(x)).tolist())")
    environment = dict(os.environ, EDDY_KERNEL_CACHE=str(tmp_path),
                       PYTHONPATH=str(pathlib.Path(eddy.__file__).parent.parent))

    def run():
        finished = subprocess.run([sys.executable, "-c", program], env=environment, capture_output=True, text=True)
        assert finished.returncode == 0, finished.stderr
        np.testing.assert_allclose(eval(finished.stdout), np.sin([0.5, 1.5]) * 0.25 + 1.0, rtol=1e-12)

    run()
    libraries = list(tmp_path.glob("kernels-*.so"))
    assert libraries
    for library in libraries:
        library.write_bytes(b"")
    run()
    assert all(library.stat().st_size > 0 for library in libraries)


def test_derivatives_of_a_compiled_call_refuse_a_captured_tensor_written_since():
    # They are recomputed from it: a target network averaged before the backward pass gave the
    # derivatives of another function, silently.
    x = eddy.tensor(np.random.RandomState(0).randn(8, 3))
    w = eddy.tensor(np.ones((3, 1)), requires_grad=True)
    target = eddy.tensor(np.full((3, 1), 0.5))
    loss = eddy.jit(lambda a: eddy.mean(eddy.square(a @ w - a @ target)))(x)
    target[...] = 0.25
    with pytest.raises(eddy.Error, match="a tensor the compiled function read .* was written in place after the call"):
        loss.backward()


def test_an_input_the_compiled_function_does_not_use_gets_no_gradient():
    # As eagerly: its .grad stays None (it was zeros, so a check for unused parameters found none).
    def f(a, b):
        return a * 2.0

    grads = []
    for fn in (f, eddy.jit(f)):
        a = eddy.tensor(np.ones(3), requires_grad=True)
        b = eddy.tensor(np.ones(3), requires_grad=True)
        eddy.sum(fn(a, b)).backward()
        grads.append((np.asarray(a.grad), b.grad))
    np.testing.assert_array_equal(grads[1][0], grads[0][0])
    assert grads[0][1] is None and grads[1][1] is None


def test_a_jitted_function_stored_on_the_object_it_closes_over_is_freed():
    # self -> jitted function -> its lambda -> self: a cycle Python's collector could not see, so
    # every such object (a trainer keeping its compiled step) was never freed.
    import gc
    import weakref

    class Trainer:
        def __init__(self):
            self.w = eddy.ones([4])
            self.step = eddy.jit(lambda x: x * self.w)

    trainer = Trainer()
    np.testing.assert_array_equal(trainer.step(eddy.ones([4])).numpy(), np.ones(4))
    alive = weakref.ref(trainer)
    del trainer
    gc.collect()
    assert alive() is None


def test_created_and_scattered_terms_past_the_folding_limit_equal_eager():
    # Creations of more than 65,536 elements stay graph nodes instead of folded constants: the
    # pass that scatters into sums crashed on x + ones_like(x) and scattered a broadcast
    # scatter_add(zeros) + y along y's rows.
    size = 70_000
    x = eddy.tensor(np.arange(size, dtype=np.float64))
    np.testing.assert_array_equal(eddy.jit(lambda x: x + eddy.ones_like(x))(x).numpy(), x.numpy() + 1)
    index = eddy.tensor(np.array([0, 1, 1]))
    values = eddy.tensor(np.array([1.0, 2.0, 3.0]))
    rows = eddy.tensor(np.zeros((3, size)))

    def scattered(values, rows):
        return eddy.scatter_add(eddy.zeros([size], dtype=eddy.float64), 0, index, values) + rows

    np.testing.assert_array_equal(eddy.jit(scattered)(values, rows).numpy(), scattered(values, rows).numpy())


def test_derivatives_of_a_jitted_jvp_or_hvp_at_its_own_argument_equal_eager():
    # jvp's handles of an argument share its autograd state; the trace took them for detached
    # leaves and stopped derivatives there, so every derivative of the compiled function was zero.
    x = eddy.tensor(np.array([0.3, -0.7, 1.1]))
    v = eddy.tensor(np.array([1.0, 0.5, -2.0]))

    def tangent(y, t):
        return eddy.jvp(eddy.sin, (y,), (t,))[1]

    def hessian_times(y, t):
        return eddy.hvp(lambda z: eddy.sum(eddy.sin(z)), y, t)

    for body, second in ((tangent, -np.sin(x.numpy()) * v.numpy() ** 2),
                         (hessian_times, -np.cos(x.numpy()) * v.numpy() ** 2)):
        compiled = eddy.jit(body)
        forward = eddy.jvp(lambda y: compiled(y, v), (x,), (v,))[1]
        eager = eddy.jvp(lambda y: body(y, v), (x,), (v,))[1]
        np.testing.assert_allclose(forward.numpy(), second, rtol=1e-12)
        np.testing.assert_allclose(eager.numpy(), second, rtol=1e-12)
        reverse = eddy.grad(lambda y: eddy.sum(compiled(y, v)))(x)
        np.testing.assert_allclose(reverse.numpy(), eddy.grad(lambda y: eddy.sum(body(y, v)))(x).numpy(), rtol=1e-12)
        assert np.abs(reverse.numpy()).min() > 0
