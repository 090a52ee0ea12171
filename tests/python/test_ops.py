"""The op API and eddy.fft from Python, checked against NumPy."""

import numpy as np
import pytest

import eddy

RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 4))
Y = RNG.standard_normal((3, 4))
POSITIVE = np.abs(X) + 0.5
Z = X + 1j * Y


def close(t, expected, **tolerances):
    assert isinstance(t, eddy.Tensor)
    got = np.asarray(t)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_allclose(got, expected, rtol=tolerances.get("rtol", 1e-12), atol=tolerances.get("atol", 1e-12))


# ---- creation ----


def test_creation_ops():
    close(eddy.zeros((2, 3), dtype="float64"), np.zeros((2, 3)))
    assert eddy.zeros(4).dtype == eddy.float32 and eddy.zeros(4).shape == (4,)
    close(eddy.ones([2], dtype="int32"), np.ones(2))
    assert eddy.ones([2], dtype="int32").dtype == eddy.int32
    close(eddy.full((2, 2), 2.5, dtype="float64"), np.full((2, 2), 2.5))
    full_complex = eddy.full(3, 1 - 2j, dtype="complex128")
    close(full_complex, np.full(3, 1 - 2j))
    close(eddy.zeros_like(X), np.zeros_like(X))
    close(eddy.ones_like(eddy.tensor([1, 2])), [1, 1])
    assert eddy.ones_like(eddy.tensor([1, 2])).dtype == eddy.int64
    close(eddy.arange(5, dtype="float64"), np.arange(5.0))
    close(eddy.arange(1, 2, 0.25, dtype="float64"), np.arange(1, 2, 0.25))
    assert eddy.arange(3, dtype="int64").tolist() == [0, 1, 2]
    close(eddy.linspace(-1, 1, 5, dtype="float64"), np.linspace(-1, 1, 5))
    close(eddy.eye(3, dtype="float64"), np.eye(3))


def test_integer_creation_is_exact_past_two_to_the_53():
    # Taken through doubles: [2^53, 2^53, 2^53 + 2, 2^53 + 4] and 2^62 for 2^62 + 1.
    assert eddy.arange(2**53, 2**53 + 4, dtype="int64").tolist() == [2**53 + k for k in range(4)]
    assert eddy.arange(2**62, 2**62 + 9, 4, dtype="int64").tolist() == [2**62, 2**62 + 4, 2**62 + 8]
    assert eddy.full(2, 2**62 + 1, dtype="int64").tolist() == [2**62 + 1] * 2
    with pytest.raises(eddy.Error, match="does not fit in int32"):
        eddy.full(1, 2**40, dtype="int32")
    # A complex value for a real dtype lost its imaginary part without a word.
    with pytest.raises(eddy.Error, match=r"has an imaginary part, and float64 is real"):
        eddy.full(1, 1 + 2j, dtype="float64")


def test_random_ops_are_deterministic_per_seed():
    a = np.asarray(eddy.rand((1000,), dtype="float64", generator=eddy.Generator(3)))
    b = np.asarray(eddy.rand((1000,), dtype="float64", generator=eddy.Generator(3)))
    c = np.asarray(eddy.rand((1000,), dtype="float64", generator=eddy.Generator(4)))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= 0 and a.max() < 1 and abs(a.mean() - 0.5) < 0.05
    n = np.asarray(eddy.randn((20000,), dtype="float64", generator=eddy.Generator(0)))
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    assert eddy.randn((2, 2)).dtype == eddy.float32
    # Results do not depend on the thread count.
    threads = eddy.num_threads()
    try:
        eddy.set_num_threads(1)
        one = np.asarray(eddy.randn((4096,), dtype="float64", generator=eddy.Generator(9)))
        eddy.set_num_threads(2)
        assert eddy.num_threads() == 2
        two = np.asarray(eddy.randn((4096,), dtype="float64", generator=eddy.Generator(9)))
    finally:
        eddy.set_num_threads(threads)
    np.testing.assert_array_equal(one, two)


# ---- elementwise ----

UNARY = [
    ("neg", X, -X),
    ("exp", X, np.exp(X)),
    ("log", POSITIVE, np.log(POSITIVE)),
    ("sin", X, np.sin(X)),
    ("cos", X, np.cos(X)),
    ("tanh", X, np.tanh(X)),
    ("sqrt", POSITIVE, np.sqrt(POSITIVE)),
    ("abs", X, np.abs(X)),
    ("sign", X, np.sign(X)),
    ("square", X, X**2),
    ("sigmoid", X, 1 / (1 + np.exp(-X))),
    ("softplus", X, np.log1p(np.exp(X))),
    ("relu", X, np.maximum(X, 0)),
    ("silu", X, X / (1 + np.exp(-X))),
    ("real", Z, Z.real),
    ("imag", Z, Z.imag),
    ("conj", Z, np.conj(Z)),
    ("angle", Z, np.angle(Z)),
    ("abs", Z, np.abs(Z)),
    ("exp", Z, np.exp(Z)),
    ("contiguous", X.T, X.T),
    ("flatten", X, X.ravel()),
]


@pytest.mark.parametrize("name,x,expected", UNARY, ids=[f"{u[0]}-{u[1].dtype}" for u in UNARY])
def test_unary_ops_match_numpy(name, x, expected):
    close(getattr(eddy, name)(x), expected)


# Comparisons are reached through Tensor's operators rather than module functions.
COMPARISON_OPERATORS = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__"}


def test_every_elementwise_primitive_has_a_python_name():
    names = eddy._eddy._elementwise_primitives()
    assert "tanh" in names and "add" in names
    for name in names:
        assert hasattr(eddy, name) or name in COMPARISON_OPERATORS, f"{name} has no Python binding"


@pytest.mark.parametrize("name,arity", eddy._eddy._math_functions, ids=[f[0] for f in eddy._eddy._math_functions])
def test_math_functions_are_bound_with_their_derivatives(name, arity):
    """Every row of the op list (math_functions.def) is a function and, if unary, a Tensor method, whose gradient
    agrees with central differences."""
    x = POSITIVE.astype(np.float64)
    args = [x] if arity == 1 else [x, x[::-1].copy()]
    function = getattr(eddy, name)
    value = np.asarray(function(*args))
    assert value.shape == x.shape and np.all(np.isfinite(value))
    if arity == 1:
        np.testing.assert_array_equal(np.asarray(eddy.tensor(x).__getattribute__(name)()), value)
    gradient = np.asarray(eddy.grad(lambda t: eddy.sum(function(t, *args[1:])))(eddy.tensor(x)))
    step = 1e-6
    central = (np.asarray(function(x + step, *args[1:])) - np.asarray(function(x - step, *args[1:]))) / (2 * step)
    np.testing.assert_allclose(gradient, central, rtol=1e-6, atol=1e-8)


def test_gelu_matches_its_definition():
    from math import erf

    exact = X * 0.5 * (1 + np.vectorize(erf)(X / np.sqrt(2)))
    tanh_form = 0.5 * X * (1 + np.tanh(np.sqrt(2 / np.pi) * (X + 0.044715 * X**3)))
    # eddy.gelu is the tanh form (GPT-2's gelu_new), eddy.gelu_exact the erf form (PyTorch's default).
    np.testing.assert_allclose(np.asarray(eddy.gelu(X)), tanh_form, atol=1e-12)
    np.testing.assert_allclose(np.asarray(eddy.gelu_exact(X)), exact, atol=1e-12)
    gradient = np.asarray(eddy.grad(lambda t: eddy.sum(eddy.gelu_exact(t)))(eddy.tensor(X)))
    derivative = 0.5 * (1 + np.vectorize(erf)(X / np.sqrt(2))) + X * np.exp(-X**2 / 2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(gradient, derivative, atol=1e-12)


BINARY = [
    ("add", X, Y, X + Y),
    ("sub", X, Y, X - Y),
    ("mul", X, Y, X * Y),
    ("div", X, POSITIVE, X / POSITIVE),
    ("pow", POSITIVE, Y, POSITIVE**Y),
    ("maximum", X, Y, np.maximum(X, Y)),
    ("minimum", X, Y, np.minimum(X, Y)),
    ("complex", X, Y, X + 1j * Y),
    ("matmul", X, Y.T, X @ Y.T),
    ("mse_loss", X, Y, np.mean((X - Y) ** 2)),
    ("add", X, Y[0], X + Y[0]),  # broadcasting
    ("mul", Z, X, Z * X),
]


@pytest.mark.parametrize("name,a,b,expected", BINARY, ids=[f"{b_[0]}-{b_[1].shape}-{b_[2].shape}" for b_ in BINARY])
def test_binary_ops_match_numpy(name, a, b, expected):
    close(getattr(eddy, name)(a, b), expected)


def test_where_and_cast():
    close(eddy.where(X > 0, X, Y), np.where(X > 0, X, Y))
    close(eddy.where(eddy.as_tensor(X) > 0.0, X, 0.0), np.where(X > 0, X, 0.0))
    cast = eddy.cast(X, "int32")
    assert cast.dtype == eddy.int32
    np.testing.assert_array_equal(np.asarray(cast), X.astype(np.int32))
    assert eddy.cast(X, np.complex64).dtype == eddy.complex64
    assert eddy.cast(X, eddy.bool_).tolist() == (X != 0).tolist()


# ---- reductions ----

REDUCTIONS = [
    ("sum", np.sum),
    ("mean", np.mean),
    ("prod", np.prod),
    ("max", np.max),
    ("min", np.min),
    ("norm", lambda a, axis=None, keepdims=False: np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))),
]
CUBE = RNG.standard_normal((2, 3, 4))


@pytest.mark.parametrize("name,reference", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (1,)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(name, reference, axis, keepdims):
    got = getattr(eddy, name)(CUBE, axis=axis, keepdims=keepdims)
    close(got, reference(CUBE, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("shape,axis", [((10**7,), None), ((10**7, 1), 0), ((10**6, 3), 0), ((3, 10**6), 1)])
def test_float32_sums_of_many_values_keep_float32_accuracy(shape, axis):
    # Summed in the vector lanes alone, 10^7 values of 0.1 came to 997297.6 (2.7e-3 off).
    values = np.full(shape, 0.1, dtype=np.float32)
    exact = values.astype(np.float64).sum(axis=axis)
    got = np.asarray(eddy.sum(eddy.tensor(values), axis=axis), dtype=np.float64)
    np.testing.assert_allclose(got, exact, rtol=1e-5)
    np.testing.assert_allclose(eddy.mean(eddy.tensor(values)).item(), 0.1, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sqrt_is_correctly_rounded_at_every_length(dtype):
    # Eigen's fast packet sqrt gave NaN for inf, 0 for subnormals and +0 for -0 from 8 elements on,
    # and 40% of results off by up to 3 ulp, where a compiled kernel's sqrt was exact.
    special = np.array([np.inf, -0.0, np.finfo(dtype).smallest_subnormal, 0.0, 2.0, 3.0, 1e30, 7.0], dtype=dtype)
    values = np.concatenate([special, np.random.default_rng(0).uniform(0, 100, 1000).astype(dtype)])
    got = np.asarray(eddy.sqrt(eddy.tensor(values)))
    np.testing.assert_array_equal(got, np.sqrt(values))
    assert np.signbit(got[1])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tanh_keeps_the_sign_of_zero(dtype):
    # float64's tanh multiplied its magnitude by sign(x), which is +0 at -0; compiled kernels kept -0.
    values = np.array([-0.0] * 40 + [0.0, -1e-300, np.nan, -np.inf], dtype=dtype)
    got = np.asarray(eddy.tanh(eddy.tensor(values)))
    np.testing.assert_array_equal(np.signbit(got[:41]), np.signbit(values[:41]))
    np.testing.assert_array_equal(got[41:], np.tanh(values[41:]))


def test_reductions_of_empty_float32_tensors_end_well():
    # A float32 sum over a size-1 axis of an empty tensor divided by its kept width of 0 (SIGFPE).
    assert eddy.sum(eddy.tensor(np.zeros((1, 0), np.float32)), axis=0).shape == (0,)
    assert eddy.mean(eddy.tensor(np.zeros((1, 0, 3), np.float32)), axis=0).shape == (0, 3)
    assert eddy.softmax(eddy.tensor(np.zeros((1, 1, 0), np.float32)), axis=1).shape == (1, 1, 0)


def test_integer_sum_keeps_integers():
    got = eddy.sum(np.arange(10, dtype=np.int64))
    assert got.dtype == eddy.int64 and got.item() == 45


def test_softmax_family():
    def reference_logsumexp(a, axis):
        m = a.max(axis=axis, keepdims=True)
        return np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m

    close(eddy.logsumexp(CUBE), reference_logsumexp(CUBE, -1)[..., 0])
    close(eddy.logsumexp(CUBE, axis=1, keepdims=True), reference_logsumexp(CUBE, 1))
    close(eddy.softmax(CUBE, axis=0), np.exp(CUBE - reference_logsumexp(CUBE, 0)))
    close(eddy.log_softmax(CUBE), CUBE - reference_logsumexp(CUBE, -1))


# ---- movement and indexing ops ----


def test_movement_ops():
    close(eddy.reshape(CUBE, (4, 6)), CUBE.reshape(4, 6))
    close(eddy.reshape(CUBE, (-1, 2)), CUBE.reshape(-1, 2))
    close(eddy.reshape(CUBE, 24), CUBE.reshape(24))
    close(eddy.permute(CUBE, [2, 0, 1]), CUBE.transpose(2, 0, 1))
    close(eddy.transpose(X), X.T)
    # NumPy reverses every axis where eddy swapped the last two: asked for on 3 or more.
    with pytest.raises(TypeError, match=r"transpose: a tensor of shape \[2, 3, 4\] has more than two axes"):
        eddy.transpose(CUBE)
    close(eddy.transpose(CUBE, 0, 2), CUBE.swapaxes(0, 2))
    close(eddy.broadcast_to(X[0], (2, 4)), np.broadcast_to(X[0], (2, 4)))
    close(eddy.squeeze(CUBE[:, :1], 1), CUBE[:, 0])
    close(eddy.expand_dims(X, 1), X[:, None])
    close(eddy.pad(X, [1, 0], [0, 2]), np.pad(X, ((1, 0), (0, 2))))
    close(eddy.flip(CUBE, 1), CUBE[:, ::-1])
    close(eddy.flip(CUBE, (0, 2)), CUBE[::-1, :, ::-1])
    close(eddy.roll(X, 1, 1), np.roll(X, 1, axis=1))
    close(eddy.roll(X, -2, 0), np.roll(X, -2, axis=0))
    close(eddy.concatenate([X, Y], axis=1), np.concatenate([X, Y], axis=1))
    close(eddy.concatenate((X, eddy.as_tensor(Y))), np.concatenate([X, Y]))
    close(eddy.stack([X, Y]), np.stack([X, Y]))
    close(eddy.stack([X, Y], axis=-1), np.stack([X, Y], axis=-1))


def test_gather_take_scatter_add():
    index = np.array([[0, 2], [1, 1], [3, 0]])
    close(eddy.gather(X, 1, index), np.take_along_axis(X, index, axis=1))
    close(eddy.take(X, np.array([2, 0]), 0), X[[2, 0]])
    close(eddy.take(X, np.array([3, 3, 1]), 1), X[:, [3, 3, 1]])
    base = np.zeros((3, 4))
    src = np.ones((3, 2))
    expected = base.copy()
    for i in range(3):
        for j in range(2):
            expected[i, index[i, j]] += src[i, j]
    close(eddy.scatter_add(base, 1, index, src), expected)


def test_shape_errors_name_the_op():
    with pytest.raises(eddy.Error, match="reshape"):
        eddy.reshape(X, (5, 5))
    with pytest.raises(eddy.Error, match="squeeze"):
        eddy.squeeze(X, 0)
    with pytest.raises(eddy.Error, match="matmul"):
        eddy.matmul(X, X)


# ---- grad mode ----


def test_no_grad_and_enable_grad_contexts():
    x = eddy.tensor([1.0, 2.0], requires_grad=True)
    with eddy.no_grad():
        y = x * 2.0
        with eddy.enable_grad():
            z = x * 3.0
        w = x * 4.0
    assert not y.requires_grad and not w.requires_grad
    assert z.requires_grad
    assert (x * 5.0).requires_grad
    with pytest.raises(RuntimeError):
        with eddy.no_grad():
            raise RuntimeError("leaves the block")
    assert (x * 5.0).requires_grad  # restored on the way out


# ---- fft ----

SIGNAL = RNG.standard_normal((4, 8))
CSIGNAL = SIGNAL + 1j * RNG.standard_normal((4, 8))


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_one_axis_ffts_match_numpy(norm):
    close(eddy.fft.fft(CSIGNAL, norm=norm), np.fft.fft(CSIGNAL, norm=norm), atol=1e-10)
    close(eddy.fft.ifft(CSIGNAL, norm=norm), np.fft.ifft(CSIGNAL, norm=norm), atol=1e-10)
    close(eddy.fft.rfft(SIGNAL, norm=norm), np.fft.rfft(SIGNAL, norm=norm), atol=1e-10)
    half = np.fft.rfft(SIGNAL)
    close(eddy.fft.irfft(half, norm=norm), np.fft.irfft(half, norm=norm), atol=1e-10)
    close(eddy.fft.hfft(half, norm=norm), np.fft.hfft(half, norm=norm), atol=1e-10)
    close(eddy.fft.ihfft(SIGNAL, norm=norm), np.fft.ihfft(SIGNAL, norm=norm), atol=1e-10)


def test_fft_n_and_axis():
    close(eddy.fft.fft(CSIGNAL, n=5), np.fft.fft(CSIGNAL, n=5), atol=1e-10)
    close(eddy.fft.fft(CSIGNAL, n=12, axis=0), np.fft.fft(CSIGNAL, n=12, axis=0), atol=1e-10)
    close(eddy.fft.rfft(SIGNAL, axis=0), np.fft.rfft(SIGNAL, axis=0), atol=1e-10)
    close(eddy.fft.irfft(np.fft.rfft(SIGNAL), n=8), SIGNAL, atol=1e-10)


def test_multi_axis_ffts_match_numpy():
    cube = RNG.standard_normal((2, 4, 6))
    ccube = cube + 1j * RNG.standard_normal((2, 4, 6))
    close(eddy.fft.fft2(ccube), np.fft.fft2(ccube), atol=1e-10)
    close(eddy.fft.ifft2(ccube), np.fft.ifft2(ccube), atol=1e-10)
    close(eddy.fft.rfft2(cube), np.fft.rfft2(cube), atol=1e-10)
    close(eddy.fft.irfft2(np.fft.rfft2(cube), s=(4, 6)), cube, atol=1e-10)
    close(eddy.fft.fftn(ccube), np.fft.fftn(ccube), atol=1e-10)
    close(eddy.fft.ifftn(ccube, axes=(0, 2)), np.fft.ifftn(ccube, axes=(0, 2)), atol=1e-10)
    close(eddy.fft.rfftn(cube, norm="ortho"), np.fft.rfftn(cube, norm="ortho"), atol=1e-10)
    close(eddy.fft.irfftn(np.fft.rfftn(cube)), np.fft.irfftn(np.fft.rfftn(cube)), atol=1e-10)
    close(eddy.fft.fft2(ccube, axes=(0, 1)), np.fft.fft2(ccube, axes=(0, 1)), atol=1e-10)


def test_fft_helpers_match_numpy():
    close(eddy.fft.fftfreq(8, d=0.5), np.fft.fftfreq(8, d=0.5))
    close(eddy.fft.fftfreq(7), np.fft.fftfreq(7))
    close(eddy.fft.rfftfreq(9, d=2.0), np.fft.rfftfreq(9, d=2.0))
    assert eddy.fft.fftfreq(4, dtype="float32").dtype == eddy.float32
    close(eddy.fft.fftshift(SIGNAL), np.fft.fftshift(SIGNAL))
    close(eddy.fft.fftshift(SIGNAL, axes=1), np.fft.fftshift(SIGNAL, axes=1))
    close(eddy.fft.ifftshift(SIGNAL, axes=(0,)), np.fft.ifftshift(SIGNAL, axes=(0,)))


def test_spectral_conv_is_a_truncated_spectral_multiply():
    # One channel in, one out, 1-D: the kept modes are multiplied by the weights.
    x = RNG.standard_normal((1, 1, 16))
    modes = 4
    weights = RNG.standard_normal((1, 1, modes)) + 1j * RNG.standard_normal((1, 1, modes))
    got = eddy.fft.spectral_conv(x, weights, [modes])
    spectrum = np.fft.rfft(x, axis=-1)
    kept = np.zeros_like(spectrum)
    kept[..., :modes] = spectrum[..., :modes] * weights[0, 0]
    close(got, np.fft.irfft(kept, n=16, axis=-1), atol=1e-10)


def test_fft_n_takes_numpy_integers_and_refuses_bools():
    # n computed with NumPy (an np.int64) was refused, and n=True taken as length 1.
    close(eddy.fft.fft(CSIGNAL, n=np.int64(5)), np.fft.fft(CSIGNAL, n=5), atol=1e-10)
    close(eddy.fft.irfft(np.fft.rfft(SIGNAL), n=np.int32(8)), SIGNAL, atol=1e-10)
    with pytest.raises(TypeError, match="fft: n must be None or an int, got True"):
        eddy.fft.fft(CSIGNAL, n=True)


def test_casting_complex_to_real_is_refused():
    # It kept the real parts without a word (NumPy and PyTorch warn).
    z = eddy.tensor(np.array([1 + 2j]))
    with pytest.raises(TypeError, match="cast: complex128 to float64 would drop the imaginary parts; take eddy.real"):
        eddy.cast(z, eddy.float64)
    assert str(eddy.cast(z, eddy.complex64).dtype) == "complex64"
    assert complex(z[0]) == 1 + 2j and complex(eddy.tensor(2.5)) == 2.5 + 0j
    # eddy.tensor's dtype too, from every kind of value.
    for value in (np.array([1 + 2j]), 1 + 2j, [1 + 2j], z):
        with pytest.raises(TypeError, match="tensor: complex128 values as float64 would drop the imaginary parts"):
            eddy.tensor(value, dtype=eddy.float64)


def test_fft_errors():
    with pytest.raises(eddy.Error):
        eddy.fft.fft(CSIGNAL, norm="sideways")
    with pytest.raises(eddy.Error):
        eddy.fft.fft(CSIGNAL, axis=5)


@pytest.mark.parametrize("dtype, expected", [("float32", "complex64"), ("complex64", "complex64"),
                                             ("float64", "complex128"), ("complex128", "complex128")])
def test_a_python_complex_takes_the_tensors_precision(dtype, expected):
    t = eddy.tensor(np.ones(3, dtype=dtype))
    for result in (t * (1 + 2j), (1 + 2j) + t, t - 1j, 2j / t):
        assert str(result.dtype) == expected
    np.testing.assert_allclose(np.asarray(t * (1 + 2j)), np.full(3, 1 + 2j))


@pytest.mark.parametrize("n", [0, -1, -3])
def test_fft_lengths_must_be_positive(n):
    with pytest.raises(eddy.Error, match=f"rfft: n must be a positive length, got {n}"):
        eddy.fft.rfft(eddy.tensor(np.arange(4.0)), n=n)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_real_transforms_of_half_floats_go_through_float32(dtype):
    # Half floats reached FFTW's float32 plan as they were: their bytes read as floats, past the
    # buffer's end.
    values = np.arange(1.0, 9.0)
    x = eddy.cast(eddy.tensor(values), dtype)
    close(eddy.fft.rfft(x), np.fft.rfft(values), atol=1e-4)
    close(eddy.fft.rfft2(eddy.reshape(x, (2, 4))), np.fft.rfft2(values.reshape(2, 4)), atol=1e-4)
    assert eddy.fft.rfft(x).dtype == eddy.complex64
    grad = eddy.grad(lambda t: eddy.sum(eddy.abs(eddy.fft.rfft(t)) ** 2))(x)
    assert grad.dtype == x.dtype and np.isfinite(np.asarray(eddy.cast(grad, "float32"))).all()


def test_fft_axes_and_s_follow_numpy_at_their_edges():
    c = np.arange(24.0).reshape(4, 6) + 1j
    # axes=() transforms no axis (None is every axis); the real transforms refuse it.
    close(eddy.fft.fftn(c, axes=()), c)
    close(eddy.fft.ifft2(c, axes=()), c)
    close(eddy.fft.fftshift(c.real, axes=()), c.real)
    with pytest.raises(eddy.Error, match="rfftn: axes or s is empty"):
        eddy.fft.rfftn(c.real, axes=())
    # So does s=() without axes, where every axis was transformed.
    close(eddy.fft.fftn(c, s=()), np.fft.fftn(c, s=()))
    # norm=None is NumPy's "backward".
    close(eddy.fft.fft(c, norm=None), np.fft.fft(c, norm=None), atol=1e-10)
    close(eddy.fft.fft2(c, norm=None), np.fft.fft2(c), atol=1e-10)
    # -1 in s is the input's length, for the inverse real transforms' last axis too.
    close(eddy.fft.irfft2(c, s=(3, -1)), np.fft.irfft2(c, s=(3, -1)), atol=1e-10)
    assert np.asarray(eddy.fft.irfftn(c, s=(-1, -1))).shape == (4, 6)
    # s may be an int, as NumPy's shapes may; other types are refused by name.
    close(eddy.fft.fftn(c, s=3, axes=1), np.fft.fftn(c, s=(3,), axes=(1,)), atol=1e-10)
    with pytest.raises(TypeError, match="fft: n must be None or an int, got 3.0"):
        eddy.fft.fft(c, n=3.0)
    with pytest.raises(TypeError, match="s must be None, an int or a sequence of ints, got 'a'"):
        eddy.fft.fftn(c, s="a")


def test_shapes_and_axes_take_numpy_integers_and_name_what_they_refuse():
    # NumPy's integers were refused as axes, and a float in a shape gave pybind's "Unable to cast
    # Python instance of type <class 'list'> to C++ type '?'".
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(eddy.sum(eddy.tensor(a), axis=np.int64(1))), a.sum(axis=1))
    np.testing.assert_array_equal(np.asarray(eddy.sum(eddy.tensor(a), axis=[np.int32(0)])), a.sum(axis=0))
    assert eddy.zeros(np.array([2, 3])).shape == (2, 3)
    assert eddy.reshape(eddy.tensor(a), (np.int64(3), 2)).shape == (3, 2)
    with pytest.raises(TypeError, match=r"shape must be an int or a sequence of ints, got \[2.5\]"):
        eddy.zeros([2.5])
    with pytest.raises(TypeError, match="axis must be None, an int or a sequence of ints, got 1.0"):
        eddy.sum(eddy.tensor(a), axis=1.0)
    with pytest.raises(TypeError, match="axis must be None, an int or a sequence of ints, got True"):
        eddy.sum(eddy.tensor(a), axis=True)
    with pytest.raises(TypeError, match="shape must be an int or a sequence of ints, got True"):
        eddy.zeros(True)


def test_vjp_without_cotangents_names_its_own_argument():
    with pytest.raises(eddy.Error, match=r"vjp: output 0 has shape \[3\]; pass cotangents"):
        eddy.vjp(lambda a: a * 2, (eddy.tensor(np.ones(3)),))


def test_softplus_is_smooth_at_zero_and_finite_far_out():
    # Written with max and abs, its second derivative at exactly 0 was 0 (it is 1/4): a PINN with
    # softplus got a wrong u_xx wherever a pre-activation was 0, as at the origin of a new model.
    x = eddy.tensor(np.array([0.0, -800.0, 800.0]))
    second = eddy.grad(lambda z: eddy.sum(eddy.grad(lambda w: eddy.sum(eddy.softplus(w)))(z)))(x)
    np.testing.assert_allclose(np.asarray(second), [0.25, 0.0, 0.0], atol=1e-300)
    np.testing.assert_allclose(np.asarray(eddy.softplus(x)), [np.log(2.0), 0.0, 800.0])


def test_relu_passes_nan_through_and_has_derivative_zero_at_zero():
    # It turned NaN into 0, so a NaN input trained a ReLU network quietly.
    out = np.asarray(eddy.relu(eddy.tensor(np.array([np.nan, -1.0, 0.0, 2.0]))))
    assert np.isnan(out[0]) and list(out[1:]) == [0.0, 0.0, 2.0]
    grad = np.asarray(eddy.grad(lambda x: eddy.sum(eddy.relu(x)))(eddy.tensor(np.array([-1.0, 0.0, 2.0]))))
    assert list(grad) == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("values", [[1.0, np.nan, 2.0], [np.nan, 1.0, 2.0], [1.0, 2.0, np.nan]])
def test_extrema_propagate_nan_wherever_it_is(values):
    # max and min kept the other values' extremum unless the NaN came first, hiding it from
    # checks like max(abs(u - reference)).
    x = eddy.tensor(np.array(values))
    assert np.isnan(eddy.max(x).item()) and np.isnan(eddy.min(x).item())
    columns = np.asarray(eddy.max(eddy.tensor(np.array([values, values])), [0]))
    np.testing.assert_array_equal(np.isnan(columns), np.isnan(values))
    other = eddy.tensor(np.full(3, 1.5))
    for function in (eddy.maximum, eddy.minimum):
        for result in (function(x, other), function(other, x), eddy.jit(lambda a, b: function(a, b) * 1.0)(x, other)):
            np.testing.assert_array_equal(np.isnan(np.asarray(result)), np.isnan(values))


def test_sixteen_bit_composites_compute_in_float32_and_round_once():
    def half(values):
        return eddy.tensor(np.asarray(values, np.float16))

    # Sums past 65504 and counts of 65520 or more made a float16 mean 0, inf or NaN.
    assert eddy.mean(half(np.full(70000, 0.5))).item() == 0.5
    assert eddy.mean(half(np.full(10000, 10.0))).item() == 10.0
    image = half(np.full((256, 256), 0.25))
    assert eddy.mse_loss(image, eddy.zeros_like(image)).item() == 0.0625
    logits = eddy.cast(eddy.zeros([70000, 4]), eddy.float16)
    assert eddy.nn.cross_entropy(logits, eddy.tensor(np.zeros(70000, np.int64))).item() == pytest.approx(np.log(4), 1e-3)
    assert eddy.sigmoid(half([-9.0])).item() == pytest.approx(1 / (1 + np.exp(9.0)), rel=1e-3)
    assert eddy.norm(half([300.0, 400.0])).item() == 500.0


def test_rotary_embedding_under_autocast_keeps_its_angles():
    x = eddy.tensor(np.random.default_rng(4).standard_normal((1, 8, 64)).astype(np.float32))
    expected = np.asarray(eddy.nn.rotary_embedding(x, 10000.0, 1000))
    with eddy.autocast("bfloat16"):
        np.testing.assert_array_equal(np.asarray(eddy.nn.rotary_embedding(x, 10000.0, 1000)), expected)


def test_a_context_object_entered_twice_restores_each_level():
    a = eddy.ones((2, 2))
    cast_to_half = eddy.autocast("float16")
    with cast_to_half:
        with cast_to_half:
            assert (a @ a).dtype == eddy.float16
        assert (a @ a).dtype == eddy.float16
    assert (a @ a).dtype == eddy.float32
    recording_off = eddy.no_grad()
    with recording_off:
        with recording_off:
            pass
    assert (eddy.ones(1).requires_grad_() * 2).requires_grad


def test_real_and_imag_are_properties_as_in_numpy():
    z = eddy.tensor(np.array([1 + 2j, -3 - 4j]))
    np.testing.assert_array_equal(np.asarray(z.real * 2), [2.0, -6.0])
    np.testing.assert_array_equal(np.asarray(z.imag), [2.0, -4.0])
    assert np.asarray(eddy.tensor([1.5]).imag).tolist() == [0.0]


def test_complex_integer_powers_are_exact_as_in_numpy():
    # exp(y log x) gave (2i)^2 = -4 + 4.9e-16i; the spectral second derivative's multiplier.
    ik = eddy.tensor(1j * np.arange(4.0))
    np.testing.assert_array_equal(np.asarray(ik ** 2), (1j * np.arange(4.0)) ** 2)
    np.testing.assert_array_equal(np.asarray(eddy.tensor(np.array([-3 + 0j])) ** 2), [9 + 0j])
    z = np.array([1 + 2j, -0.5 + 0.25j])
    np.testing.assert_allclose(np.asarray(eddy.tensor(z) ** -3), z ** -3, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(eddy.jit(lambda t: t ** 3)(eddy.tensor(z))), z ** 3, rtol=1e-14)


def test_log_of_subnormal_numbers():
    # Eigen's vectorised log took them for the smallest normal number: -708.4 for all of these.
    v = np.array([1e-310, 5e-324, 1e-320, 2.2250738585072014e-308, 1.0, 2.0, 3.0, 4.0] * 4)
    np.testing.assert_allclose(eddy.log(eddy.tensor(v)).numpy(), np.log(v), rtol=1e-15)
    f = np.tile(np.array([1e-40, 1e-45, 1e-39, 1, 2, 3, 4, 5], np.float32), 4)
    np.testing.assert_allclose(eddy.log(eddy.tensor(f)).numpy(), np.log(f), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transcendental_functions_give_the_same_bits_at_every_thread_count_and_layout(dtype):
    # Eigen computed the ends of a run with its scalar functions: the elements where the threads'
    # blocks met, and those of a view at another offset or stride, came out with other last bits.
    x = RNG.uniform(-2, 2, 39001).astype(dtype)
    functions = [eddy.exp, eddy.tanh, eddy.sin, eddy.cos, eddy.gelu, lambda t: eddy.log(eddy.abs(t))]
    threads = eddy.num_threads()
    try:
        results = {}
        for count in (1, 2):
            eddy.set_num_threads(count)
            results[count] = [f(eddy.tensor(x)).numpy() for f in functions]
    finally:
        eddy.set_num_threads(threads)
    strided = eddy.tensor(np.repeat(x, 2))[::2]
    for f, one, two in zip(functions, results[1], results[2]):
        np.testing.assert_array_equal(one, two)
        np.testing.assert_array_equal(f(strided).numpy(), one)
        np.testing.assert_array_equal(f(eddy.tensor(x)[3:]).numpy(), one[3:])


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2e-6), (np.float64, 1e-14)])
def test_sigmoid_softplus_and_silu_keep_their_precision_for_negative_inputs(dtype, rtol):
    # Through 0.5 (1 + tanh(x / 2)) and log(1 + exp(x)) they cancelled: sigmoid was 0 from -16 on
    # in float32, so log(sigmoid(x)) was -inf with a NaN gradient, and softplus(-15) 17% off.
    x = np.array([-0.5, -10.0, -17.0, -20.0, -40.0, -80.0] + ([-700.0] if dtype == np.float64 else []))
    exact = 1.0 / (1.0 + np.exp(-x))
    t = eddy.tensor(x.astype(dtype))
    np.testing.assert_allclose(eddy.sigmoid(t).numpy(), exact, rtol=rtol)
    np.testing.assert_allclose(eddy.softplus(t).numpy(), np.log1p(np.exp(x)), rtol=rtol)
    np.testing.assert_allclose(eddy.silu(t).numpy(), x * exact, rtol=rtol)
    t.requires_grad_()
    eddy.sum(eddy.log(eddy.sigmoid(t))).backward()
    np.testing.assert_allclose(t.grad.numpy(), 1.0 - exact, rtol=rtol)
    # log1p and expm1 themselves, where log(1 + x) and exp(x) - 1 round to 0.
    small = np.array([1e-10, -1e-12, 3e-8], dtype=dtype)
    np.testing.assert_allclose(eddy.log1p(eddy.tensor(small)).numpy(), np.log1p(small), rtol=rtol)
    np.testing.assert_allclose(eddy.expm1(eddy.tensor(small)).numpy(), np.expm1(small), rtol=rtol)


def test_softmax_family_of_integers_is_refused_by_its_own_name():
    # After full refused values an integer tensor cannot hold, the shift's infinity was reported
    # as "full: the value inf does not fit in int64".
    for op in (eddy.logsumexp, eddy.softmax, eddy.log_softmax):
        with pytest.raises(eddy.Error, match=f"{op.__name__}: .*floating-point"):
            op(eddy.tensor([1, 2, 3]))


def test_logsumexp_over_several_axes_or_all_as_scipy():
    # axis=None and tuples were a pybind TypeError; one axis stays the default (the last).
    from math import log
    values = RNG.standard_normal((2, 3, 4))
    x = eddy.tensor(values)
    every = float(eddy.logsumexp(x, axis=None))
    assert every == pytest.approx(log(np.exp(values).sum()), rel=1e-12)
    pair = eddy.logsumexp(x, axis=(0, 2), keepdims=True)
    assert pair.shape == (1, 3, 1)
    np.testing.assert_allclose(pair.numpy(), np.log(np.exp(values).sum(axis=(0, 2), keepdims=True)), rtol=1e-12)
    assert eddy.logsumexp(x).shape == (2, 3)
    with pytest.raises(ValueError, match="logsumexp: axis -1 is out of range or repeated"):
        eddy.logsumexp(x, axis=(2, -1))
