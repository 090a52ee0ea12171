"""Derivatives from Python against central differences (float64), and against PyTorch or JAX
when one is importable."""

import math
import threading

import numpy as np
import pytest

import eddy

RNG = np.random.default_rng(11)
X0 = RNG.standard_normal(4)
W0 = RNG.standard_normal((4, 3))


def numeric_grad(f, x, h=1e-6):
    """Central differences of a scalar NumPy function."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        g[i] = (f(x + step) - f(x - step)) / (2 * h)
    return g


def numeric_jacobian(f, x, h=1e-6):
    x = np.array(x, dtype=np.float64)
    out = np.asarray(f(x))
    jac = np.zeros(out.shape + x.shape)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        jac[(...,) + i] = (np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * h)
    return jac


def on_numpy(f):
    """An eddy function of tensors as a function of NumPy arrays."""
    return lambda *xs: np.asarray(f(*(eddy.as_tensor(np.array(x)) for x in xs)))


def f_scalar(x):
    return eddy.sum(eddy.sin(x) * x + eddy.exp(0.3 * x) * eddy.tanh(x))


def f_vector(x):
    return eddy.sin(x) * eddy.sum(x * x)


def t(a):
    return eddy.tensor(a, dtype="float64")


def test_grad_matches_central_differences():
    got = eddy.grad(f_scalar)(t(X0))
    assert got.dtype == eddy.float64 and got.shape == (4,)
    np.testing.assert_allclose(np.asarray(got), numeric_grad(on_numpy(f_scalar), X0), rtol=1e-7, atol=1e-8)


def test_grad_accepts_numpy_and_value_and_grad():
    calls = []

    def counted(x):
        calls.append(1)
        return f_scalar(x)

    value, gradient = eddy.value_and_grad(counted)(X0)
    assert len(calls) == 1  # the value and the gradient come from one evaluation
    assert value.item() == pytest.approx(float(on_numpy(f_scalar)(X0)))
    np.testing.assert_allclose(np.asarray(gradient), numeric_grad(on_numpy(f_scalar), X0), rtol=1e-7, atol=1e-8)


def test_grad_with_argnums():
    def loss(w, x, scale):
        return eddy.sum(eddy.tanh(x @ w) * scale)

    x = RNG.standard_normal((2, 4))
    gw = eddy.grad(loss)(t(W0), t(x), 2.0)
    np.testing.assert_allclose(np.asarray(gw), numeric_grad(lambda w: on_numpy(loss)(w, x, 2.0), W0), rtol=1e-6, atol=1e-8)
    gx = eddy.grad(loss, argnums=1)(t(W0), t(x), 2.0)
    np.testing.assert_allclose(np.asarray(gx), numeric_grad(lambda v: on_numpy(loss)(W0, v, 2.0), x), rtol=1e-6, atol=1e-8)
    both = eddy.grad(loss, argnums=(0, 1))(t(W0), t(x), 2.0)
    assert isinstance(both, tuple) and len(both) == 2
    np.testing.assert_allclose(np.asarray(both[0]), np.asarray(gw), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(both[1]), np.asarray(gx), rtol=1e-12)
    with pytest.raises(TypeError, match="argnums"):
        eddy.grad(loss, argnums=5)(t(W0), t(x), 2.0)


def test_grad_needs_a_one_element_output():
    with pytest.raises(ValueError, match="one-element"):
        eddy.grad(lambda x: x * 2.0)(t(X0))


def test_grad_refuses_an_integer_output():
    # Its gradient came out zeros: a loss made boolean or integer by mistake trained nothing.
    with pytest.raises(eddy.Error, match="output 0 is int64, which has no derivative"):
        eddy.grad(lambda x: eddy.sum(x > 0))(t(X0))
    # Given a cotangent, as vjp gives each output one, an integer output contributes nothing.
    seeds = (eddy.ones([X0.size], dtype=eddy.float64), eddy.ones([X0.size], dtype=eddy.int32))
    _, (gradient,) = eddy.vjp(lambda x: (x * 2.0, eddy.cast(x, eddy.int32)), (t(X0),), seeds)
    np.testing.assert_array_equal(np.asarray(gradient), np.full(X0.shape, 2.0))


def test_higher_derivatives_of_a_scalar_function():
    # f(x) = sin(x) * exp(x): f' = e^x (sin + cos), f'' = 2 e^x cos, f''' = 2 e^x (cos - sin).
    def f(x):
        return eddy.sum(eddy.sin(x) * eddy.exp(x))

    x = 0.7
    first = eddy.grad(f)(t(x)).item()
    second = eddy.grad(eddy.grad(f))(t(x)).item()
    third = eddy.grad(lambda y: eddy.sum(eddy.grad(eddy.grad(f))(y)))(t(x)).item()
    assert first == pytest.approx(np.exp(x) * (np.sin(x) + np.cos(x)), rel=1e-12)
    assert second == pytest.approx(2 * np.exp(x) * np.cos(x), rel=1e-12)
    assert third == pytest.approx(2 * np.exp(x) * (np.cos(x) - np.sin(x)), rel=1e-12)


def test_grad_of_grad_matches_differences_of_the_gradient():
    def g_sum(x):
        return eddy.sum(eddy.grad(f_scalar)(x) ** 2)

    got = eddy.grad(g_sum)(t(X0))
    np.testing.assert_allclose(np.asarray(got), numeric_grad(on_numpy(g_sum), X0), rtol=1e-6, atol=1e-7)


def test_jvp_and_vjp_against_the_jacobian():
    v = RNG.standard_normal(4)
    jac = numeric_jacobian(on_numpy(f_vector), X0)
    out, tangent = eddy.jvp(f_vector, (t(X0),), (t(v),))
    np.testing.assert_allclose(np.asarray(out), np.asarray(f_vector(t(X0))), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(tangent), jac @ v, rtol=1e-7, atol=1e-8)
    out, cotangent = eddy.vjp(f_vector, t(X0), t(v))
    np.testing.assert_allclose(np.asarray(cotangent), v @ jac, rtol=1e-7, atol=1e-8)
    # A single primal comes back as a single tensor, a tuple as a list.
    _, grads = eddy.vjp(lambda a, b: eddy.sum(a * b), (t(X0), t(v)))
    assert len(grads) == 2
    np.testing.assert_allclose(np.asarray(grads[0]), v)
    np.testing.assert_allclose(np.asarray(grads[1]), X0)


def test_jvp_with_several_inputs_and_outputs():
    def f(a, b):
        return a * b, eddy.sin(a) + b

    a, b = RNG.standard_normal(3), RNG.standard_normal(3)
    da, db = RNG.standard_normal(3), RNG.standard_normal(3)
    outs, tangents = eddy.jvp(f, (t(a), t(b)), (t(da), t(db)))
    assert len(outs) == 2 and len(tangents) == 2
    np.testing.assert_allclose(np.asarray(tangents[0]), da * b + a * db, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(tangents[1]), np.cos(a) * da + db, rtol=1e-12)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_both_modes(mode):
    jac = eddy.jacobian(f_vector, t(X0), mode=mode)
    assert jac.shape == (4, 4)
    np.testing.assert_allclose(np.asarray(jac), numeric_jacobian(on_numpy(f_vector), X0), rtol=1e-7, atol=1e-8)


def test_jacobian_shape_is_output_then_input():
    x = RNG.standard_normal((2, 3))
    jac = eddy.jacobian(lambda a: eddy.sum(a * a, axis=1), t(x))
    assert jac.shape == (2, 2, 3)
    np.testing.assert_allclose(np.asarray(jac), numeric_jacobian(lambda a: (a * a).sum(axis=1), x), rtol=1e-7, atol=1e-8)
    with pytest.raises(ValueError, match="mode"):
        eddy.jacobian(f_vector, t(X0), mode="sideways")


def test_hessian_and_hvp():
    hess = eddy.hessian(f_scalar, t(X0))
    assert hess.shape == (4, 4)
    gradient = on_numpy(lambda x: eddy.grad(f_scalar)(x))
    expected = numeric_jacobian(gradient, X0)
    np.testing.assert_allclose(np.asarray(hess), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(hess), np.asarray(hess).T, rtol=1e-12, atol=1e-14)
    v = RNG.standard_normal(4)
    np.testing.assert_allclose(np.asarray(eddy.hvp(f_scalar, t(X0), t(v))), np.asarray(hess) @ v, rtol=1e-10, atol=1e-12)


def test_backward_fills_grad():
    x = t(X0).requires_grad_()
    assert x.requires_grad and x.is_leaf and x.grad is None
    loss = f_scalar(x)
    assert not loss.is_leaf
    loss.backward()
    np.testing.assert_allclose(np.asarray(x.grad), numeric_grad(on_numpy(f_scalar), X0), rtol=1e-7, atol=1e-8)
    # Gradients accumulate until zeroed.
    first = np.asarray(x.grad).copy()
    f_scalar(x).backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * first, rtol=1e-12)
    x.zero_grad()
    assert x.grad is None or not np.asarray(x.grad).any()


def test_backward_with_a_gradient_argument_and_detach():
    x = eddy.tensor(X0, requires_grad=True)
    y = x * x
    v = RNG.standard_normal(4)
    y.backward(v)
    np.testing.assert_allclose(np.asarray(x.grad), 2 * X0 * v, rtol=1e-12)
    d = (x * 3.0).detach()
    assert not d.requires_grad


def test_backward_with_create_graph_gives_second_derivatives():
    x = eddy.tensor([0.3, -0.8], requires_grad=True)
    y = eddy.sum(x**3)
    (g,) = eddy.gradients(y, [x], create_graph=True)
    np.testing.assert_allclose(np.asarray(g), 3 * np.array([0.3, -0.8]) ** 2, rtol=1e-12)
    g2 = eddy.gradients(eddy.sum(g), x)
    np.testing.assert_allclose(np.asarray(g2), 6 * np.array([0.3, -0.8]), rtol=1e-12)

    z = eddy.tensor([0.5], requires_grad=True)
    loss = eddy.sum(eddy.sin(z))
    loss.backward(create_graph=True)
    first = z.grad
    assert first.requires_grad
    (second,) = eddy.gradients(eddy.sum(first), [z])
    assert second.item() == pytest.approx(-np.sin(0.5), rel=1e-12)


def test_gradients_with_grad_outputs_and_no_graph():
    x = eddy.tensor(X0, requires_grad=True)
    y = eddy.sin(x)
    v = RNG.standard_normal(4)
    g = eddy.gradients(y, x, grad_outputs=eddy.tensor(v))
    np.testing.assert_allclose(np.asarray(g), np.cos(X0) * v, rtol=1e-12)
    assert not g.requires_grad


def test_grad_refuses_argnums_naming_one_argument_twice():
    # The second replacement overwrote the first, whose gradient came back 0.
    def f(x, y):
        return x * x * y

    for argnums in [(0, 0), (0, -2)]:
        with pytest.raises(ValueError, match="names one argument twice"):
            eddy.grad(f, argnums=argnums)(2.0, 3.0)
    dx, dy = eddy.grad(f, argnums=(-2, 1))(2.0, 3.0)
    assert (dx.item(), dy.item()) == (12.0, 4.0)


def test_gradients_of_untracked_inputs_or_outputs_are_refused_not_zeros():
    # A PINN's points without requires_grad gave u_x = 0, and the model trained on another equation.
    net = eddy.nn.Linear(1, 1, dtype="float64", seed=0)
    x = eddy.tensor(np.linspace(0, 1, 4).reshape(4, 1))
    u = eddy.sin(net(x))
    with pytest.raises(eddy.Error, match="input 0 of shape \\[4, 1\\] does not require gradients"):
        eddy.gradients(u, x, eddy.ones_like(u), create_graph=True)
    w = eddy.tensor([1.0, 2.0], requires_grad=True)
    with eddy.no_grad():
        loss = eddy.sum(w * w)
    with pytest.raises(eddy.Error, match="no output requires gradients"):
        eddy.gradients(loss, w)
    # A tracked input the outputs do not depend on still gets zeros (u_xx of a u linear in x).
    y = eddy.tensor([0.5], requires_grad=True)
    (unused,) = eddy.gradients(eddy.sum(w * w), [y])
    np.testing.assert_array_equal(np.asarray(unused), [0.0])


def test_complex_gradient_is_the_conjugate_wirtinger_derivative():
    # L = |z|^2 = z conj(z): the PyTorch convention gives dL/dz* times 2 = 2 z, so z -= lr * grad descends.
    z0 = np.array([1.0 + 2.0j, -0.5 + 0.25j])
    g = eddy.grad(lambda z: eddy.sum(eddy.real(z * eddy.conj(z))))(eddy.tensor(z0))
    np.testing.assert_allclose(np.asarray(g), 2 * z0, rtol=1e-12)


def test_gradient_through_indexing_and_fft():
    x0 = RNG.standard_normal(8)

    def f(x):
        spectrum = eddy.fft.rfft(x)
        return eddy.sum(eddy.abs(spectrum[1:3]) ** 2) + eddy.sum(x[::2] * x[1::2])

    def f_numpy(x):
        s = np.fft.rfft(x)
        return np.sum(np.abs(s[1:3]) ** 2) + np.sum(x[::2] * x[1::2])

    got = eddy.grad(f)(t(x0))
    np.testing.assert_allclose(np.asarray(got), numeric_grad(f_numpy, x0), rtol=1e-6, atol=1e-7)


# ---- against peers, where installed ----


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    x = torch.tensor(X0, requires_grad=True)
    loss = torch.sum(torch.sin(x) * x + torch.exp(0.3 * x) * torch.tanh(x))
    (expected,) = torch.autograd.grad(loss, x)
    np.testing.assert_allclose(np.asarray(eddy.grad(f_scalar)(t(X0))), expected.numpy(), rtol=1e-12)


def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def f(x):
        return jnp.sum(jnp.sin(x) * x + jnp.exp(0.3 * x) * jnp.tanh(x))

    np.testing.assert_allclose(np.asarray(eddy.hessian(f_scalar, t(X0))), np.asarray(jax.hessian(f)(X0)), rtol=1e-10)


def test_python_exceptions_in_f_propagate_and_leave_a_clean_state():
    def broken(x):
        raise KeyError("inside f")

    x = t([1.0, 2.0])
    for transform in [lambda: eddy.jvp(broken, x, x), lambda: eddy.vjp(broken, x), lambda: eddy.jacobian(broken, x),
                      lambda: eddy.hessian(broken, x), lambda: eddy.hvp(broken, x, x), lambda: eddy.grad(broken)(x)]:
        with pytest.raises(KeyError, match="inside f"):
            transform()
    # Forward and reverse mode still work afterwards.
    _, tangent = eddy.jvp(lambda y: y * y, (x,), (t([1.0, 0.0]),))
    assert tangent.tolist() == [2.0, 0.0]
    assert eddy.grad(lambda y: eddy.sum(y * y))(x).tolist() == [2.0, 4.0]


# ---- derivatives at zero, as PyTorch takes them (they were NaN) ----


def test_norm_has_gradient_zero_at_zero():
    np.testing.assert_array_equal(np.asarray(eddy.grad(eddy.norm)(eddy.zeros([3], dtype=eddy.float64))), [0, 0, 0])
    x = np.array([3.0, -4.0])
    np.testing.assert_allclose(np.asarray(eddy.grad(eddy.norm)(eddy.tensor(x))), x / 5.0)


def test_complex_abs_has_gradient_zero_at_zero():
    z = eddy.tensor(np.array([0j, 3 - 4j]))
    g = np.asarray(eddy.grad(lambda z: eddy.sum(eddy.abs(z)))(z))
    np.testing.assert_allclose(g, [0, (3 - 4j) / 5])
    _, tangent = eddy.jvp(lambda z: eddy.abs(z), (z,), (eddy.tensor(np.array([1 + 1j, 1 + 1j])),))
    np.testing.assert_allclose(np.asarray(tangent), [0, (3 * 1 - 4 * 1) / 5])  # (x dx + y dy) / |z|


def test_integer_powers_have_finite_derivatives_of_every_order_at_zero():
    # PyTorch's values: d/da a^b is 0 where b = 0, so the k-th derivative of a^n at 0 is n! for
    # k = n and 0 otherwise (each was 0 * inf = NaN).
    def derivative(f):
        return lambda q: eddy.sum(eddy.grad(f)(q))

    zero = eddy.tensor([0.0])
    for n in range(4):
        f = lambda q, n=n: eddy.sum(q ** float(n))
        for k in range(1, 5):
            got = np.asarray(eddy.grad(f)(zero) if k == 1 else eddy.grad(derivative_chain(derivative, f, k - 1))(zero))
            np.testing.assert_array_equal(got, [math.factorial(n) if k == n else 0.0], err_msg=f"d^{k}/da^{k} a^{n}")
    # Away from zero the rule is unchanged.
    np.testing.assert_allclose(np.asarray(eddy.grad(lambda q: eddy.sum(q**2.5))(eddy.tensor([4.0]))), [2.5 * 4**1.5])


def test_the_mixed_second_derivative_of_a_power_at_exponent_zero_is_symmetric():
    # d/db (b a^(b-1)) = a^(b-1) (1 + b log a): 1/a at b = 0. Masked wherever b = 0, the order
    # "a first" gave 0, so a learned exponent that started at 0 never moved.
    a, b = 1.5, 0.0
    hessian = np.asarray(eddy.hessian(lambda x: x[0] ** x[1], eddy.tensor([a, b])))
    np.testing.assert_allclose(hessian, [[0, 1 / a], [1 / a, np.log(a) ** 2]], rtol=1e-14, atol=1e-15)
    across = eddy.grad(lambda b: eddy.grad(lambda a: a**b)(eddy.tensor(a)))(eddy.tensor(b))
    assert abs(float(across) - 1 / a) < 1e-14


def derivative_chain(derivative, f, times):
    for _ in range(times):
        f = derivative(f)
    return f


def test_complex_zeroth_power_is_one():
    z = eddy.tensor(np.array([0j, 1 + 1j]))
    np.testing.assert_array_equal(np.asarray(z**0), [1, 1])
    np.testing.assert_array_equal(np.asarray(eddy.jit(lambda z: z**0)(z)), [1, 1])


def test_angle_has_gradient_zero_at_zero():
    z = eddy.tensor(np.array([0j, 1 + 1j]))
    np.testing.assert_allclose(np.asarray(eddy.grad(lambda z: eddy.sum(eddy.angle(z)))(z)), [0, -0.5 + 0.5j])
    _, tangent = eddy.jvp(eddy.angle, (z,), (eddy.tensor(np.array([1 + 1j, 1j])),))
    np.testing.assert_allclose(np.asarray(tangent), [0, 0.5])  # Im(conj(z) dz) / |z|^2


def test_max_and_min_send_the_gradient_to_a_nan_as_pytorch_does():
    # The NaN is the extremum, but == found no entry equal to it: every share was 0 / 0 = NaN.
    v = eddy.tensor([1.0, float("nan"), 3.0])
    np.testing.assert_array_equal(np.asarray(eddy.grad(lambda v: eddy.max(v))(v)), [0, 1, 0])
    np.testing.assert_array_equal(np.asarray(eddy.grad(lambda v: eddy.min(v))(v)), [0, 1, 0])
    rows = eddy.tensor([[1.0, float("nan"), 3.0], [4.0, 2.0, 4.0]])
    np.testing.assert_array_equal(np.asarray(eddy.grad(lambda v: eddy.sum(eddy.max(v, axis=1)))(rows)),
                                  [[0, 1, 0], [0.5, 0, 0.5]])


def test_angle_of_real_numbers_is_zero_or_pi_with_gradient_zero():
    # PyTorch's convention: pi below 0, 0 at and above it (-0 included), NaN kept.
    x = np.array([-2.0, -0.0, 0.0, 3.0, np.nan])
    np.testing.assert_array_equal(np.asarray(eddy.angle(eddy.tensor(x))), [np.pi, 0, 0, 0, np.nan])
    # At NaN too (it was 1 there: the NaN passed through).
    np.testing.assert_array_equal(np.asarray(eddy.grad(lambda x: eddy.sum(eddy.angle(x)))(eddy.tensor(x))),
                                  [0, 0, 0, 0, 0])
    # Recorded, as PyTorch's angle: backward() reaches x.
    leaf = eddy.tensor(x).requires_grad_()
    eddy.sum(eddy.angle(leaf)).backward()
    np.testing.assert_array_equal(np.asarray(leaf.grad), [0, 0, 0, 0, 0])


def test_reverse_derivatives_of_complex_values_are_refused():
    # A seed of 1 on a complex output, or rows of complex cotangents, give conj(J) or its real part:
    # refused, as JAX and PyTorch do, where forward mode gives the complex derivative.
    real = eddy.tensor([1.0, 2.0])
    z = eddy.tensor(np.array([1 + 2j]))
    with pytest.raises(eddy.Error, match="grad: output 0 is complex128; an implicit seed of 1 needs a real output"):
        eddy.grad(lambda q: eddy.sum(q * q))(z)
    with pytest.raises(eddy.Error, match="jacobian: reverse mode needs real values, got a float64 input and a complex128"):
        eddy.jacobian(lambda q: q * q * 1j, real, mode="reverse")
    with pytest.raises(eddy.Error, match="hessian: needs a real input, got complex128 with shape"):
        eddy.hessian(lambda q: eddy.sum(eddy.real(q) ** 2), z)
    np.testing.assert_allclose(np.asarray(eddy.jacobian(lambda q: q * q * 1j, real, mode="forward")), np.diag([2j, 4j]))
    # Forward columns along real directions are df/dz only for a holomorphic f: conj(z) gave 1.
    with pytest.raises(eddy.Error, match="forward mode on a complex128 input gives df/dz only for a holomorphic f"):
        eddy.jacobian(eddy.conj, z, mode="forward")
    np.testing.assert_allclose(np.asarray(eddy.jacobian(lambda q: q * q, z, mode="forward", holomorphic=True)),
                               [[2 + 4j]])
    np.testing.assert_allclose(np.asarray(eddy.grad(lambda q: eddy.sum(eddy.abs(q * q)))(z)), [2 + 4j])


def test_power_in_the_exponent_at_a_zero_base():
    a = eddy.tensor(np.array([0.0, 2.0]))
    b = eddy.tensor(np.array([1.5, 1.5]))
    f = lambda b: eddy.sum(a ** b)
    np.testing.assert_allclose(np.asarray(eddy.grad(f)(b)), [0, np.log(2) * 2**1.5])
    second = np.asarray(eddy.grad(lambda b: eddy.sum(eddy.grad(f)(b)))(b))
    np.testing.assert_allclose(second, [0, np.log(2) ** 2 * 2**1.5])


def test_inner_derivatives_keep_a_closures_dependence():
    def s(value):
        return eddy.tensor(float(value), dtype="float64")

    # d/dx [x * d/dy (x y)] = 2x; the inner grad had dropped x and given 2.
    assert eddy.grad(lambda x: x * eddy.grad(lambda y: x * y)(s(3.0)))(s(2.0)).item() == pytest.approx(4.0)
    inner = eddy.grad(lambda x: eddy.grad(lambda y: eddy.sin(x) * y * y)(s(3.0)))(s(2.0))
    assert inner.item() == pytest.approx(6 * np.cos(2.0))
    # Force matching: the loss's gradient in the weights goes through the forces -dE/dr.
    rng = np.random.default_rng(0)
    r = eddy.tensor(rng.standard_normal((5, 3)))
    weights = eddy.tensor(rng.standard_normal((3, 4)))

    def force_loss(w):
        forces = eddy.grad(lambda q: eddy.sum(eddy.tanh(q @ w) ** 2))(r)
        return eddy.sum(forces * forces)

    h = 1e-6
    analytic = np.asarray(eddy.grad(force_loss)(weights))
    w0 = np.asarray(weights)
    bump = np.zeros_like(w0)
    bump[1, 2] = h
    central = (force_loss(eddy.tensor(w0 + bump)).item() - force_loss(eddy.tensor(w0 - bump)).item()) / (2 * h)
    assert analytic[1, 2] == pytest.approx(central, rel=1e-6)
    # Nothing outer to differentiate: the result carries no graph.
    assert not eddy.grad(lambda y: eddy.sum(y * y))(eddy.tensor([1.0, 2.0])).requires_grad


def test_gradient_with_respect_to_a_vjp_cotangent():
    x0 = eddy.tensor([0.5, 1.0, 1.5], dtype="float64")
    u = eddy.tensor([1.0, -2.0, 0.5], dtype="float64")
    v = eddy.tensor([0.3, 0.2, 0.1], dtype="float64")
    through_cotangent = eddy.grad(lambda w: eddy.sum(eddy.vjp(lambda a: eddy.sin(a) * a, (x0,), (w,))[1][0] * u))(v)
    a = np.array([0.5, 1.0, 1.5])
    np.testing.assert_allclose(np.asarray(through_cotangent), (np.cos(a) * a + np.sin(a)) * [1, -2, 0.5], rtol=1e-12)


def test_forward_mode_through_a_compiled_closure():
    def s(value):
        return eddy.tensor(float(value), dtype="float64")

    one = s(1.0)
    assert eddy.jvp(lambda x: eddy.jit(lambda y: x * y)(s(3.0)), (s(2.0),), (one,))[1].item() == pytest.approx(3.0)
    assert eddy.jvp(lambda x: eddy.jit(lambda y: x * y)(x), (s(2.0),), (one,))[1].item() == pytest.approx(4.0)


def test_a_value_written_in_place_before_backward_is_refused():
    # The gradient was taken at the new values: reusing an input buffer for the next batch before
    # the backward pass of the first gave a wrong gradient without a word.
    w = eddy.tensor([1.0, 1.0], requires_grad=True)
    batch = eddy.tensor([2.0, 3.0])
    loss = eddy.sum(w * batch * batch)
    batch[...] = 10.0
    with pytest.raises(eddy.Error, match="was written in place .* after mul used it"):
        loss.backward()
    loss = eddy.sum(w * batch * batch)
    loss.backward()
    batch[...] = 1.0  # after the backward pass: fine
    np.testing.assert_array_equal(np.asarray(w.grad), [100.0, 100.0])


def test_writes_the_rules_do_not_read_are_fine_and_gradients_do_not_share_memory():
    # A forcing term refilled before the backward pass of u + f, and a ghost cell in a
    # concatenation: linear ops' rules read no differentiable input, as PyTorch saves none.
    u = eddy.tensor([0.5, 1.0], requires_grad=True)
    forcing = eddy.tensor([1.0, 2.0])
    ghost = eddy.tensor([0.0])
    loss = eddy.sum(eddy.tanh(u) + forcing) + eddy.sum(eddy.concatenate([ghost, u * u, ghost]))
    forcing[...] = 7.0
    ghost[...] = 3.0
    loss.backward()
    np.testing.assert_allclose(np.asarray(u.grad), 1 - np.tanh([0.5, 1.0]) ** 2 + 2 * np.array([0.5, 1.0]))
    # Each leaf's gradient is its own tensor: add handed one cotangent to both.
    a = eddy.tensor([1.0, 2.0], requires_grad=True)
    b = eddy.tensor([1.0, 2.0], requires_grad=True)
    (a + b).backward(eddy.ones([2], dtype="float64"))
    with eddy.no_grad():
        for p in (a, b):
            g = p.grad
            g *= 0.5
    np.testing.assert_array_equal(np.asarray(a.grad), [0.5, 0.5])
    np.testing.assert_array_equal(np.asarray(b.grad), [0.5, 0.5])
    # A NumPy view of a tensor autodiff tracks is read-only.
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(a)[0] = 5.0


def test_jacobians_of_an_input_with_no_elements_have_the_output_and_input_shapes():
    # Forward mode returned the input's shape alone: it never called the function.
    x = eddy.tensor(np.zeros((0, 3)))
    for mode in ("forward", "reverse"):
        assert eddy.jacobian(lambda v: eddy.sum(v, axis=0), x, mode=mode).shape == (3, 0, 3)
        assert eddy.jacobian(eddy.tanh, x, mode=mode).shape == (0, 3, 0, 3)
    assert eddy.hessian(lambda v: eddy.sum(v * v), x).shape == (0, 3, 0, 3)


def test_logsumexp_over_an_empty_axis_is_minus_infinity():
    # As JAX and PyTorch give it; the error named max, a step inside.
    x = eddy.tensor(np.zeros((0, 3)))
    np.testing.assert_array_equal(eddy.logsumexp(x, axis=0).numpy(), [-np.inf] * 3)
    assert eddy.logsumexp(x, axis=0, keepdims=True).shape == (1, 3)
    # softmax over it is empty, as PyTorch's (the error named max too).
    assert eddy.softmax(eddy.zeros([3, 0]), axis=1).shape == (3, 0)
    assert eddy.log_softmax(x, axis=0).shape == (0, 3)


def test_no_grad_and_enable_grad_decorate_functions():
    w = eddy.tensor([1.0, 2.0], requires_grad=True)

    @eddy.no_grad()
    def evaluate(x):
        """Docstring kept."""
        return x * 2

    @eddy.enable_grad()
    def train(x):
        return x * 2

    @eddy.no_grad
    def bare(x):
        return x * 2

    assert not evaluate(w).requires_grad and not bare(w).requires_grad
    assert evaluate.__doc__ == "Docstring kept." and evaluate.__name__ == "evaluate"
    with eddy.no_grad():
        assert train(w).requires_grad
    assert (w * 2).requires_grad

    # Each call has a scope of its own: one scope shared by two threads' overlapping calls let one
    # thread pop the other's, and left that thread's gradients off for good.
    first_in, second_in, first_done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    @eddy.no_grad()
    def overlapping(mine, other):
        mine.set()
        other.wait()

    def first():
        with eddy.no_grad():
            overlapping(first_in, second_in)
            seen["first, inside its own no_grad"] = (w * 2).requires_grad
        first_done.set()

    def second():
        first_in.wait()
        overlapping(second_in, first_done)
        seen["second, after its call"] = (w * 2).requires_grad

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {"first, inside its own no_grad": False, "second, after its call": True}


def test_jvp_and_vjp_refuse_nested_outputs():
    # A nested tuple became one constant tensor: its tangent came back zero, its cotangent was dropped.
    x = eddy.tensor(np.array([1.0, 2.0]))
    v = eddy.tensor(np.array([1.0, 0.0]))
    with pytest.raises(TypeError, match="returned a tuple holding a tuple; jvp and vjp take .* flat tuple or list"):
        eddy.jvp(lambda y: (eddy.sin(y), (y, y * y)), (x,), (v,))
    with pytest.raises(TypeError, match="returned a list holding a list"):
        eddy.vjp(lambda y: [[y * 3.0]], (x,), ([eddy.ones([1, 2], dtype="float64")],))
    with pytest.raises(TypeError, match="returned a dict;"):
        eddy.jvp(lambda y: {"a": eddy.sin(y)}, (x,), (v,))
    # np.sin of a tensor is a NumPy array: values without derivatives, which came back as zeros.
    with pytest.raises(TypeError, match="returned a ndarray; .*NumPy functions see values"):
        eddy.jvp(lambda y: np.sin(y), (x,), (v,))
    with pytest.raises(TypeError, match="returned a ndarray; jacobian, hessian and hvp"):
        eddy.jacobian(lambda y: np.sin(y), x)
    with pytest.raises(TypeError, match="returned a float"):
        eddy.hessian(lambda y: 1.0, x)
    outputs, tangents = eddy.jvp(lambda y: (eddy.sin(y), y * y), (x,), (v,))
    np.testing.assert_allclose(tangents[1].numpy(), [2.0, 0.0])
    # jacobian, hessian and hvp take one output: a tuple's derivatives came back as zeros.
    with pytest.raises(TypeError, match="returned a tuple; jacobian, hessian and hvp take a function of one eddy"):
        eddy.jacobian(lambda y: (eddy.sin(y), y * y), x)
    with pytest.raises(TypeError, match="returned a list;"):
        eddy.jacobian(lambda y: [eddy.sin(y)], x, mode="forward")
    with pytest.raises(TypeError, match="returned a tuple;"):
        eddy.hessian(lambda y: (eddy.sum(eddy.sin(y)),), x)
    with pytest.raises(TypeError, match="returned a list;"):
        eddy.hvp(lambda y: [eddy.sum(eddy.sin(y))], x, v)
