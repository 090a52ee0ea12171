// eddy.Tensor: the class binding, with the buffer protocol, __array__ and DLPack (interop.cpp),
// NumPy-style indexing (indexing.cpp), operators and a readable repr.

#include <dlpack/dlpack.h>
#include <pybind11/complex.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>

#include "bindings.h"
#include "eddy/autodiff/tape.h"
#include "eddy/core/distribution.h"
#include "eddy/core/tracing.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/optimizer.h"

namespace eddy::python {
namespace {

// ---- repr and scalars ----

std::string repr(const py::object& self) {
  const Tensor& t = self.cast<const Tensor&>();
  if (const Distribution* layout = distribution_of(t)) {
    return cat("DistributedTensor(shape=", t.shape(), ", placements=", to_string(layout->placements), ", local=",
               repr(py::cast(layout->local)), ")");
  }
  // What a jitted function's first call sees while it is traced (eddy.jit): no values to show.
  if (t.is_abstract()) {
    return cat("tensor(abstract, shape=", t.shape(), ", dtype=", numpy_name(t.dtype()),
               t.requires_grad() ? ", requires_grad=True" : "", ")");
  }
  py::module_ np = py::module_::import("numpy");
  // bfloat16 has no NumPy form: its values are shown through float32, which holds them exactly.
  const py::object shown = t.dtype() == DType::bf16 ? py::cast(cast(t.detach(), DType::f32)) : self;
  std::string body = py::str(np.attr("array2string")(to_numpy(shown), py::arg("separator") = ", ",
                                                      py::arg("prefix") = "tensor("));
  std::string text = "tensor(" + body + ", dtype=" + numpy_name(t.dtype());
  if (t.requires_grad()) text += ", requires_grad=True";
  return text + ")";
}

py::object item(const Tensor& t) {
  EDDY_CHECK(t.numel() == 1, "item(): the tensor has ", t.numel(), " elements (shape ", t.shape(), "), not one");
  switch (t.dtype()) {
    case DType::f32:
    case DType::f64:
    case DType::bf16:
    case DType::f16: return py::float_(t.item<double>());
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
    // Through Python's float(): an int past double's range raises OverflowError, as in NumPy (the
    // cast said "Unable to cast Python instance of type <class 'int'>").
    return py::cast(scalar_op(a, py::float_(b).cast<double>()));
  }
  // A Python complex takes the tensor's precision too: complex64 with float32 or complex64.
  return py::cast(tensor_op(a, operand_beside(a, b)));
}

// `x += y` and the other augmented assignments write into x's memory, as in NumPy and PyTorch;
// without them Python rebound the name to x + y, so an optimiser's `p -= lr * p.grad` under
// no_grad changed nothing and `v += 1` on a view left its base alone. Autodiff does not record
// writes: on a tensor it tracks, the name is bound to the new tensor x + y (other views of x do
// not see it), and a leaf that requires grad is refused, as PyTorch refuses it. Inside eddy.jit
// it is refused, as other writes in place are there.
template <typename Op>
py::object augmented(const py::object& self, const py::object& other, const char* symbol, Op op) {
  Tensor& target = self.cast<Tensor&>();
  const std::string binary_operator(symbol, std::char_traits<char>::length(symbol) - 1);  // "**" of "**="
  py::object updated = op(target, other);
  const Tensor& value = updated.cast<const Tensor&>();
  // A distributed tensor's global shell is abstract too, outside any jit.
  if (is_distributed(target) || is_distributed(value)) {
    throw Error(cat("x ", symbol, " y on a distributed tensor is not done in place; write x = x ", binary_operator,
                    " y (docs/distributed.md)"));
  }
  if (target.is_abstract() || value.is_abstract()) {
    throw Error(cat("x ", symbol, " y inside eddy.jit: a traced function cannot write in place (the compiled graph "
                    "would lose the write, and other views of x would not see it); write x = x ", binary_operator, " y"));
  }
  // A result of a later kind (bool < integers < floats < complex) does not fit in place, nor under
  // x's name, which an int32 x += p kept for a float64 result.
  if (kind_rank(value.dtype()) > kind_rank(target.dtype())) {
    throw Error(cat("x ", symbol, " y: the result is ", value.dtype(), " and x is ", target.dtype(),
                    ", which cannot hold it; cast x first (x = x.astype(...)) or make a new tensor"));
  }
  // Checked before a tracked x is rebound too: `total += per_sample_losses` turned a scalar total
  // into a vector there.
  if (value.shape() != target.shape()) {
    throw Error(cat("x ", symbol, " y: the result has shape ", value.shape(), " and x ", target.shape(),
                    "; an update in place keeps x's shape"));
  }
  if (GradMode::enabled() && (target.requires_grad() || value.requires_grad())) {
    if (target.requires_grad() && target.is_leaf()) {
      throw Error(cat("x ", symbol, " y: x (shape ", target.shape(), ") requires grad and autodiff does not record "
                      "writes in place; update it under `with eddy.no_grad():` (as an optimiser step does)"));
    }
    // A plain x made tracked by y: rebound, the tensors that share x's memory (the buffer x is a
    // view of, its own views, the NumPy array it wraps) kept the old values where x alone got the
    // sum (`buf[0] += p` left buf as it was). Not counted: the handles of x's own tensor, which
    // x[:] and a reshape to x's shape return and which every recorded op that used x holds (the
    // Euler step x += dt * f(x, k) is rebound, as it should be).
    if (!target.requires_grad() && target.storage() &&
        (target.storage().use_count() > 1 || target.storage()->is_borrowed())) {
      throw Error(cat("x ", symbol, " y: y requires grad and x (shape ", target.shape(), ") does not, and x shares "
                      "its memory with another tensor or array (a view of it, the tensor it is a view of, NumPy or "
                      "DLPack memory it wraps); autodiff records no writes in place, so that memory would keep its "
                      "old values; write x = x ", binary_operator, " y and build tensors of such parts with eddy.stack"));
    }
    // x's dtype, as a write into x would keep it (a float32 x += float64 y came back float64).
    return value.dtype() == target.dtype() ? updated : py::cast(cast(value, target.dtype()));
  }
  // An int64 result (a Python int that int32 cannot hold makes one) stored in int32 wrapped
  // around: refused where it does not fit, as `t[...] = 2**40` is and as NumPy 2 refuses it.
  if (target.dtype() == DType::i32 && value.dtype() == DType::i64) {
    if (const std::optional<int64_t> misfit = int32_misfit(value)) {
      throw_overflow_error(cat("x ", symbol, " y: the result ", *misfit,
                               " does not fit in x's int32; cast x first (x = x.astype(\"int64\"))"));
    }
  }
  NoGradGuard no_grad;
  target.copy_(value);
  return self;
}

// The value of `t[...] = value`: a Python or NumPy number, or a list of them, that t's integer
// dtype cannot hold is refused, as NumPy refuses it (2^40 into int32 stored 0; NaN, 3e9 into
// int32 and 1e19 into int64 stored the lowest integer). A float in range is truncated toward zero,
// as in NumPy.
Tensor assigned_value(const Tensor& target, const py::object& value) {
  const bool integer_target = target.dtype() == DType::i32 || target.dtype() == DType::i64;
  if (target.dtype() == DType::i32 && PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    const auto integer = value.cast<py::int_>();
    if (!fits_int32(integer)) {
      throw_overflow_error(cat("the integer ", py::str(value).cast<std::string>(), " does not fit in int32"));
    }
  }
  Tensor assigned = as_tensor(value);
  // NumPy integers and lists of Python ints arrive as int64.
  if (target.dtype() == DType::i32 && assigned.dtype() == DType::i64 && !py::isinstance<Tensor>(value)) {
    if (const std::optional<int64_t> misfit = int32_misfit(assigned)) {
      throw_overflow_error(cat("the integer ", *misfit, " does not fit in int32"));
    }
  }
  if (integer_target && is_floating(assigned.dtype()) && !py::isinstance<Tensor>(value)) {
    if (assigned.dim() == 0) {
      const double number = assigned.item<double>();
      if (!std::isfinite(number)) {
        throw py::value_error(cat("cannot assign ", py::str(value).cast<std::string>(), " to an integer tensor"));
      }
      if (!value_fits(number, target.dtype())) {
        throw_overflow_error(
            cat("the number ", py::str(value).cast<std::string>(), " does not fit in ", target.dtype()));
      }
    } else {
      // A list of them too: [nan, 1e10] into int32 stored the lowest integer twice.
      require_numbers_fit("assignment", assigned, target.dtype());
    }
  }
  return assigned;
}

// The operators that have augmented forms (x += y), shared by both.
py::object plus(const Tensor& a, const py::object& b) {
  return binary(a, b, [](const Tensor& x, const Tensor& y) { return add(x, y); },
                [](const Tensor& x, double y) { return x + y; });
}
py::object minus(const Tensor& a, const py::object& b) {
  return binary(a, b, [](const Tensor& x, const Tensor& y) { return sub(x, y); },
                [](const Tensor& x, double y) { return x - y; });
}
py::object times(const Tensor& a, const py::object& b) {
  return binary(a, b, [](const Tensor& x, const Tensor& y) { return mul(x, y); },
                [](const Tensor& x, double y) { return x * y; });
}
py::object divided(const Tensor& a, const py::object& b) {
  return binary(a, b, [](const Tensor& x, const Tensor& y) { return true_divide(x, y); },
                [](const Tensor& x, double y) { return x / y; });
}
py::object power(const Tensor& a, const py::object& b) {
  return binary(a, b, [](const Tensor& x, const Tensor& y) { return pow(x, y); },
                [](const Tensor& x, double y) { return pow(x, y); });
}
py::object product(const Tensor& a, const py::object& b) { return py::cast(matmul(a, as_tensor(b))); }

// A comparison's other operand, as for arithmetic (operand_pair): NumPy 2 and PyTorch compare a
// float32 tensor with 0.1 in float32. None compares unequal to a tensor, as in PyTorch.
template <typename Compare>
py::object compare(const Tensor& a, const py::object& b, Compare compare_op) {
  if (b.is_none()) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return py::cast(compare_op(a, operand_beside(a, b)));
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::enum_<DType>(m, "dtype", "Element types of eddy tensors.")
      .value("float32", DType::f32)
      .value("float64", DType::f64)
      .value("complex64", DType::c64)
      .value("complex128", DType::c128)
      .value("int32", DType::i32)
      .value("int64", DType::i64)
      .value("bool", DType::b8)
      .value("bfloat16", DType::bf16)
      .value("float16", DType::f16)
      .def("__str__", [](DType d) { return numpy_name(d); });

  py::class_<Tensor>(m, "Tensor", py::buffer_protocol(), py::dynamic_attr(),
                     "An n-dimensional array with autodiff. Shares memory with NumPy through "
                     "numpy.asarray(t), t.numpy() and eddy.as_tensor(array).")
      .def(py::init([](const py::object& data, const py::object& dtype, bool requires_grad) {
             // Always a copy, as numpy.array and torch.tensor make; as_tensor shares instead.
             const Tensor source = as_tensor(data, dtype);
             // Inside eddy.jit the copy is a node of the graph: of a number's recorded constant, whose
             // value comes when the graph runs, and of a captured tensor or array, read at every call
             // as eager code reads it (a copy made while tracing kept the traced values for good).
             // Detached, as the copy below is: a recorded identity passed gradients back to the
             // captured tensor (a frozen copy of a parameter trained it).
             if (source.is_abstract() || active_trace_recorder()) {
               Tensor copy = identity(source.detach());
               return requires_grad ? copy.requires_grad_() : copy;
             }
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
        std::string format = "e";  // IEEE half, NumPy's float16
        EDDY_CHECK(t.dtype() != DType::bf16, "buffer: a bfloat16 tensor has no NumPy form (NumPy has no "
                   "bfloat16); cast it to float32 first");
        if (TraceRecorder* recorder = active_trace_recorder()) recorder->host_read(t, "the buffer protocol");
        if (t.dtype() != DType::f16) EDDY_DISPATCH_ALL(t.dtype(), T, format = py::format_descriptor<T>::format());
        std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
        // Read-only for a tensor autodiff tracks, as numpy() is (interop.cpp, to_numpy).
        return py::buffer_info(t.raw_data(), static_cast<py::ssize_t>(dtype_size(t.dtype())), format, t.dim(), shape,
                               byte_strides(t), /*readonly=*/t.requires_grad());
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
      .def_property("grad", [](const Tensor& t) -> py::object {
        // backward() gives .grad a new tensor each time, so a captured one would be read at every
        // call while the next backward's went unseen: a compiled update kept the first gradient.
        EDDY_CHECK(!active_trace_recorder(), "Tensor.grad inside eddy.jit: the compiled function would keep "
                   "the gradient it was traced with (backward() makes a new one each time); pass it as an "
                   "argument instead: step = eddy.jit(lambda w, g: ...); step(w, w.grad)");
        Tensor g = t.grad();
        return g.defined() ? py::cast(g) : py::none();
      }, [](Tensor& t, const py::object& value) {
        // `p.grad *= 0.5` writes into the gradient, then assigns the same tensor back: refusing
        // that left the gradient halved behind an error.
        if (py::isinstance<Tensor>(value) && t.grad().defined() && value.cast<const Tensor&>().same(t.grad())) return;
        if (value.is_none()) {  // PyTorch's `p.grad = None`
          t.zero_grad();
          return;
        }
        // A gradient computed otherwise (eddy.grad in a jitted step) for an optimiser to apply, as
        // PyTorch's `p.grad = g`.
        EDDY_CHECK(py::isinstance<Tensor>(value), "Tensor.grad: assign an eddy tensor or None, got ",
                   py::str(py::type::of(value).attr("__name__")).cast<std::string>());
        EDDY_CHECK(!active_trace_recorder(), "Tensor.grad = ... inside eddy.jit: the compiled function would assign it "
                   "once, when traced; return the gradient and assign it after the call");
        const Tensor& gradient = value.cast<const Tensor&>();
        EDDY_CHECK(t.requires_grad(), "Tensor.grad: the tensor does not require gradients; call requires_grad_() "
                   "before assigning one");
        EDDY_CHECK(gradient.shape() == t.shape() && gradient.dtype() == t.dtype() && gradient.device() == t.device(),
                   "Tensor.grad: the gradient is ", gradient.shape(), " ", gradient.dtype(), " on ", gradient.device(),
                   " but the tensor is ", t.shape(), " ", t.dtype(), " on ", t.device());
        optim::set_grads({t}, {gradient});
      })
      .def("requires_grad_", [](Tensor& t, bool enabled) { return t.requires_grad_(enabled); },
           py::arg("requires_grad") = true)
      .def("detach", &Tensor::detach)
      .def("backward", [](const Tensor& t, const py::object& gradient, bool create_graph) {
             backward(t, gradient.is_none() ? Tensor() : as_tensor(gradient), create_graph);
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
      .def("__dlpack_device__", [](const Tensor& t) {
        const auto [type, index] = dlpack_device(t);
        return py::make_tuple(type, index);
      })
      .def_property_readonly("device", [](const Tensor& t) {
        return device_name(t.device());
      }, "Where the tensor lives: 'cpu' or 'cuda:N', as .to() takes it.")
      .def("to", [](const Tensor& t, const std::string& device) { return to(t, parse_device(device)); },
           py::arg("device"), "This tensor on `device` ('cpu', 'cuda', 'cuda:N'); differentiable.")
      .def("cpu", [](const Tensor& t) { return to(t, cpu()); })
      .def("cuda", [](const Tensor& t, int index) { return to(t, Device::cuda(index)); }, py::arg("index") = 0)
      .def("item", &item)
      .def("tolist", [](const py::object& self) {
             // Python floats either way: a bfloat16 tensor, which has no NumPy form, goes through
             // float32, which holds its values exactly.
             const Tensor& t = self.cast<const Tensor&>();
             if (t.dtype() == DType::bf16) return to_numpy(py::cast(cast(t, DType::f32))).attr("tolist")();
             return to_numpy(self).attr("tolist")();
           })
      .def("__len__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.shape()[0];
      })
      .def("__repr__", &repr)
      // Through item()'s Python number, so that Python's own conversions apply: float() of a complex
      // value and int() of NaN or infinity raise, as for torch.Tensor, where the C++ casts gave 1.0
      // and -2^63.
      .def("__float__", [](const Tensor& t) { return py::float_(item(t)); })
      // Without it Python fell back to __float__, which refuses a complex value.
      .def("__complex__", [](const Tensor& t) {
        PyObject* number = PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyComplex_Type), item(t).ptr());
        if (!number) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(number);
      })
      .def("__int__", [](const Tensor& t) {
        PyObject* number = PyNumber_Long(item(t).ptr());  // a plain int, also of a bool tensor
        if (!number) throw py::error_already_set();
        return py::reinterpret_steal<py::int_>(number);
      })
      .def("__bool__", [](const Tensor& t) {
        EDDY_CHECK(t.numel() == 1, "the truth value of a tensor with ", t.numel(), " elements is ambiguous");
        return is_complex(t.dtype()) ? t.item<c128>() != c128(0) : t.item<bool>();
      })
      // Rows along the first axis, as NumPy iterates; a 0-d tensor is not iterable (without this,
      // Python's fallback through __getitem__ made list() of it an empty list).
      .def("__iter__", [](const py::object& self) {
        const Tensor& t = self.cast<const Tensor&>();
        if (t.dim() == 0) throw py::type_error("iteration over a 0-d tensor");
        py::list rows;
        for (int64_t i = 0; i < t.shape()[0]; ++i) rows.append(self.attr("__getitem__")(i));
        return py::iter(rows);
      })
      .def("__getitem__", [](const Tensor& t, const py::object& key) { return index(t, key).view; })
      .def("__setitem__", [](Tensor& t, const py::object& key, const py::object& value) {
        // Indexing a distributed tensor makes a new one, not a view of each rank's part: a slice's
        // write went into that copy and the tensor kept its values, silently.
        if (is_distributed(t)) {
          throw Error("t[...] = v on a distributed tensor is not supported: its indexing gives a new tensor, not a "
                      "view of each rank's part; build the new value with operations (eddy.where, eddy.concatenate) "
                      "(docs/distributed.md)");
        }
        Indexed target = index(t, key, /*for_write=*/true);
        if (!target.is_view) {
          throw py::index_error("assignment through integer-array, mask or negative-step indices is not "
                                "supported; index with integers and slices");
        }
        // Inside eddy.jit: the capture's refusal, on the tensor itself (the view is new to it).
        if (TraceRecorder* recorder = active_trace_recorder()) recorder->inplace_write(t, "t[...] = v");
        // The write is not recorded, so into a tensor that requires grad it would change values
        // that recorded operations read back (x.grad came out wrong); copy_ refuses the same.
        if (GradMode::enabled() && t.requires_grad()) {
          throw Error(cat("assignment into a tensor of shape ", t.shape(), " that requires grad: autodiff "
                          "does not record it; assign under `with eddy.no_grad():` (as an optimiser "
                          "step does), or build the new value with operations (eddy.where, eddy.concatenate)"));
        }
        const Tensor source = assigned_value(t, value);
        NoGradGuard no_grad;
        target.view.copy_(source);
      })
      .def("__neg__", [](const Tensor& a) { return neg(a); })
      .def("__abs__", [](const Tensor& a) { return abs(a); })
      .def("__add__", &plus)
      .def("__radd__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return add(y, x); }, [](const Tensor& x, double y) { return y + x; });
      })
      .def("__sub__", &minus)
      .def("__rsub__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return sub(y, x); }, [](const Tensor& x, double y) { return y - x; });
      })
      .def("__mul__", &times)
      .def("__rmul__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return mul(y, x); }, [](const Tensor& x, double y) { return y * x; });
      })
      .def("__truediv__", &divided)
      .def("__rtruediv__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return true_divide(y, x); }, [](const Tensor& x, double y) { return y / x; });
      })
      .def("__pow__", &power)
      .def("__rpow__", [](const Tensor& a, const py::object& b) {
        return binary(a, b, [](const Tensor& x, const Tensor& y) { return pow(y, x); },
                      [](const Tensor& x, double y) { return pow(full_like(x, y), x); });
      })
      .def("__iadd__", [](const py::object& self, const py::object& b) { return augmented(self, b, "+=", plus); })
      .def("__isub__", [](const py::object& self, const py::object& b) { return augmented(self, b, "-=", minus); })
      .def("__imul__", [](const py::object& self, const py::object& b) { return augmented(self, b, "*=", times); })
      .def("__itruediv__", [](const py::object& self, const py::object& b) { return augmented(self, b, "/=", divided); })
      // Without them Python rebound x to x ** y and x @ y: a view's base, a parameter or the NumPy
      // array x wraps kept the old values.
      .def("__ipow__", [](const py::object& self, const py::object& b) { return augmented(self, b, "**=", power); })
      .def("__imatmul__", [](const py::object& self, const py::object& b) {
        py::object result = product(self.cast<const Tensor&>(), b);
        // A product of another shape (h @= W of a layer) rebinds the name, in either grad mode, as
        // PyTorch does (and as Python did before there was an __imatmul__): refused untracked only, it
        // failed under no_grad where training ran.
        if (result.cast<const Tensor&>().shape() != self.cast<const Tensor&>().shape()) return result;
        return augmented(self, b, "@=", [&result](const Tensor&, const py::object&) { return result; });
      })
      .def("__matmul__", &product)
      .def("__rmatmul__", [](const Tensor& a, const py::object& b) { return matmul(as_tensor(b), a); })
      .def("__eq__", [](const Tensor& a, const py::object& b) { return compare(a, b, [](const Tensor& x, const Tensor& y) { return eq(x, y); }); })
      .def("__ne__", [](const Tensor& a, const py::object& b) { return compare(a, b, [](const Tensor& x, const Tensor& y) { return ne(x, y); }); })
      .def("__lt__", [](const Tensor& a, const py::object& b) { return compare(a, b, [](const Tensor& x, const Tensor& y) { return lt(x, y); }); })
      .def("__le__", [](const Tensor& a, const py::object& b) { return compare(a, b, [](const Tensor& x, const Tensor& y) { return le(x, y); }); })
      .def("__gt__", [](const Tensor& a, const py::object& b) { return compare(a, b, [](const Tensor& x, const Tensor& y) { return gt(x, y); }); })
      .def("__ge__", [](const Tensor& a, const py::object& b) { return compare(a, b, [](const Tensor& x, const Tensor& y) { return ge(x, y); }); })
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
