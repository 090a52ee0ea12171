"""eddy.Tensor from Python: NumPy and DLPack interop, indexing, operators, repr, lifetimes."""

import contextlib
import copy
import gc
import pickle
import sys
import weakref

import numpy as np
import pytest

import eddy

DTYPES = ["float32", "float64", "complex64", "complex128", "int32", "int64", "bool"]


def sample(dtype, shape=(2, 3)):
    rng = np.random.default_rng(0)
    values = rng.standard_normal(shape) * 4
    if dtype == "bool":
        return values > 0
    if dtype.startswith("complex"):
        return (values + 1j * rng.standard_normal(shape)).astype(dtype)
    return values.astype(dtype)


# ---- NumPy round trips and memory sharing ----


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_round_trip_every_dtype_shares_memory(dtype):
    a = sample(dtype)
    t = eddy.as_tensor(a)
    assert str(t.dtype) == dtype and t.dtype == getattr(eddy.dtype, dtype)
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and len(t) == 2
    back = np.asarray(t)
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, a)
    assert np.shares_memory(back, a)
    assert np.shares_memory(t.numpy(), a)
    assert np.shares_memory(eddy.from_numpy(a).numpy(), a)
    # tolist agrees with NumPy's.
    assert t.tolist() == a.tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_constructor_copies(dtype):
    a = sample(dtype)
    t = eddy.tensor(a)
    assert not np.shares_memory(np.asarray(t), a)
    np.testing.assert_array_equal(np.asarray(t), a)
    assert str(t.dtype) == dtype


def test_writes_are_seen_through_either_side():
    a = np.zeros((2, 3), dtype=np.float64)
    t = eddy.as_tensor(a)
    a[1, 2] = 5.0
    assert t[1, 2].item() == 5.0
    t[0, 1] = -2.0
    assert a[0, 1] == -2.0
    view = t.numpy()
    view[0, 0] = 9.0
    assert a[0, 0] == 9.0 and t[0, 0].item() == 9.0


def test_tensor_results_share_memory_with_their_numpy_view():
    t = eddy.arange(6, dtype="float64") * 2.0
    a = np.asarray(t)
    a[0] = 42.0
    assert t[0].item() == 42.0
    assert np.shares_memory(np.asarray(t), a)


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a[:, ::2],  # steps
        lambda a: a.T,  # transpose
        lambda a: a[1:, 1:3],  # offset view
    ],
    ids=["step", "transpose", "offset"],
)
def test_strided_arrays_are_shared_with_their_layout(make):
    base = np.arange(20, dtype=np.float64).reshape(4, 5)
    view = make(base)
    t = eddy.as_tensor(view)
    np.testing.assert_array_equal(np.asarray(t), view)
    assert np.shares_memory(np.asarray(t), base)
    # Results of ops on strided inputs are right too.
    np.testing.assert_allclose(np.asarray(eddy.sum(t, axis=0)), view.sum(axis=0))
    np.testing.assert_allclose(np.asarray(t * 2.0), view * 2.0)


def test_negative_strides_are_copied():
    base = np.arange(10, dtype=np.float64)
    view = base[::-2]
    t = eddy.as_tensor(view)
    np.testing.assert_array_equal(np.asarray(t), view)
    assert not np.shares_memory(np.asarray(t), base)
    base[:] = 0
    assert t[0].item() == 9.0  # a copy: unaffected


def test_non_native_byte_order_is_copied_to_native():
    swapped = np.arange(4, dtype=np.float64).astype(np.dtype(np.float64).newbyteorder())
    assert not swapped.dtype.isnative
    t = eddy.as_tensor(swapped)
    back = np.asarray(t)
    assert back.dtype.isnative and t.dtype == eddy.float64
    np.testing.assert_array_equal(back, [0.0, 1.0, 2.0, 3.0])
    assert not np.shares_memory(back, swapped)


def test_unaligned_array_is_copied():
    raw = np.zeros(4 * 8 + 1, dtype=np.uint8)
    unaligned = raw[1:].view(np.float64)
    assert not unaligned.flags.aligned
    unaligned[:] = [1.0, 2.0, 3.0, 4.0]
    t = eddy.as_tensor(unaligned)
    np.testing.assert_array_equal(np.asarray(t), [1.0, 2.0, 3.0, 4.0])
    assert not np.shares_memory(np.asarray(t), raw)
    assert np.asarray(t).flags.aligned


@pytest.mark.parametrize(
    "numpy_dtype,eddy_dtype",
    [("int8", "int32"), ("int16", "int32"), ("uint8", "int32"), ("uint32", "int64")],
)
def test_dtypes_without_an_eddy_twin_are_converted(numpy_dtype, eddy_dtype):
    a = np.array([1, 2, 3], dtype=numpy_dtype)
    t = eddy.as_tensor(a)
    assert str(t.dtype) == eddy_dtype
    np.testing.assert_array_equal(np.asarray(t), [1, 2, 3])


def test_float16_shares_memory_and_bfloat16_has_no_numpy_form():
    a = np.array([1.0, 2.5, 65504.0], dtype=np.float16)
    t = eddy.as_tensor(a)
    assert str(t.dtype) == "float16"
    assert np.shares_memory(np.asarray(t), a)
    b = eddy.tensor([1.0, 3.0], dtype="bfloat16")
    assert str(b.dtype) == "bfloat16"
    np.testing.assert_array_equal(np.asarray(eddy.cast(b, "float32")), [1.0, 3.0])
    with pytest.raises(eddy.Error, match="bfloat16 tensor has no NumPy form"):
        np.asarray(b)
    # Shown all the same (repr raised that error, so a REPL could not show one).
    assert repr(b) == "tensor([1., 3.], dtype=bfloat16)"
    assert str(b) == repr(b)


def test_unsupported_numpy_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="'<U1'|str|U1"):
        eddy.as_tensor(np.array(["a"]))


def test_as_tensor_with_dtype_casts():
    a = np.array([1.5, -2.5])
    t = eddy.as_tensor(a, dtype="float32")
    assert t.dtype == eddy.float32
    np.testing.assert_array_equal(np.asarray(t), np.array([1.5, -2.5], dtype=np.float32))
    assert eddy.as_tensor(a, dtype=np.int64).tolist() == [1, -2]
    assert eddy.as_tensor(a, dtype=eddy.complex64).dtype == eddy.complex64


def test_array_protocol_with_dtype_and_copy():
    t = eddy.tensor([1.25, 2.75], dtype="float64")
    as_int = np.asarray(t, dtype=np.int32)
    assert as_int.dtype == np.int32 and as_int.tolist() == [1, 2]
    as_f32 = np.array(t, dtype=np.float32)
    assert as_f32.dtype == np.float32
    copied = t.__array__(copy=True)
    assert not np.shares_memory(copied, np.asarray(t))
    shared = t.__array__()
    assert np.shares_memory(shared, np.asarray(t))


def test_buffer_protocol():
    t = eddy.tensor([1.0, 2.0], dtype="float64")
    assert memoryview(t).format == "d" and memoryview(t).shape == (2,)
    np.testing.assert_array_equal(np.frombuffer(t, dtype=np.float64), [1.0, 2.0])
    assert memoryview(eddy.tensor([1], dtype="int32")).itemsize == 4


# ---- DLPack ----


@pytest.mark.parametrize("dtype", DTYPES)
def test_dlpack_to_numpy_shares_memory(dtype):
    t = eddy.as_tensor(sample(dtype))
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(a, np.asarray(t))
    assert np.shares_memory(a, np.asarray(t))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dlpack_from_numpy_shares_memory(dtype):
    a = sample(dtype)
    t = eddy.from_dlpack(a)
    assert str(t.dtype) == dtype
    np.testing.assert_array_equal(np.asarray(t), a)
    assert np.shares_memory(np.asarray(t), a)


def test_dlpack_strided_both_ways():
    base = np.arange(12.0).reshape(3, 4)
    t = eddy.from_dlpack(base[:, ::2])
    np.testing.assert_array_equal(np.asarray(t), base[:, ::2])
    transposed = np.from_dlpack(eddy.as_tensor(base).T)
    np.testing.assert_array_equal(transposed, base.T)
    assert np.shares_memory(transposed, base)


def test_dlpack_capsule_is_consumed_once():
    capsule = eddy.tensor([1.0, 2.0]).__dlpack__()
    t = eddy.from_dlpack(capsule)  # the capsule owns the only reference to the exported tensor
    del capsule
    gc.collect()
    assert t.tolist() == [1.0, 2.0]
    used = eddy.tensor([3.0]).__dlpack__()
    eddy.from_dlpack(used)
    with pytest.raises(TypeError, match="unused 'dltensor' capsule"):
        eddy.from_dlpack(used)


def test_unconsumed_dlpack_capsule_frees_its_tensor():
    t = eddy.tensor([1.0, 2.0])
    capsule = t.__dlpack__()
    del capsule  # deleter runs; the tensor is untouched
    gc.collect()
    assert t.tolist() == [1.0, 2.0]
    assert t.__dlpack_device__() == (1, 0)


def test_from_dlpack_rejects_objects_without_dlpack():
    with pytest.raises(TypeError):
        eddy.from_dlpack(42)


# ---- lifetimes ----


def test_tensor_outlives_its_numpy_array():
    a = np.arange(1000, dtype=np.float64)
    t = eddy.as_tensor(a)
    ref = weakref.ref(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(np.asarray(t), np.arange(1000, dtype=np.float64))
    assert ref() is not None  # the tensor holds it
    del t
    gc.collect()
    assert ref() is None  # and lets it go


def test_tensor_holds_one_reference_to_the_array():
    a = np.arange(4.0)
    before = sys.getrefcount(a)
    t = eddy.as_tensor(a)
    assert sys.getrefcount(a) == before + 1
    del t
    gc.collect()
    assert sys.getrefcount(a) == before


def test_numpy_array_outlives_its_tensor():
    t = eddy.arange(5, dtype="float64")
    a = np.asarray(t)
    t_ref = weakref.ref(t)
    del t
    gc.collect()
    np.testing.assert_array_equal(a, [0.0, 1.0, 2.0, 3.0, 4.0])
    assert t_ref() is not None  # the array (through its base) keeps the tensor
    del a
    gc.collect()
    assert t_ref() is None


def test_dlpack_exports_outlive_the_tensor():
    t = eddy.arange(4, dtype="float32")
    a = np.from_dlpack(t)
    del t
    gc.collect()
    np.testing.assert_array_equal(a, [0.0, 1.0, 2.0, 3.0])
    # The export holds the storage, not the Python object: an eddy result exported and
    # dropped at once stays valid.
    b = np.from_dlpack(eddy.arange(3, dtype="float64") * 2.0)
    gc.collect()
    np.testing.assert_array_equal(b, [0.0, 2.0, 4.0])

    source = np.arange(3.0)
    imported = eddy.from_dlpack(source)
    del source
    gc.collect()
    assert imported.tolist() == [0.0, 1.0, 2.0]


def test_many_round_trips_do_not_leak_references():
    a = np.arange(8.0)
    before = sys.getrefcount(a)
    for _ in range(50):
        t = eddy.as_tensor(a)
        np.asarray(t)
        eddy.from_dlpack(a)
        np.from_dlpack(t)
        del t
    gc.collect()
    assert sys.getrefcount(a) == before


# ---- indexing ----

BASE = np.arange(60, dtype=np.float64).reshape(3, 4, 5)

READ_KEYS = [
    1,
    -1,
    (0, 2),
    (-1, -2, -3),
    slice(1, None),
    slice(None, None, 2),
    slice(None, None, -1),
    slice(-1, -4, -2),
    slice(10, None, -1),
    slice(2, 1, 2),
    (slice(None), slice(1, 3), 4),
    None,
    (None, 0),
    (0, None, slice(None), None),
    Ellipsis,
    (Ellipsis, 1),
    (0, Ellipsis, None),
    (1, Ellipsis, slice(None, None, -2)),
    [2, 0, 2],
    [-1, 0],
    np.array([[0, 1], [2, 2]]),
    (slice(None), [3, 0]),
    (Ellipsis, np.array([4, -5])),
    np.array([True, False, True]),
    (slice(None), np.array([False, True, True, False])),
    (0, slice(None), np.array([True, False, True, False, True])),
    np.int64(2),
    (np.int32(1), slice(None, 2)),
    [],
    (slice(None), []),
]


@pytest.mark.parametrize("key", READ_KEYS, ids=[repr(k) for k in READ_KEYS])
def test_indexing_matches_numpy(key):
    t = eddy.as_tensor(BASE)
    got = np.asarray(t[key])
    expected = BASE[key]
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_indexing_with_a_tensor_of_indices():
    t = eddy.as_tensor(BASE)
    np.testing.assert_array_equal(np.asarray(t[eddy.tensor([2, 0])]), BASE[[2, 0]])
    np.testing.assert_array_equal(np.asarray(t[:, eddy.tensor([True, False, False, True])]),
                                  BASE[:, [True, False, False, True]])


def test_basic_index_reads_are_views_of_contiguous_data():
    a = np.arange(12.0).reshape(3, 4)
    t = eddy.as_tensor(a)
    row = t[1]
    assert np.shares_memory(np.asarray(row), a)
    a[1, 0] = -1.0
    assert row[0].item() == -1.0


@pytest.mark.parametrize(
    "key,error,message",
    [
        (0.5, IndexError, "unsupported index of type float"),
        ("a", IndexError, "unsupported index of type str"),
        (True, IndexError, "Python bool"),
        ((0, 0, 0, 0), IndexError, "too many indices"),
        ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
        (3, IndexError, "index 3 is out of bounds for axis 0 with size 3"),
        (-4, IndexError, "index -4 is out of bounds for axis 0 with size 3"),
        ((0, 4), IndexError, "out of bounds for axis 1 with size 4"),
        ([0, 3], IndexError, "out of bounds for axis 0 with size 3"),
        (([0], [1]), IndexError, "only one integer-array"),
        (np.array([True, False]), IndexError, "boolean index of shape"),
        (np.zeros((3, 4), dtype=bool), IndexError, "only 1-D masks"),
        (np.array([0.5, 1.5]), IndexError, "integers or booleans"),
    ],
)
def test_unsupported_or_bad_indices_raise(key, error, message):
    t = eddy.as_tensor(BASE)
    with pytest.raises(error, match=message):
        t[key]


@pytest.mark.parametrize(
    "key,value",
    [
        (1, 7.0),
        ((0, 2), np.arange(5.0)),
        (slice(1, 3), -1.0),
        ((slice(None), 1), np.full((3, 5), 2.5)),  # a non-contiguous target
        ((Ellipsis, 3), np.arange(12.0).reshape(3, 4)),
        ((slice(None), slice(None, None, 2), 0), np.array([1.0, 2.0])),  # broadcast over rows
        ((None, 2), 4.0),
        ((0, None, 1), np.ones((1, 5))),
        (Ellipsis, 0.0),
    ],
)
def test_setitem_matches_numpy(key, value):
    a = BASE.copy()
    expected = BASE.copy()
    t = eddy.as_tensor(a)
    t[key] = value if np.isscalar(value) else eddy.tensor(value)
    expected[key] = value
    np.testing.assert_array_equal(a, expected)


def test_setitem_on_a_strided_numpy_view_writes_through():
    base = np.zeros((4, 6))
    t = eddy.as_tensor(base[::2, 1::2])
    t[:, 1] = 3.0
    expected = np.zeros((4, 6))
    expected[::2, 1::2][:, 1] = 3.0
    np.testing.assert_array_equal(base, expected)


def test_setitem_casts_the_value():
    a = np.zeros(3, dtype=np.int32)
    eddy.as_tensor(a)[1:] = eddy.tensor([2.0, 3.0])
    assert a.tolist() == [0, 2, 3]


@pytest.mark.parametrize("key", [[0, 1], np.array([True, False, True]), slice(None, None, -1)])
def test_setitem_through_copies_is_refused(key):
    t = eddy.as_tensor(BASE.copy())
    with pytest.raises(IndexError, match="not supported"):
        t[key] = 0.0


def test_setitem_shape_mismatch_is_an_eddy_error():
    t = eddy.zeros((2, 3), dtype="float64")
    with pytest.raises(eddy.Error, match="copy_"):
        t[0] = eddy.tensor([1.0, 2.0])
    # Shapes that broadcast together, to a larger one than the target's: written past its end before.
    with pytest.raises(eddy.Error, match=r"a source of shape \[2, 3\] does not broadcast to the target's shape \[3\]"):
        t[0] = np.ones((2, 3))
    with pytest.raises(eddy.Error, match="does not broadcast"):
        eddy.zeros(1, dtype="float64")[:] = eddy.ones(1000, dtype="float64")
    np.testing.assert_array_equal(np.asarray(t), np.zeros((2, 3)))


# ---- operators, scalars and promotion ----


def test_arithmetic_operators_match_numpy():
    a = np.array([[1.5, -2.0, 3.0]])
    b = np.array([[0.5], [2.0]])
    x, y = eddy.as_tensor(a), eddy.as_tensor(b)
    for got, expected in [
        (x + y, a + b),
        (x - y, a - b),
        (x * y, a * b),
        (x / y, a / b),
        (abs(x) ** y, np.abs(a) ** b),
        (-x, -a),
        (abs(x), np.abs(a)),
        (x @ eddy.as_tensor(a.T), a @ a.T),
        (a @ eddy.as_tensor(a.T), a @ a.T),  # __rmatmul__ from a NumPy array on the left
    ]:
        assert isinstance(got, eddy.Tensor)
        np.testing.assert_allclose(np.asarray(got), expected)


def test_reflected_operators_with_python_scalars():
    a = np.array([1.0, 2.0, 4.0])
    x = eddy.as_tensor(a)
    for got, expected in [
        (x + 1, a + 1),
        (1 + x, 1 + a),
        (x - 1.5, a - 1.5),
        (10 - x, 10 - a),
        (3 * x, 3 * a),
        (x * 0.5, a * 0.5),
        (1 / x, 1 / a),
        (x / 4, a / 4),
        (x**2, a**2),
        (2**x, 2**a),
        (2.5**x, 2.5**a),
    ]:
        assert got.dtype == eddy.float64
        np.testing.assert_allclose(np.asarray(got), expected)


def test_numpy_arrays_on_the_left_give_differentiable_tensors():
    a = np.array([1.0, 2.0])
    x = eddy.tensor([3.0, 5.0], dtype="float64", requires_grad=True)
    for got, expected in [(a - x, a - [3.0, 5.0]), (a * x, a * [3.0, 5.0]), (a / x, a / [3.0, 5.0]),
                          (a + x, a + [3.0, 5.0]), (a**x, a ** [3.0, 5.0])]:
        assert isinstance(got, eddy.Tensor) and got.requires_grad
        np.testing.assert_allclose(np.asarray(got), expected)
    assert isinstance(a @ x, eddy.Tensor)
    assert (a < x).tolist() == [True, True]
    # Ufuncs still go through __array__ and give arrays.
    sines = np.sin(x.detach())
    assert isinstance(sines, np.ndarray)
    np.testing.assert_allclose(sines, np.sin([3.0, 5.0]))


def test_comparisons_give_bool_tensors():
    x = eddy.tensor([1.0, 2.0, 3.0], dtype="float64")
    for got, expected in [
        (x == 2.0, [False, True, False]),
        (x != 2.0, [True, False, True]),
        (x < 2.0, [True, False, False]),
        (x <= 2.0, [True, True, False]),
        (x > 2.0, [False, False, True]),
        (x >= 2.0, [False, True, True]),
        (x == eddy.tensor([1.0, 0.0, 3.0], dtype="float64"), [True, False, True]),
    ]:
        assert got.dtype == eddy.bool_
        assert got.tolist() == expected
    with pytest.raises(TypeError):
        hash(x)


def test_python_scalars_keep_the_tensor_dtype():
    x = eddy.tensor([1.0, 2.0], dtype="float32")
    assert (x + 1).dtype == eddy.float32
    assert (2.5 * x).dtype == eddy.float32
    assert (x**2).dtype == eddy.float32
    c = eddy.tensor([1 + 1j], dtype="complex64")
    assert (c * 2).dtype == eddy.complex64


def test_python_scalars_keep_the_tensor_dtype_in_comparisons_and_function_forms():
    # As in NumPy 2 and PyTorch: 0.1 beside a float32 tensor is float32's 0.1. Compared in
    # float64, f == 0.1 was False for the float32 tensor's 0.1, and eddy.maximum(f, 0.0) was float64.
    f = eddy.tensor([0.1, 0.2], dtype="float32")
    assert (f == 0.1).tolist() == [True, False]
    assert (f >= 0.2).tolist() == [False, True]
    assert (0.1 == f).tolist() == [True, False]
    assert eddy.add(f, 2.0).dtype == eddy.float32
    assert eddy.add(2.0, f).dtype == eddy.float32
    assert eddy.maximum(f, 0.0).dtype == eddy.float32
    assert eddy.where(f > 0.15, f, 0.0).dtype == eddy.float32
    assert eddy.where(f > 0.15, 1, f).tolist() == pytest.approx([0.1, 1.0])
    assert eddy.mul(eddy.tensor([1 + 1j], dtype="complex64"), 2j).dtype == eddy.complex64
    # Integer tensors keep NumPy's promotion: a Python float makes float64.
    assert eddy.add(eddy.tensor([1, 2], dtype="int32"), 0.5).dtype == eddy.float64
    # None is no tensor: unequal, as in PyTorch.
    assert (f == None) is False  # noqa: E711
    assert (f != None) is True  # noqa: E711


def test_dtype_promotion_basics():
    f32 = eddy.tensor([1.0], dtype="float32")
    f64 = eddy.tensor([1.0], dtype="float64")
    i32 = eddy.tensor([1], dtype="int32")
    i64 = eddy.tensor([1], dtype="int64")
    b = eddy.tensor([True])
    c64 = eddy.tensor([1j], dtype="complex64")
    assert (f32 + f64).dtype == eddy.float64
    assert (i32 + i64).dtype == eddy.int64
    assert (i32 + f32).dtype == eddy.float32
    assert (b + i64).dtype == eddy.int64
    assert (f32 + c64).dtype == eddy.complex64
    assert (f64 + c64).dtype == eddy.complex128
    assert (f32 * (1 + 1j)).dtype in (eddy.complex64, eddy.complex128)
    assert (i64 + 1).dtype == eddy.int64
    assert (i64 + 1.5).dtype == eddy.float64


def test_true_division_of_integers_is_float_like_numpy():
    i = eddy.tensor([1, 2, 3])
    got = i / 2
    assert got.dtype == eddy.float64
    np.testing.assert_allclose(np.asarray(got), np.array([1, 2, 3]) / 2)
    np.testing.assert_allclose(np.asarray(6 / i), 6 / np.array([1, 2, 3]))
    np.testing.assert_allclose(np.asarray(i / eddy.tensor([2, 4, 8], dtype="int32")), [0.5, 0.5, 0.375])
    # eddy.div is the op itself: integer division stays integer, rounded toward 0 as in C.
    assert eddy.div(i, eddy.tensor([2, 2, 2])).dtype == eddy.int64
    np.testing.assert_array_equal(np.asarray(eddy.div(eddy.tensor([-7, 7]), eddy.tensor([2, -2]))), [-3, -3])


@pytest.mark.parametrize("dtype,lowest", [("int32", -2**31), ("int64", -2**63)])
def test_integer_division_where_c_leaves_it_undefined(dtype, lowest):
    # The lowest value over -1 stopped the process (SIGFPE); it wraps to itself, as in NumPy.
    # Division by zero gives 0.
    got = eddy.div(eddy.tensor([lowest, 5, 5], dtype=dtype), eddy.tensor([-1, 0, -1], dtype=dtype))
    np.testing.assert_array_equal(np.asarray(got), [lowest, 0, -5])


def test_a_python_int_beside_an_int32_tensor_stays_int32():
    # As in NumPy 2, PyTorch and JAX; as int64 it made x * 1 int64 and INT_MIN / -1 not wrap.
    x = eddy.tensor([2**31 - 1, -2**31], dtype="int32")
    assert (x * 1).dtype == eddy.int32 and (1 + x).dtype == eddy.int32
    np.testing.assert_array_equal(np.asarray(x + 1), np.array([2**31 - 1, -2**31], np.int32) + 1)
    np.testing.assert_array_equal(np.asarray(eddy.div(x * 1, -1)), [-2**31 + 1, -2**31])
    assert eddy.maximum(x, 0).dtype == eddy.int32
    assert (x + 2.5).dtype == eddy.float64  # a Python float still widens, as in NumPy
    # One int32 cannot hold stays int64: comparisons and division are exact, as in NumPy 2.
    assert (x < 2**40).tolist() == [True, True] and (x >= -2**63).tolist() == [True, True]
    np.testing.assert_allclose(np.asarray(x / 2**40), np.array([2**31 - 1, -2**31]) / 2**40)
    assert (x + 2**41).dtype == eddy.int64 and (x + 2**41).tolist() == [2**31 - 1 + 2**41, -2**31 + 2**41]


def test_scalar_conversions():
    assert float(eddy.tensor(2.5)) == 2.5
    assert int(eddy.tensor(7)) == 7
    assert bool(eddy.tensor(True)) is True
    assert bool(eddy.tensor([0.0])) is False
    c = eddy.tensor(1 + 2j).item()
    assert isinstance(c, complex) and c == 1 + 2j
    assert isinstance(eddy.tensor([3], dtype="int32").item(), int)
    assert isinstance(eddy.tensor(1.0).item(), float)
    assert eddy.tensor(False).item() is False
    # Python's conversions of the item: int(NaN) was -2^63 and float(1 + 2j) 1.0, without a word.
    assert int(eddy.tensor(7.9)) == 7 and type(int(eddy.tensor(True))) is int
    with pytest.raises(ValueError, match="NaN"):
        int(eddy.tensor(float("nan")))
    with pytest.raises(OverflowError):
        int(eddy.tensor(float("inf")))
    with pytest.raises(TypeError, match="complex"):
        float(eddy.tensor(1 + 2j))
    with pytest.raises(eddy.Error, match="ambiguous"):
        bool(eddy.tensor([1.0, 2.0]))
    with pytest.raises(eddy.Error, match="item\\(\\)"):
        eddy.tensor([1.0, 2.0]).item()
    with pytest.raises(TypeError, match="0-d"):
        len(eddy.tensor(1.0))


def test_repr():
    assert repr(eddy.tensor([1, 2, 3])) == "tensor([1, 2, 3], dtype=int64)"
    assert repr(eddy.tensor(3.0)) == "tensor(3., dtype=float64)"
    assert repr(eddy.tensor([True, False])) == "tensor([ True, False], dtype=bool)"
    assert repr(eddy.tensor([1 + 2j], dtype="complex64")) == "tensor([1.+2.j], dtype=complex64)"
    assert repr(eddy.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float32")) == (
        "tensor([[1., 2.],\n        [3., 4.]], dtype=float32)"
    )
    assert repr(eddy.tensor([1.0], requires_grad=True)) == "tensor([1.], dtype=float64, requires_grad=True)"
    assert str(eddy.float32) == "float32" and str(eddy.bool_) == "bool"


def test_transpose_property_and_methods():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = eddy.as_tensor(a)
    np.testing.assert_array_equal(np.asarray(t.T), a.T)
    np.testing.assert_array_equal(np.asarray(t.sum(axis=1)), a.sum(axis=1))
    np.testing.assert_array_equal(np.asarray(t.reshape((6, 4))), a.reshape(6, 4))
    np.testing.assert_array_equal(np.asarray(t.astype("int32")), a.astype(np.int32))
    np.testing.assert_array_equal(np.asarray(t.mean(axis=(0, 2), keepdims=True)), a.mean(axis=(0, 2), keepdims=True))
    np.testing.assert_array_equal(np.asarray(t.flatten()), a.ravel())
    np.testing.assert_array_equal(np.asarray(t.transpose(0, 2)), a.swapaxes(0, 2))


def test_constructor_and_dtype_errors():
    with pytest.raises(TypeError, match="unknown dtype 'float8'"):
        eddy.zeros(3, dtype="float8")
    with pytest.raises(TypeError, match="unknown dtype 'bogus'"):
        eddy.tensor([1.0], dtype="bogus")
    with pytest.raises(eddy.Error, match=r"add: shapes \[2\] and \[3\] cannot be broadcast"):
        eddy.tensor([1, 2]) + eddy.tensor([1, 2, 3])
    assert issubclass(eddy.Error, ValueError)
    with pytest.raises(ValueError):
        eddy.matmul(eddy.ones((2, 3)), eddy.ones((2, 3)))


def test_read_only_arrays_are_copied_not_written_through():
    source = np.arange(4.0)
    broadcast = np.broadcast_to(source, (3, 4))  # read-only view
    t = eddy.as_tensor(broadcast)
    assert not np.shares_memory(np.asarray(t), source)
    t[0, 0] = 42.0
    assert source[0] == 0.0
    frozen = np.arange(3.0)
    frozen.setflags(write=False)
    assert not np.shares_memory(np.asarray(eddy.as_tensor(frozen)), frozen)


@pytest.mark.parametrize("key", [slice(0, 0, 3), slice(None, 0, 2), slice(1, 1, 3), slice(5, 2, 1)])
def test_empty_slices_with_steps_are_empty(key):
    a = np.arange(10.0)
    assert np.asarray(eddy.as_tensor(a)[key]).shape == a[key].shape == (0,)


def test_from_dlpack_rejects_negative_strides_before_consuming_the_capsule():
    reversed_view = np.arange(5.0)[::-1]
    with pytest.raises(eddy.Error, match="negative strides"):
        eddy.from_dlpack(reversed_view)
    assert eddy.from_dlpack(np.ascontiguousarray(reversed_view)).tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]


def test_assignment_into_a_tensor_that_requires_grad_is_refused_while_recording():
    # Autodiff does not record the write: y[0] = 100 after z = sum(y * y) made x.grad [200, 4].
    x = eddy.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    z = eddy.sum(y * y)
    with pytest.raises(eddy.Error, match=r"assignment into a tensor of shape \[2\] that requires grad"):
        y[0] = 100.0
    with pytest.raises(eddy.Error, match="requires grad"):
        x[1] = 0.0
    z.backward()
    np.testing.assert_allclose(np.asarray(x.grad), [2.0, 4.0])
    with eddy.no_grad():
        x[1] = 5.0
    np.testing.assert_allclose(np.asarray(x), [1.0, 5.0])


@pytest.mark.parametrize("target, source", [(np.s_[1:4], np.s_[0:3]), (np.s_[0:3], np.s_[1:4]),
                                            (np.s_[1:], np.s_[:-1]), (np.s_[2:], np.s_[:4])])
def test_assignment_between_overlapping_views_matches_numpy(target, source):
    expected = np.arange(6.0)
    expected[target] = expected[source].copy()
    x = eddy.tensor(np.arange(6.0))
    x[target] = x[source]
    np.testing.assert_array_equal(np.asarray(x), expected)


def test_assignment_between_overlapping_columns_matches_numpy():
    expected = np.arange(6.0).reshape(2, 3)
    y = eddy.tensor(expected)
    expected[:, 1:] = expected[:, :2].copy()
    y[:, 1:] = y[:, :2]
    np.testing.assert_array_equal(np.asarray(y), expected)


def test_uint64_values_beyond_int64_are_refused():
    with pytest.raises(ValueError, match="uint64 array holds 18446744073709551615"):
        eddy.as_tensor(np.array([1, 2**64 - 1], dtype=np.uint64))
    np.testing.assert_array_equal(np.asarray(eddy.as_tensor(np.array([7], dtype=np.uint64))), [7])


def test_assignment_from_numpy_over_the_same_memory_matches_numpy():
    x = eddy.arange(6, dtype="float64")
    x[1:] = x.numpy()[:-1]
    np.testing.assert_array_equal(np.asarray(x), [0, 0, 1, 2, 3, 4])
    shared = np.arange(6.0)
    y = eddy.as_tensor(shared)
    y[2:] = shared[:-2]
    np.testing.assert_array_equal(shared, [0, 1, 0, 1, 2, 3])


def test_augmented_assignment_writes_in_place():
    t = eddy.zeros(4)
    view = t[1:3]
    view += 1
    view *= 3
    view -= 1
    view /= 2
    np.testing.assert_array_equal(np.asarray(t), [0, 1, 1, 0])
    # The manual optimiser step of PyTorch tutorials changes the parameters.
    model = eddy.nn.Linear(2, 1)
    x, y = eddy.randn((8, 2)), eddy.randn((8, 1))
    losses = []
    for _ in range(3):
        loss = eddy.mean((model(x) - y) ** 2)
        for p in model.parameters():
            p.grad = None
        loss.backward()
        with eddy.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        losses.append(loss.item())
    assert losses[2] < losses[1] < losses[0]


def test_augmented_assignment_refusals_and_tracked_tensors():
    leaf = eddy.zeros(3).requires_grad_()
    with pytest.raises(eddy.Error, match="requires grad"):
        leaf -= 1
    # A tensor autodiff tracks takes the new value under its name; the gradient is x + 1's.
    a = eddy.tensor([1.0, 2.0]).requires_grad_()
    b = a * 2
    before = b
    b += a
    np.testing.assert_array_equal(np.asarray(b.detach()), [3, 6])
    np.testing.assert_array_equal(np.asarray(before.detach()), [2, 4])
    eddy.sum(b).backward()
    np.testing.assert_array_equal(np.asarray(a.grad), [3, 3])
    integers = eddy.zeros(3, "int64")
    with pytest.raises(eddy.Error, match="float64 and x is int64"):
        integers /= 2
    with pytest.raises(eddy.Error, match=r"shape \[2, 3\] and x \[3\]"):
        floats = eddy.zeros(3)
        floats += eddy.zeros((2, 3))
    # A plain x made tracked by y is rebound: where x shares its memory (a view of a buffer), the
    # buffer kept its zeros without a word. Refused; a plain x alone is rebound as before.
    p = eddy.tensor([1.0, 2.0, 3.0]).requires_grad_()
    buffer = eddy.zeros((2, 3))
    row = buffer[0]
    with pytest.raises(eddy.Error, match="shares its memory with another tensor"):
        row += p
    with pytest.raises(eddy.Error, match="shares its memory with another tensor"):
        buffer += p
    wrapped = np.zeros(3)
    with pytest.raises(eddy.Error, match="NumPy or DLPack memory it wraps"):
        view_of_numpy = eddy.from_numpy(wrapped)
        view_of_numpy += p
    # An explicit Euler step on a plain state is rebound: the op that read x holds it, and keeps
    # its old values, as it should.
    k = eddy.tensor([0.5]).requires_grad_()
    state = eddy.ones(3, "float64")  # float32 stays float32 under +=, as in place
    for _ in range(3):
        state += 0.1 * (-k * state)
    eddy.sum(state).backward()
    np.testing.assert_allclose(np.asarray(k.grad), [-3 * 0.1 * 3 * 0.95**2], rtol=1e-12)
    # An int32 x += p kept x's name for a float64 result.
    counts = eddy.tensor([1, 2, 3], dtype="int32")
    with pytest.raises(eddy.Error, match="the result is float64 and x is int32"):
        counts += p
    total = eddy.zeros(3)
    total += p
    eddy.sum(total).backward()
    np.testing.assert_array_equal(np.asarray(p.grad), [1, 1, 1])
    # An int64 result that int32 cannot hold wrapped around in place: refused, as t[...] = 2**40 is.
    small = eddy.tensor([1, 2, 3], dtype="int32")
    with pytest.raises(OverflowError, match="does not fit in x's int32"):
        small += 2**40 + 5
    with pytest.raises(OverflowError, match="does not fit in x's int32"):
        small *= 2**31
    small += eddy.tensor([1, 1, 1], dtype="int64")
    np.testing.assert_array_equal(np.asarray(small), [2, 3, 4])
    # A tracked x was rebound to a result of another shape or dtype: a scalar running total became
    # a vector, a float32 x float64.
    running_total = eddy.zeros([])
    with pytest.raises(eddy.Error, match=r"shape \[3\] and x \[\]"):
        running_total += p * p
    w32 = eddy.tensor([1.0, 2.0], dtype="float32").requires_grad_()
    h = w32 * 2
    h += eddy.tensor([0.5, 0.5])
    assert str(h.dtype) == "float32"
    eddy.sum(h).backward()
    np.testing.assert_array_equal(np.asarray(w32.grad), [2, 2])


def test_python_ints_past_the_range_raise_as_in_numpy():
    x = eddy.ones(3)
    with pytest.raises(OverflowError):
        x + 2**1100
    with pytest.raises(IndexError):
        x[2**70]
    with pytest.raises(OverflowError):
        x < 10**400
    with pytest.raises(OverflowError):
        eddy.maximum(x, 10**400)


def test_integer_tensors_from_values_refuse_what_they_cannot_hold():
    # The cast wrapped: tensor([1, 2**40], dtype=int32) held [1, 0], NaN the lowest integer.
    with pytest.raises(OverflowError, match="tensor: the value 1099511627776 does not fit in int32"):
        eddy.tensor([1, 2**40], dtype="int32")
    with pytest.raises(OverflowError, match=r"the value 3e\+09 does not fit in int32"):
        eddy.tensor(3e9, dtype="int32")
    with pytest.raises(ValueError, match="a NaN does not fit in int64"):
        eddy.tensor(float("nan"), dtype="int64")
    with pytest.raises(OverflowError, match="does not fit in int32"):
        eddy.as_tensor(np.array([5000000000]), dtype="int32")
    with pytest.raises(OverflowError, match="does not fit in int64"):
        eddy.tensor([1e20], dtype="int64")
    # Values in range as before: floats truncate toward zero, as NumPy's; int64's extremes stay.
    np.testing.assert_array_equal(np.asarray(eddy.tensor([-2.9, 2147483647.5], dtype="int32")), [-2, 2147483647])
    assert eddy.tensor(np.array([2**63 - 1]), dtype="int64").item() == 2**63 - 1
    # A tensor given is cast as astype casts it.
    assert eddy.tensor(eddy.tensor([2**40]), dtype="int32").dtype == eddy.int32
    # eddy.full names the value with every digit (six made 2147483648 read as in range).
    with pytest.raises(eddy.Error, match="the value 2147483648 does not fit in int32"):
        eddy.full([1], 2147483648.0, dtype="int32")


def test_python_ints_are_exact_in_int64():
    assert eddy.tensor(2**53 + 1).item() == 2**53 + 1
    assert eddy.tensor(2**63 - 1).item() == 2**63 - 1
    big = eddy.tensor(np.array([2**53 + 1]))
    assert bool((big == 2**53 + 1)[0])
    assert (big - (2**53 + 1)).item() == 0
    t = eddy.zeros(1, "int64")
    t[0] = 2**62 + 1
    assert t.item() == 2**62 + 1
    with pytest.raises(OverflowError, match="does not fit in int64"):
        eddy.tensor(2**64)


def test_assigned_numbers_an_integer_tensor_cannot_hold_are_refused():
    small = eddy.zeros(2, "int32")
    with pytest.raises(OverflowError, match="does not fit in int32"):
        small[0] = 2**40
    with pytest.raises(ValueError, match="cannot assign nan"):
        eddy.zeros(2, "int64")[0] = float("nan")
    # Finite floats out of range, and NumPy's scalars, stored the lowest integer.
    with pytest.raises(OverflowError, match="3000000000.0 does not fit in int32"):
        small[0] = 3e9
    with pytest.raises(OverflowError, match="does not fit in int64"):
        eddy.zeros(2, "int64")[1] = 1e19
    with pytest.raises(ValueError, match="cannot assign nan"):
        eddy.zeros(2, "int64")[0] = np.float32("nan")
    with pytest.raises(OverflowError, match="the integer 1099511627776 does not fit in int32"):
        small[0] = np.int64(2**40)
    with pytest.raises(OverflowError, match="the integer 1099511627776 does not fit in int32"):
        small[0:2] = [7, 2**40]
    assert small.tolist() == [0, 0]
    # In range, a float is truncated toward zero, as in NumPy.
    small[0], small[1] = -2147483648.9, np.float64(-2.7)
    assert small.tolist() == [-2147483648, -2]


def test_an_integer_after_a_slice_gives_a_view():
    t = eddy.tensor(np.arange(6.0).reshape(2, 3))
    column = t[:, 1]
    column[0] = 100.0
    assert t.numpy()[0, 1] == 100
    assert np.shares_memory(np.asarray(t[:, 2]), np.asarray(t))
    assert np.shares_memory(np.asarray(t[..., 0, None]), np.asarray(t))
    # Through a tensor that requires grad the same keys stay differentiable.
    w = eddy.tensor([[1.0, 2.0], [3.0, 4.0]]).requires_grad_()
    np.testing.assert_array_equal(np.asarray(eddy.grad(lambda v: eddy.sum(v[:, 1] * 2))(w)), [[0, 2], [0, 2]])


def test_empty_axis_tuples_reduce_over_no_axes():
    x = eddy.tensor(np.arange(6.0).reshape(2, 3))
    for reduce in (eddy.sum, eddy.mean, eddy.prod, eddy.max, eddy.min):
        np.testing.assert_array_equal(np.asarray(reduce(x, axis=())), np.arange(6.0).reshape(2, 3))
        assert reduce(x, axis=(), keepdims=True).shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(eddy.flip(x, ())), np.arange(6.0).reshape(2, 3))


def test_iteration_truth_and_sign_edge_cases():
    with pytest.raises(TypeError, match="0-d"):
        list(eddy.tensor(5.0))
    assert [row.tolist() for row in eddy.tensor([[1.0, 2.0], [3.0, 4.0]])] == [[1, 2], [3, 4]]
    assert bool(eddy.tensor(1j)) and not bool(eddy.tensor(0j))
    signs = np.asarray(eddy.sign(eddy.tensor([float("nan"), -2.0, 0.0, 3.0])))
    assert np.isnan(signs[0]) and list(signs[1:]) == [-1, 0, 1]
    # |-0.0| is +0.0, eagerly and compiled: 1 / |x| is +inf, as in NumPy.
    zero = eddy.tensor([-0.0])
    assert np.asarray(1.0 / eddy.abs(zero))[0] == np.inf
    assert np.asarray(eddy.jit(lambda v: 1.0 / eddy.abs(v))(zero))[0] == np.inf


def test_findings_of_an_ops_review_against_numpy():
    # A list of floats an integer tensor cannot hold is refused as one number is: [nan, 1e10]
    # into int32 stored the lowest integer twice.
    t = eddy.tensor([1, 2], dtype="int32")
    with pytest.raises(ValueError, match="a NaN does not fit in int32"):
        t[:] = [float("nan"), 1.0]
    with pytest.raises(OverflowError):
        t[:] = [1e10, 2.0]
    t[:] = [3.7, -2.5]
    assert t.tolist() == [3, -2]
    # **= and @= write in place, as NumPy's: Python rebound the name, and a view's base kept its values.
    x = eddy.tensor([1.0, 2.0, 3.0, 4.0])
    view = x[1:3]
    view **= 2
    assert x.tolist() == [1.0, 4.0, 9.0, 4.0]
    shared = np.eye(2)
    m = eddy.from_numpy(shared)
    m @= eddy.tensor(np.array([[0.0, 1.0], [1.0, 0.0]]))
    assert shared.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    # One of another shape rebinds the name in either grad mode, as PyTorch's: it failed under
    # no_grad where training ran.
    w = eddy.tensor(np.ones((3, 4))).requires_grad_()
    for grad_mode in (eddy.no_grad, contextlib.nullcontext):
        with grad_mode():
            h = eddy.tensor(np.ones((2, 3))) * 1.0
            h @= w
            assert h.shape == (2, 4)
    # The text "float" is NumPy's float64 and PyTorch's float32: refused, where it gave float32.
    with pytest.raises(TypeError, match="dtype 'float' is float64 in NumPy and float32 in PyTorch"):
        eddy.zeros([2], dtype="float")
    assert eddy.zeros([2], dtype=float).dtype == eddy.float64
    # A complex mean squared error is the mean of |e|^2, real; it was (1 + 1j)^2 = 2j.
    loss = eddy.mse_loss(eddy.tensor([1 + 1j]), eddy.tensor([0j]))
    assert loss.dtype == eddy.float64 and float(loss) == 2.0


def test_concatenate_and_stack_promote_mixed_dtypes_as_numpy():
    # An int64 beside a float64 (or float32 beside float64) was refused; every binary op promotes.
    ints, floats = np.array([1, 2]), np.array([0.5, 1.5])
    joined = eddy.concatenate([eddy.tensor(ints), eddy.tensor(floats)])
    assert joined.dtype == eddy.float64 and joined.tolist() == np.concatenate([ints, floats]).tolist()
    stacked = eddy.stack([eddy.tensor(floats.astype(np.float32)), eddy.tensor(floats)])
    assert stacked.dtype == eddy.float64 and stacked.shape == (2, 2)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "complex64", "int32", "bool"])
def test_tensors_pickle_and_copy_with_their_values_dtype_and_requires_grad(dtype):
    # They raised "cannot pickle", which copy.deepcopy of any structure holding one hits too.
    source = eddy.cast(eddy.transpose(eddy.tensor(np.arange(6.0).reshape(2, 3))), dtype)
    for copied in (pickle.loads(pickle.dumps(source)), copy.deepcopy(source), copy.copy(source)):
        assert copied.dtype == source.dtype and copied.shape == source.shape
        assert copied.tolist() == source.tolist()
    leaf = eddy.ones([3], dtype=eddy.float64).requires_grad_()
    copied = copy.deepcopy({"w": leaf})["w"]
    assert copied.requires_grad and copied.is_leaf
    with pytest.raises(eddy.Error, match="computed with gradient tracking .* copy t.detach"):
        pickle.dumps(leaf * 2.0)


def test_ordering_bool_tensors_names_the_op():
    # It reached the backend, which said "cpu kernel gt does not support dtype bool".
    flags = eddy.tensor([True, False])
    with pytest.raises(eddy.Error, match="gt: needs real, non-bool tensors, got bool"):
        flags > flags
    with pytest.raises(eddy.Error, match="maximum: needs real, non-bool tensors, got bool"):
        eddy.maximum(flags, flags)
