// NumPy and DLPack interop: tensors over NumPy memory and NumPy arrays over tensor memory, both
// without copies where the layout allows, and Python values converted to tensors.

#include <dlpack/dlpack.h>
#include <pybind11/complex.h>
#include <pybind11/numpy.h>

#include <limits>
#include <map>

#include "bindings.h"
#include "eddy/core/backend.h"
#include "eddy/core/distribution.h"
#include "eddy/core/tracing.h"
#include "eddy/ops/ops.h"

namespace eddy::python {

namespace {

// DLPack 0.8 added kDLBool; the 0.6 header Debian ships predates it.
constexpr uint8_t kDLBoolCode = 6;

}  // namespace

std::string numpy_name(DType dtype) {
  switch (dtype) {
    case DType::b8: return "bool";
    default: return std::string(dtype_name(dtype));
  }
}

namespace {

// The NumPy dtype name eddy can share memory with, or the one a copy converts to.
std::pair<DType, bool> dtype_of_numpy(const std::string& name) {
  static const std::map<std::string, std::pair<DType, bool>> table{
      {"float32", {DType::f32, true}},     {"float64", {DType::f64, true}},   {"complex64", {DType::c64, true}},
      {"complex128", {DType::c128, true}}, {"int32", {DType::i32, true}},     {"int64", {DType::i64, true}},
      {"bool", {DType::b8, true}},         {"float16", {DType::f16, true}},  {"int8", {DType::i32, false}},
      {"int16", {DType::i32, false}},      {"uint8", {DType::i32, false}},    {"uint16", {DType::i32, false}},
      {"uint32", {DType::i64, false}},     {"uint64", {DType::i64, false}}};
  auto found = table.find(name);
  if (found == table.end()) {
    throw py::type_error("eddy: NumPy dtype '" + name + "' has no eddy equivalent (float16/32/64, complex64/128, "
                         "int32/64 and bool are supported)");
  }
  return found->second;
}

}  // namespace

// Wraps a NumPy array's memory; the tensor keeps the array alive.
Tensor wrap_array(py::array array) {
  const std::string name = py::str(array.dtype().attr("name"));
  auto [dtype, shareable] = dtype_of_numpy(name);
  const bool native_order = array.dtype().attr("isnative").cast<bool>();
  const bool aligned = array.attr("flags").attr("aligned").cast<bool>();
  const auto itemsize = static_cast<int64_t>(array.itemsize());
  Shape shape(array.shape(), array.shape() + array.ndim()), strides;
  bool layout_ok = true;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    const int64_t bytes = array.strides()[d];
    layout_ok = layout_ok && bytes >= 0 && bytes % itemsize == 0;
    strides.push_back(bytes / itemsize);
  }
  // A read-only array (a broadcast view, memory of an immutable object) is copied: eddy can write
  // through its tensors (copy_, t[...] = v, optimiser steps).
  const bool writeable = array.writeable();
  if (!shareable || !native_order || !aligned || !layout_ok || !writeable) {
    // A copy in a layout and type eddy holds (C order, native byte order).
    py::module_ np = py::module_::import("numpy");
    if (name == "uint64" && array.size() > 0 &&
        np.attr("max")(array).cast<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw py::value_error(cat("eddy: a uint64 array holds ", np.attr("max")(array).cast<uint64_t>(),
                                ", which int64 (eddy's widest integer) cannot hold"));
    }
    // numpy.array with copy=True: ascontiguousarray would hand back an unaligned contiguous
    // array as it is, and wrapping that again would recurse without end.
    py::array copy = np.attr("array")(array, py::arg("dtype") = numpy_name(dtype), py::arg("order") = "C",
                                      py::arg("copy") = true);
    return wrap_array(copy);
  }
  void* data = const_cast<void*>(array.data());
  PyObject* owner = array.release().ptr();  // the reference the tensor holds
  return from_blob(data, shape, dtype, [owner](void*) {
    if (!Py_IsInitialized()) return;  // interpreter shutdown: Python frees everything itself
    GilAcquire gil;
    Py_DECREF(owner);
  }, strides);
}

// A tensor's strides in bytes, as NumPy and the buffer protocol count them.
std::vector<py::ssize_t> byte_strides(const Tensor& t) {
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s * dtype_size(t.dtype())));
  return strides;
}

py::array to_numpy(const py::object& self) {
  const Tensor& t = self.cast<const Tensor&>();
  // A distributed tensor whole on every rank reads as its local part; a split one, which has no
  // storage of its own either, refuses below (raw_data).
  const Distribution* layout = distribution_of(t);
  if (layout && whole_on_every_rank(*layout)) return to_numpy(py::cast(layout->local));
  EDDY_CHECK(layout || !t.is_abstract(), "Tensor.numpy(): the tensor of shape ", t.shape(), " is abstract: "
             "eddy.jit traces its function on tensors with a shape and a dtype but no values; do the NumPy work "
             "outside the jitted function");
  // Inside eddy.jit the trace is told, so that a captured tensor read here and changed later makes
  // the next call trace again, as item() does.
  if (TraceRecorder* recorder = active_trace_recorder()) recorder->host_read(t, "numpy(), __array__ or tolist()");
  EDDY_CHECK(t.device().type == DeviceType::cpu, "Tensor.numpy(): the tensor is on ", t.device(),
             "; only CPU tensors share memory with NumPy");
  EDDY_CHECK(t.dtype() != DType::bf16, "Tensor.numpy(): a bfloat16 tensor has no NumPy form (NumPy has no "
             "bfloat16); cast it to float32 first");
  py::module_ np = py::module_::import("numpy");
  const py::dtype dtype = np.attr("dtype")(numpy_name(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array array(dtype, shape, byte_strides(t), t.raw_data(), self);
  // Read-only for a tensor autodiff tracks: a write through NumPy passed both the refusal of writes
  // to parameters outside no_grad and the write count that backward checks (autodiff/backward.cpp).
  if (t.requires_grad()) array.attr("flags").attr("writeable") = false;
  return array;
}

// ---- DLPack ----

namespace {


struct DlpackExport {
  Tensor tensor;  // keeps the storage alive
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

DLDataType dlpack_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f64: return {kDLFloat, 64, 1};
    case DType::c64: return {kDLComplex, 64, 1};
    case DType::c128: return {kDLComplex, 128, 1};
    case DType::i32: return {kDLInt, 32, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::b8: return {kDLBoolCode, 8, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::f16: return {kDLFloat, 16, 1};
  }
  return {kDLFloat, 32, 1};
}

DType from_dlpack_type(DLDataType type) {
  EDDY_CHECK(type.lanes == 1, "from_dlpack: vector types (lanes = ", type.lanes, ") are not supported");
  if (type.code == kDLFloat && type.bits == 32) return DType::f32;
  if (type.code == kDLFloat && type.bits == 64) return DType::f64;
  if (type.code == kDLComplex && type.bits == 64) return DType::c64;
  if (type.code == kDLComplex && type.bits == 128) return DType::c128;
  if (type.code == kDLInt && type.bits == 32) return DType::i32;
  if (type.code == kDLInt && type.bits == 64) return DType::i64;
  if (type.code == kDLBoolCode && type.bits == 8) return DType::b8;
  if (type.code == kDLBfloat && type.bits == 16) return DType::bf16;
  if (type.code == kDLFloat && type.bits == 16) return DType::f16;
  throw Error(cat("from_dlpack: DLPack type code ", int(type.code), " with ", int(type.bits),
                  " bits has no eddy dtype"));
}

}  // namespace

std::string device_name(Device device) { return device == cpu() ? std::string("cpu") : cat(device); }

std::pair<int, int> dlpack_device(const Tensor& t) {
  return t.device().type == DeviceType::cuda ? std::pair{static_cast<int>(kDLCUDA), t.device().index}
                                             : std::pair{static_cast<int>(kDLCPU), 0};
}

py::capsule to_dlpack(const Tensor& t) {
  EDDY_CHECK(!t.is_abstract(), "__dlpack__: the tensor of shape ", t.shape(), " is abstract and has no values");
  // The consumer's stream may differ from eddy's: the GPU finishes eddy's work on the tensor first.
  if (t.device().type != DeviceType::cpu) backend_for(t.device()).synchronize(t.device());
  auto* exported = new DlpackExport{t, t.shape(), t.strides(), {}};
  DLTensor& dl = exported->managed.dl_tensor;
  dl.data = t.device().type == DeviceType::cpu ? t.raw_data() : element_address(t);
  const auto [device_type, device_index] = dlpack_device(t);
  dl.device = {static_cast<DLDeviceType>(device_type), device_index};
  dl.ndim = static_cast<int>(t.dim());
  dl.dtype = dlpack_type(t.dtype());
  dl.shape = exported->shape.data();
  dl.strides = exported->strides.data();
  dl.byte_offset = 0;
  exported->managed.manager_ctx = exported;
  exported->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DlpackExport*>(self->manager_ctx); };
  // A capsule nobody consumed still owns the tensor; a consumer renames it "used_dltensor".
  return py::capsule(&exported->managed, "dltensor", [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      managed->deleter(managed);
    }
  });
}

namespace {

void check_usable(Device device) {
  const std::string unavailable = device_unavailable_reason(device);
  EDDY_CHECK(unavailable.empty(), "from_dlpack: the memory is on ", device, ": ", unavailable);
}

}  // namespace

Tensor from_dlpack(const py::object& source) {
  // A GPU producer is told eddy's stream, so that its pending work on the memory is ordered
  // before eddy's (the array API's __dlpack__(stream=...) protocol).
  py::object capsule_object = source;
  if (py::hasattr(source, "__dlpack__")) {
    const auto device = source.attr("__dlpack_device__")().cast<std::pair<int, int>>();
    if (device.first == kDLCUDA) {
      const Device gpu = Device::cuda(device.second);
      check_usable(gpu);
      capsule_object = source.attr("__dlpack__")(py::arg("stream") = backend_for(gpu).stream_handle(device.second));
    } else {
      capsule_object = source.attr("__dlpack__")();
    }
  }
  PyObject* capsule = capsule_object.ptr();
  if (!PyCapsule_IsValid(capsule, "dltensor")) {
    throw py::type_error("from_dlpack: expected an object with __dlpack__ or an unused 'dltensor' capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  const DLTensor& dl = managed->dl_tensor;
  EDDY_CHECK(dl.device.device_type == kDLCPU || dl.device.device_type == kDLCUDA, "from_dlpack: only CPU and "
             "CUDA memory are supported (DLPack device type ", int(dl.device.device_type), ")");
  // A bare capsule of GPU memory has not been checked above.
  const Device device = dl.device.device_type == kDLCUDA ? Device::cuda(dl.device.device_id) : cpu();
  if (device != cpu()) check_usable(device);
  const DType dtype = from_dlpack_type(dl.dtype);
  Shape shape(dl.shape, dl.shape + dl.ndim);
  Shape strides = dl.strides ? Shape(dl.strides, dl.strides + dl.ndim) : Shape{};
  // Checked before the capsule is consumed, so that on failure its owner still frees the memory.
  for (int64_t stride : strides) {
    EDDY_CHECK(stride >= 0, "from_dlpack: negative strides (", to_string(strides), ") are not supported; pass a "
               "contiguous copy (e.g. numpy.ascontiguousarray)");
  }
  PyCapsule_SetName(capsule, "used_dltensor");
  char* data = static_cast<char*>(dl.data) + dl.byte_offset;
  return from_blob(data, shape, dtype, [managed](void*) {
    if (managed->deleter) managed->deleter(managed);
  }, strides, device);
}

DType parse_dtype(const py::handle& dtype) {
  if (py::isinstance<DType>(dtype)) return dtype.cast<DType>();
  std::string name;
  if (py::isinstance<py::str>(dtype)) {
    name = dtype.cast<std::string>();
  } else {
    name = py::str(py::module_::import("numpy").attr("dtype")(dtype).attr("name"));
  }
  static const std::map<std::string, DType> aliases{
      {"float32", DType::f32}, {"f32", DType::f32},   {"float64", DType::f64},
      {"f64", DType::f64},     {"double", DType::f64}, {"complex64", DType::c64},  {"c64", DType::c64},
      {"complex128", DType::c128}, {"c128", DType::c128}, {"int32", DType::i32}, {"i32", DType::i32},
      {"int64", DType::i64},   {"i64", DType::i64},   {"bool", DType::b8},         {"b8", DType::b8},
      {"bfloat16", DType::bf16}, {"bf16", DType::bf16}, {"float16", DType::f16},   {"f16", DType::f16},
      {"half", DType::f16}};
  // dtype=float (the type) is NumPy's float64; the text "float" was float32, PyTorch's meaning.
  if (name == "float") {
    throw py::type_error("dtype 'float' is float64 in NumPy and float32 in PyTorch; say float32 or float64");
  }
  auto found = aliases.find(name);
  if (found == aliases.end()) {
    throw py::type_error("unknown dtype '" + name + "' (valid: float32, float64, bfloat16, float16, complex64, "
                         "complex128, int32, int64, bool)");
  }
  return found->second;
}

std::vector<Tensor> tensors_of(const py::handle& values) {
  std::vector<Tensor> tensors;
  if (py::isinstance<py::tuple>(values) || py::isinstance<py::list>(values)) {
    for (const py::handle& v : values) tensors.push_back(as_tensor(v));
  } else {
    tensors.push_back(as_tensor(values));
  }
  return tensors;
}

namespace {

bool is_python_number(const py::handle& value) {
  return (PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr()) || PyComplex_Check(value.ptr())) &&
         !PyBool_Check(value.ptr());
}

}  // namespace

Tensor operand_beside(const Tensor& other, const py::handle& value) {
  // A Python int beside an int32 tensor is int32 too where it fits, as in NumPy 2, PyTorch and JAX
  // (as int64 it made x * 1 int64, and INT_MIN / -1 no longer wrapped). One that does not fit stays
  // int64, so that comparisons and division with it are exact, as NumPy 2 gives them (where NumPy
  // refuses it in + and *, the result here is int64).
  if (other.dtype() == DType::i32 && PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    const auto integer = py::reinterpret_borrow<py::int_>(value);
    if (fits_int32(integer)) {
      return scalar(integer.cast<double>(), DType::i32, other.device());
    }
  }
  if (!is_python_number(value) || !is_inexact(other.dtype())) return as_tensor(value);
  if (PyComplex_Check(value.ptr())) {
    return scalar(value.cast<std::complex<double>>(), complex_dtype(other.dtype()), other.device());
  }
  // Through Python's float(): an int past double's range raises OverflowError, as in NumPy.
  return scalar(py::float_(py::reinterpret_borrow<py::object>(value)).cast<double>(), other.dtype(), other.device());
}

std::pair<Tensor, Tensor> operand_pair(const py::handle& a, const py::handle& b) {
  if (is_python_number(a) && !is_python_number(b)) {
    Tensor other = as_tensor(b);
    return {operand_beside(other, a), other};
  }
  Tensor other = as_tensor(a);
  return {other, operand_beside(other, b)};
}

std::optional<DType> optional_dtype(const py::object& dtype) {
  if (dtype.is_none()) return std::nullopt;
  return parse_dtype(dtype);
}

void require_numbers_fit(std::string_view who, const Tensor& numbers, DType integer) {
  if (numbers.numel() == 0) return;
  const Tensor wide = cast(numbers, DType::f64);
  if (sum(cast(ne(wide, wide), DType::i64)).item<int64_t>() > 0) {
    throw py::value_error(cat(who, ": a NaN does not fit in ", integer));
  }
  for (const Tensor& extreme : {min(wide), max(wide)}) {
    try {
      require_value_fits(who, extreme.item<double>(), integer);
    } catch (const Error& e) {
      throw_overflow_error(e.what());
    }
  }
}

std::optional<int64_t> int32_misfit(const Tensor& values) {
  if (values.numel() == 0) return std::nullopt;
  for (const int64_t extreme : {min(values).item<int64_t>(), max(values).item<int64_t>()}) {
    if (extreme < INT32_MIN || extreme > INT32_MAX) return extreme;
  }
  return std::nullopt;
}

[[noreturn]] void throw_overflow_error(const std::string& message) {
  PyErr_SetString(PyExc_OverflowError, message.c_str());
  throw py::error_already_set();
}

namespace {

// A Python int as an int64 scalar, exactly: through a double, 2^53 + 1 came out 2^53 and 2^63 - 1
// as -2^63. Up to 2^53 a double holds it, and `scalar` records it as a constant inside eddy.jit.
Tensor integer_scalar(const py::handle& value) {
  int overflow = 0;
  const long long integer = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0) {
    throw_overflow_error(cat("the integer ", py::str(value).cast<std::string>(), " does not fit in int64"));
  }
  constexpr int64_t exact_in_double = int64_t{1} << 53;
  if (integer >= -exact_in_double && integer <= exact_in_double) {
    return scalar(static_cast<double>(integer), DType::i64);
  }
  return tensor(std::vector<int64_t>{integer}, Shape{});
}

}  // namespace

Tensor as_tensor(const py::handle& value, const py::object& dtype) {
  Tensor t;
  if (py::isinstance<Tensor>(value)) {
    t = value.cast<Tensor>();
  } else if (py::isinstance<py::bool_>(value)) {
    t = scalar(value.cast<bool>() ? 1.0 : 0.0, DType::b8);
  } else if (py::isinstance<py::int_>(value)) {
    t = integer_scalar(value);
  } else if (py::isinstance<py::float_>(value)) {
    t = scalar(value.cast<double>(), DType::f64);
  } else if (PyComplex_Check(value.ptr())) {
    t = scalar(value.cast<c128>(), DType::c128);
  } else {
    t = wrap_array(py::module_::import("numpy").attr("asarray")(value));
    // NumPy memory is the host's: under eddy.default_device of another device, the values go there.
    if (default_device() != cpu()) t = device_copy(t, default_device());
  }
  if (auto wanted = optional_dtype(dtype); wanted && *wanted != t.dtype()) {
    // As eddy.cast and NumPy's and PyTorch's warnings: the cast kept the real parts silently.
    if (is_complex(t.dtype()) && !is_complex(*wanted)) {
      throw py::type_error(cat("tensor: ", t.dtype(), " values as ", *wanted, " would drop the imaginary parts; "
                               "take the real parts first (eddy.real(z), z.real)"));
    }
    // Made from Python or NumPy values, an integer tensor refuses one it cannot hold, as
    // eddy.full and NumPy 2 do; the cast wrapped (tensor([2**40], dtype=int32) held 0, NaN the
    // lowest integer). A tensor given is cast as astype casts it.
    const bool integers = is_integral(t.dtype());
    if (!py::isinstance<Tensor>(value) && (*wanted == DType::i32 || (*wanted == DType::i64 && !integers)) &&
        t.numel() > 0) {
      if (integers) {
        if (const std::optional<int64_t> misfit = int32_misfit(cast(t, DType::i64))) {
          throw_overflow_error(cat("tensor: the value ", *misfit, " does not fit in int32"));
        }
      } else {
        require_numbers_fit("tensor", t, *wanted);
      }
    }
    t = cast(t, *wanted);
  }
  return t;
}

}  // namespace eddy::python
