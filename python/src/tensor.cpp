// eddy.Tensor: NumPy interop without copies (buffer protocol, __array__, DLPack), NumPy-style
// indexing, operators and a readable repr.

#include <dlpack/dlpack.h>
#include <pybind11/complex.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "bindings.h"
#include "eddy/autodiff/tape.h"
#include "eddy/ops/ops.h"

namespace eddy::python {
namespace {

// DLPack 0.8 added kDLBool; the 0.6 header Debian ships predates it.
constexpr uint8_t kDLBoolCode = 6;

std::string numpy_name(DType dtype) {
  switch (dtype) {
    case DType::b8: return "bool";
    default: return std::string(dtype_name(dtype));
  }
}

// The NumPy dtype name eddy can share memory with, or the one a copy converts to.
std::pair<DType, bool> dtype_of_numpy(const std::string& name) {
  static const std::map<std::string, std::pair<DType, bool>> table{
      {"float32", {DType::f32, true}},     {"float64", {DType::f64, true}},   {"complex64", {DType::c64, true}},
      {"complex128", {DType::c128, true}}, {"int32", {DType::i32, true}},     {"int64", {DType::i64, true}},
      {"bool", {DType::b8, true}},         {"float16", {DType::f32, false}},  {"int8", {DType::i32, false}},
      {"int16", {DType::i32, false}},      {"uint8", {DType::i32, false}},    {"uint16", {DType::i32, false}},
      {"uint32", {DType::i64, false}},     {"uint64", {DType::i64, false}}};
  auto found = table.find(name);
  if (found == table.end()) {
    throw py::type_error("eddy: NumPy dtype '" + name + "' has no eddy equivalent (float32/64, complex64/128, "
                         "int32/64 and bool are supported)");
  }
  return found->second;
}

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
  if (!shareable || !native_order || !aligned || !layout_ok) {
    // A copy in a layout and type eddy holds (C order, native byte order).
    py::module_ np = py::module_::import("numpy");
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
    py::gil_scoped_acquire gil;
    Py_DECREF(owner);
  }, strides);
}

py::array to_numpy(const py::object& self) {
  const Tensor& t = self.cast<const Tensor&>();
  EDDY_CHECK(t.device().type == DeviceType::cpu, "Tensor.numpy(): the tensor is on ", t.device(),
             "; only CPU tensors share memory with NumPy");
  py::module_ np = py::module_::import("numpy");
  const py::dtype dtype = np.attr("dtype")(numpy_name(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s * dtype_size(t.dtype())));
  return py::array(dtype, shape, strides, t.raw_data(), self);
}

// ---- DLPack ----

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
  throw Error(cat("from_dlpack: DLPack type code ", int(type.code), " with ", int(type.bits),
                  " bits has no eddy dtype"));
}

py::capsule to_dlpack(const Tensor& t) {
  EDDY_CHECK(t.device().type == DeviceType::cpu, "__dlpack__: only CPU tensors are exported");
  auto* exported = new DlpackExport{t, t.shape(), t.strides(), {}};
  DLTensor& dl = exported->managed.dl_tensor;
  dl.data = t.raw_data();
  dl.device = {kDLCPU, 0};
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

Tensor from_dlpack(const py::object& source) {
  py::object capsule_object = py::hasattr(source, "__dlpack__") ? source.attr("__dlpack__")() : source;
  PyObject* capsule = capsule_object.ptr();
  if (!PyCapsule_IsValid(capsule, "dltensor")) {
    throw py::type_error("from_dlpack: expected an object with __dlpack__ or an unused 'dltensor' capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  const DLTensor& dl = managed->dl_tensor;
  EDDY_CHECK(dl.device.device_type == kDLCPU, "from_dlpack: only CPU memory is supported (device type ",
             int(dl.device.device_type), ")");
  const DType dtype = from_dlpack_type(dl.dtype);
  Shape shape(dl.shape, dl.shape + dl.ndim);
  Shape strides = dl.strides ? Shape(dl.strides, dl.strides + dl.ndim) : Shape{};
  PyCapsule_SetName(capsule, "used_dltensor");
  char* data = static_cast<char*>(dl.data) + dl.byte_offset;
  return from_blob(data, shape, dtype, [managed](void*) {
    if (managed->deleter) managed->deleter(managed);
  }, strides);
}

// ---- indexing ----

struct Indexed {
  Tensor view;
  bool is_view = true;  // false when an integer-array index gathered a copy
};

// For __setitem__: integer indices and None as plain strided views. The differentiable path
// (squeeze/unsqueeze, which reshape) copies a non-contiguous input, and a write into that copy
// would be lost, as `t[:, 1] = v` was.
Tensor drop_axis_view(const Tensor& t, int64_t axis, int64_t i) {
  Shape shape = t.shape(), strides = t.strides();
  const int64_t offset = t.offset() + i * strides[axis];
  shape.erase(shape.begin() + axis);
  strides.erase(strides.begin() + axis);
  return make_view(t, shape, strides, offset);
}

Tensor insert_axis_view(const Tensor& t, int64_t axis) {
  Shape shape = t.shape(), strides = t.strides();
  shape.insert(shape.begin() + axis, 1);
  strides.insert(strides.begin() + axis, 0);
  return make_view(t, shape, strides, t.offset());
}

int64_t normalise_index(int64_t i, int64_t n, int64_t axis) {
  if (i < 0) i += n;
  if (i < 0 || i >= n) throw py::index_error(cat("index ", i < 0 ? i - n : i, " is out of bounds for axis ", axis,
                                                 " with size ", n));
  return i;
}

bool is_array_like(const py::handle& item) {
  return py::isinstance<Tensor>(item) || py::isinstance<py::array>(item) || py::isinstance<py::list>(item);
}

Indexed index(const Tensor& x, const py::object& key, bool for_write = false) {
  py::tuple items = py::isinstance<py::tuple>(key) ? key.cast<py::tuple>() : py::make_tuple(key);
  int64_t consumed = 0;  // axes of x that the items address
  bool ellipsis = false;
  for (const py::handle& item : items) {
    if (item.is_none()) continue;
    if (item.ptr() == Py_Ellipsis) {
      if (ellipsis) throw py::index_error("an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else {
      ++consumed;
    }
  }
  if (consumed > x.dim()) {
    throw py::index_error(cat("too many indices for a tensor of ", x.dim(), " dimensions: ", consumed, " were given"));
  }
  Indexed result{x, true};
  Tensor& t = result.view;
  int64_t axis = 0;         // the axis of the result built so far that the next item indexes
  int64_t source_axis = 0;  // the same axis counted in x, for error messages
  bool advanced = false;
  int64_t array_axis = -1, array_dims = 0;  // where the integer-array index's dimensions went
  std::vector<bool> is_advanced;             // per item: an integer or an array (NumPy's "advanced")
  for (const py::handle& item : items) {
    is_advanced.push_back(!item.is_none() && item.ptr() != Py_Ellipsis && !py::isinstance<py::slice>(item));
    if (item.ptr() == Py_Ellipsis) {
      axis += x.dim() - consumed;
      source_axis += x.dim() - consumed;
    } else if (item.is_none()) {
      t = for_write ? insert_axis_view(t, axis) : unsqueeze(t, axis);
      ++axis;
    } else if (py::isinstance<py::bool_>(item)) {
      throw py::index_error("a Python bool is not a valid index");
    } else if (py::isinstance<py::int_>(item) || py::hasattr(item, "__index__") && !is_array_like(item)) {
      const int64_t i = normalise_index(item.cast<int64_t>(), t.shape()[axis], source_axis++);
      t = for_write ? drop_axis_view(t, axis, i) : squeeze(slice(t, axis, i, i + 1), axis);
    } else if (py::isinstance<py::slice>(item)) {
      const int64_t n = t.shape()[axis];
      py::ssize_t start, stop, step, length;
      if (!item.cast<py::slice>().compute(static_cast<py::ssize_t>(n), &start, &stop, &step, &length)) {
        throw py::error_already_set();
      }
      if (step > 0) {
        t = slice(t, axis, start, start + (length - 1) * step + 1, step);
      } else {
        std::vector<int64_t> positions;
        for (py::ssize_t k = 0; k < length; ++k) positions.push_back(start + k * step);
        t = index_select(t, axis, tensor(positions, {static_cast<int64_t>(positions.size())}));
        result.is_view = false;
      }
      ++axis;
      ++source_axis;
    } else if (is_array_like(item)) {
      if (advanced) throw py::index_error("only one integer-array or mask index per subscript is supported");
      advanced = true;
      Tensor indices = as_tensor(item);
      if (indices.dtype() == DType::b8) {
        if (indices.dim() != 1 || indices.shape()[0] != t.shape()[axis]) {
          throw py::index_error(cat("boolean index of shape ", indices.shape(), " does not match axis ", source_axis,
                                    " of size ", t.shape()[axis], " (only 1-D masks along one axis are supported)"));
        }
        py::module_ np = py::module_::import("numpy");
        indices = as_tensor(np.attr("flatnonzero")(to_numpy(py::cast(indices))));
      }
      if (indices.dtype() != DType::i32 && indices.dtype() != DType::i64) {
        throw py::index_error(cat("tensor indices must be integers or booleans, got ", indices.dtype()));
      }
      Tensor flat = reshape(indices, {-1});
      const int64_t n = t.shape()[axis];
      Tensor wrapped = where(lt(flat, scalar(0, flat.dtype())), flat + scalar(static_cast<double>(n), flat.dtype()), flat);
      if (wrapped.numel() > 0) {
        const auto low = min(wrapped).item<int64_t>(), high = max(wrapped).item<int64_t>();
        if (low < 0 || high >= n) {
          throw py::index_error(cat("index ", low < 0 ? low - n : high, " is out of bounds for axis ",
                                    source_axis, " with size ", n));
        }
      }
      Shape shape(t.shape().begin(), t.shape().begin() + axis);
      shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
      shape.insert(shape.end(), t.shape().begin() + axis + 1, t.shape().end());
      t = reshape(index_select(t, axis, wrapped), shape);
      array_axis = axis;
      array_dims = indices.dim();
      axis += indices.dim();
      ++source_axis;
      result.is_view = false;
    } else {
      throw py::index_error(cat("unsupported index of type ", std::string(py::str(py::type::handle_of(item).attr("__name__"))),
                                " (use integers, slices, None, ..., integer arrays or 1-D boolean masks)"));
    }
  }
  // NumPy: when integers and the array index are separated by a slice, None or ..., the
  // array's dimensions come first (x[0, :, [1, 2]] has shape [2, n]).
  if (array_axis > 0) {
    const auto first = std::find(is_advanced.begin(), is_advanced.end(), true);
    const auto last = std::find(is_advanced.rbegin(), is_advanced.rend(), true).base();
    if (std::find(first, last, false) != last) {
      std::vector<int64_t> order;
      for (int64_t d = 0; d < array_dims; ++d) order.push_back(array_axis + d);
      for (int64_t d = 0; d < t.dim(); ++d) {
        if (d < array_axis || d >= array_axis + array_dims) order.push_back(d);
      }
      t = permute(t, order);
    }
  }
  return result;
}

// ---- repr and scalars ----

std::string repr(const py::object& self) {
  const Tensor& t = self.cast<const Tensor&>();
  py::module_ np = py::module_::import("numpy");
  std::string body = py::str(np.attr("array2string")(to_numpy(self), py::arg("separator") = ", ",
                                                      py::arg("prefix") = "tensor("));
  std::string text = "tensor(" + body + ", dtype=" + numpy_name(t.dtype());
  if (t.requires_grad()) text += ", requires_grad=True";
  return text + ")";
}

py::object item(const Tensor& t) {
  EDDY_CHECK(t.numel() == 1, "item(): the tensor has ", t.numel(), " elements (shape ", t.shape(), "), not one");
  switch (t.dtype()) {
    case DType::f32:
    case DType::f64: return py::float_(t.item<double>());
    case DType::c64:
    case DType::c128: return py::cast(t.item<c128>());
    case DType::i32:
    case DType::i64: return py::int_(t.item<int64_t>());
    case DType::b8: return py::bool_(t.item<bool>());
  }
  return py::none();
}

// Python's `/` is true division, as in NumPy: integer and bool operands divide as float64
// (eddy.div, like the C++ op, keeps integer division).
Tensor true_divide(const Tensor& x, const Tensor& y) {
  if (!is_inexact(x.dtype()) && !is_inexact(y.dtype())) return div(cast(x, DType::f64), cast(y, DType::f64));
  return div(x, y);
}

// A binary operator's other operand: Python numbers act like scalars of the tensor's dtype
// (as in eddy's C++ API), everything else becomes a tensor.
template <typename TensorOp, typename ScalarOp>
py::object binary(const Tensor& a, const py::object& b, TensorOp tensor_op, ScalarOp scalar_op) {
  if ((py::isinstance<py::float_>(b) || py::isinstance<py::int_>(b)) && !py::isinstance<py::bool_>(b) &&
      is_inexact(a.dtype())) {
    return py::cast(scalar_op(a, b.cast<double>()));
  }
  return py::cast(tensor_op(a, as_tensor(b)));
}

}  // namespace

DType parse_dtype(const py::handle& dtype) {
  if (py::isinstance<DType>(dtype)) return dtype.cast<DType>();
  std::string name;
  if (py::isinstance<py::str>(dtype)) {
    name = dtype.cast<std::string>();
  } else {
    name = py::str(py::module_::import("numpy").attr("dtype")(dtype).attr("name"));
  }
  static const std::map<std::string, DType> aliases{
      {"float32", DType::f32}, {"f32", DType::f32},   {"float", DType::f32},       {"float64", DType::f64},
      {"f64", DType::f64},     {"double", DType::f64}, {"complex64", DType::c64},  {"c64", DType::c64},
      {"complex128", DType::c128}, {"c128", DType::c128}, {"int32", DType::i32}, {"i32", DType::i32},
      {"int64", DType::i64},   {"i64", DType::i64},   {"bool", DType::b8},         {"b8", DType::b8}};
  auto found = aliases.find(name);
  if (found == aliases.end()) {
    throw py::type_error("unknown dtype '" + name + "' (valid: float32, float64, complex64, complex128, int32, "
                         "int64, bool)");
  }
  return found->second;
}

std::optional<DType> optional_dtype(const py::object& dtype) {
  if (dtype.is_none()) return std::nullopt;
  return parse_dtype(dtype);
}

Tensor as_tensor(const py::handle& value, const py::object& dtype) {
  Tensor t;
  if (py::isinstance<Tensor>(value)) {
    t = value.cast<Tensor>();
  } else if (py::isinstance<py::bool_>(value)) {
    t = scalar(value.cast<bool>() ? 1.0 : 0.0, DType::b8);
  } else if (py::isinstance<py::int_>(value)) {
    t = scalar(static_cast<double>(value.cast<int64_t>()), DType::i64);
  } else if (py::isinstance<py::float_>(value)) {
    t = scalar(value.cast<double>(), DType::f64);
  } else if (PyComplex_Check(value.ptr())) {
    t = scalar(value.cast<c128>(), DType::c128);
  } else {
    t = wrap_array(py::module_::import("numpy").attr("asarray")(value));
  }
  if (auto wanted = optional_dtype(dtype); wanted && *wanted != t.dtype()) t = cast(t, *wanted);
  return t;
}

void bind_tensor(py::module_& m) {
  py::enum_<DType>(m, "dtype", "Element types of eddy tensors.")
      .value("float32", DType::f32)
      .value("float64", DType::f64)
      .value("complex64", DType::c64)
      .value("complex128", DType::c128)
      .value("int32", DType::i32)
      .value("int64", DType::i64)
      .value("bool", DType::b8)
      .def("__str__", [](DType d) { return numpy_name(d); });

  py::class_<Tensor>(m, "Tensor", py::buffer_protocol(), py::dynamic_attr(),
                     "An n-dimensional array with autodiff. Shares memory with NumPy through "
                     "numpy.asarray(t), t.numpy() and eddy.as_tensor(array).")
      .def(py::init([](const py::object& data, const py::object& dtype, bool requires_grad) {
             // Always a copy, as numpy.array and torch.tensor make; as_tensor shares instead.
             const Tensor source = as_tensor(data, dtype);
             Tensor t = Tensor::empty(source.shape(), source.dtype());
             {
               NoGradGuard no_grad;
               t.copy_(source);
             }
             if (requires_grad) t.requires_grad_();
             return t;
           }),
           py::arg("data"), py::arg("dtype") = py::none(), py::arg("requires_grad") = false)
      .def_buffer([](const Tensor& t) {
        std::string format;
        EDDY_DISPATCH_ALL(t.dtype(), T, format = py::format_descriptor<T>::format());
        std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
        for (int64_t s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s * dtype_size(t.dtype())));
        return py::buffer_info(t.raw_data(), static_cast<py::ssize_t>(dtype_size(t.dtype())), format, t.dim(), shape,
                               strides);
      })
      .def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("size", &Tensor::numel)
      .def_property_readonly("T", [](const Tensor& t) {
        std::vector<int64_t> reversed;
        for (int64_t i = t.dim() - 1; i >= 0; --i) reversed.push_back(i);
        return permute(t, reversed);
      })
      .def_property_readonly("requires_grad", &Tensor::requires_grad)
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property_readonly("grad", [](const Tensor& t) -> py::object {
        Tensor g = t.grad();
        return g.defined() ? py::cast(g) : py::none();
      })
      .def("requires_grad_", [](Tensor& t, bool enabled) { return t.requires_grad_(enabled); },
           py::arg("requires_grad") = true)
      .def("detach", &Tensor::detach)
      .def("backward", [](const Tensor& t, const py::object& gradient, bool create_graph) {
             t.backward(gradient.is_none() ? Tensor() : as_tensor(gradient), create_graph);
           },
           py::arg("gradient") = py::none(), py::arg("create_graph") = false)
      .def("zero_grad", &Tensor::zero_grad)
      .def("numpy", [](const py::object& self) { return to_numpy(self); },
           "The elements as a NumPy array sharing this tensor's memory.")
      .def("__array__", [](const py::object& self, const py::object& dtype, const py::object& copy) -> py::object {
             py::object array = to_numpy(self);
             if (!dtype.is_none()) array = array.attr("astype")(dtype);
             if (!copy.is_none() && copy.cast<bool>()) array = array.attr("copy")();
             return array;
           },
           py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack__", [](const Tensor& t, const py::kwargs&) { return to_dlpack(t); })
      .def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); })
      .def("item", &item)
      .def("tolist", [](const py::object& self) { return to_numpy(self).attr("tolist")(); })
      .def("__len__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.shape()[0];
      })
      .def("__repr__", &repr)
      .def("__float__", [](const Tensor& t) { return t.item<double>(); })
      .def("__int__", [](const Tensor& t) { return t.item<int64_t>(); })
      .def("__bool__", [](const Tensor& t) {
        EDDY_CHECK(t.numel() == 1, "the truth value of a tensor with ", t.numel(), " elements is ambiguous");
        return t.item<bool>();
      })
      .def("__getitem__", [](const Tensor& t, const py::object& key) { return index(t, key).view; })
      .def("__setitem__", [](Tensor& t, const py::object& key, const py::object& value) {
        Indexed target = index(t, key, /*for_write=*/true);
        if (!target.is_view) {
          throw py::index_error("assignment through integer-array, mask or negative-step indices is not "
                                "supported; index with integers and slices");
        }
        NoGradGuard no_grad;
        target.view.copy_(as_tensor(value));
      })
      .def("__neg__", [](const Tensor& a) { return neg(a); })
      .def("__abs__", [](const Tensor& a) { return abs(a); })
      .def("__add__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return add(x, y); }, [](const Tensor& x, double y) { return x + y; });
      })
      .def("__radd__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return add(y, x); }, [](const Tensor& x, double y) { return y + x; });
      })
      .def("__sub__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return sub(x, y); }, [](const Tensor& x, double y) { return x - y; });
      })
      .def("__rsub__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return sub(y, x); }, [](const Tensor& x, double y) { return y - x; });
      })
      .def("__mul__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return mul(x, y); }, [](const Tensor& x, double y) { return x * y; });
      })
      .def("__rmul__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return mul(y, x); }, [](const Tensor& x, double y) { return y * x; });
      })
      .def("__truediv__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return true_divide(x, y); }, [](const Tensor& x, double y) { return x / y; });
      })
      .def("__rtruediv__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return true_divide(y, x); }, [](const Tensor& x, double y) { return y / x; });
      })
      .def("__pow__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return pow(x, y); }, [](const Tensor& x, double y) { return pow(x, y); });
      })
      .def("__rpow__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return pow(y, x); },
                      [](const Tensor& x, double y) { return pow(full_like(x, y), x); });
      })
      .def("__matmul__", [](const Tensor& a, const py::object& b) { return matmul(a, as_tensor(b)); })
      .def("__rmatmul__", [](const Tensor& a, const py::object& b) { return matmul(as_tensor(b), a); })
      .def("__eq__", [](const Tensor& a, const py::object& b) { return eq(a, as_tensor(b)); })
      .def("__ne__", [](const Tensor& a, const py::object& b) { return ne(a, as_tensor(b)); })
      .def("__lt__", [](const Tensor& a, const py::object& b) { return lt(a, as_tensor(b)); })
      .def("__le__", [](const Tensor& a, const py::object& b) { return le(a, as_tensor(b)); })
      .def("__gt__", [](const Tensor& a, const py::object& b) { return gt(a, as_tensor(b)); })
      .def("__ge__", [](const Tensor& a, const py::object& b) { return ge(a, as_tensor(b)); })
      .attr("__hash__") = py::none();
  // NumPy's binary operators defer to the tensor's reflected ones (array + tensor is a tensor,
  // differentiable), as for torch.Tensor; ufuncs such as numpy.sin(t) still go through __array__.
  m.attr("Tensor").attr("__array_priority__") = 1000;

  m.def("as_tensor", &as_tensor, py::arg("data"), py::arg("dtype") = py::none(),
        "A tensor over `data`'s memory where its dtype and layout allow (NumPy arrays, buffers), "
        "otherwise a converted copy.");
  m.def("from_numpy", [](const py::array& array) { return wrap_array(array); }, py::arg("array"));
  m.def("from_dlpack", &from_dlpack, py::arg("source"),
        "A tensor sharing the memory of an object with __dlpack__ (NumPy, PyTorch, JAX on CPU).");
}

}  // namespace eddy::python
