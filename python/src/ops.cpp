// The op API (eddy/ops/ops.h) and eddy.fft, with NumPy-style argument names: shapes as ints or
// sequences, `axis` as None, an int or a tuple, dtypes as strings, NumPy dtypes or eddy.dtype.

#include <cstdint>
#include <memory>
#include <optional>

#include <pybind11/complex.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "eddy/autodiff/tape.h"
#include "eddy/backends/backend.h"
#include "eddy/fft/fft.h"
#include "eddy/fft/spectral.h"
#include "eddy/ops/autocast.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/primitive.h"

namespace eddy::python {
namespace {

// An int, or anything that is one by __index__ (numpy.int64, which NumPy's own shapes and axes
// hold), as NumPy takes them. A NumPy array has __index__ too, which fails unless it holds one
// integer. A bool is an int to Python, but as an axis (sum(x, axis=True)) it is a mistake.
std::optional<int64_t> as_index(const py::handle& value) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr())) return std::nullopt;
  PyObject* index = PyNumber_Index(value.ptr());
  if (!index) {
    PyErr_Clear();
    return std::nullopt;
  }
  return py::reinterpret_steal<py::object>(index).cast<int64_t>();
}

// An int or a sequence of ints; anything else is a TypeError naming the argument (pybind's own
// said "Unable to cast Python instance of type <class 'list'> to C++ type '?'").
std::vector<int64_t> int_sequence(const py::handle& value, const char* argument, const char* allowed) {
  const auto refuse = [&] {
    return py::type_error(cat(argument, " must be ", allowed, ", got ", py::repr(value).cast<std::string>()));
  };
  try {
    if (const std::optional<int64_t> index = as_index(value)) return {*index};
    if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value)) throw refuse();
    std::vector<int64_t> ints;
    // A list of the entries holds them while they are read: a NumPy array makes each on access.
    for (const py::handle& entry : py::list(py::reinterpret_borrow<py::sequence>(value))) {
      const std::optional<int64_t> index = as_index(entry);
      if (!index) throw refuse();
      ints.push_back(*index);
    }
    return ints;
  } catch (const py::cast_error&) {  // an int past int64
    throw refuse();
  }
}

Shape shape_of(const py::handle& value) { return int_sequence(value, "shape", "an int or a sequence of ints"); }

// None (empty), an int, or a sequence of ints.
std::vector<int64_t> ints_of(const py::object& value, const char* argument = "axis") {
  if (value.is_none()) return {};
  return int_sequence(value, argument, "None, an int or a sequence of ints");
}

// Whether `axes` is an empty sequence: NumPy's "no axes", where the C++ functions read an empty
// list as every axis (sum(x, axis=()) summed everything).
bool no_axes(const py::object& axes, const char* argument = "axis") {
  return !axes.is_none() && !as_index(axes) && ints_of(axes, argument).empty();
}

DType dtype_or(const py::object& dtype, DType fallback) { return optional_dtype(dtype).value_or(fallback); }

Generator* generator_of(const py::object& generator) {
  return generator.is_none() ? nullptr : generator.cast<Generator*>();
}

template <typename Op>
void unary(py::module_& m, const char* name, Op op) {
  m.def(name, [op](const py::object& x) { return op(as_tensor(x)); }, py::arg("x"));
}

template <typename Op>
void binary(py::module_& m, const char* name, Op op) {
  m.def(name, [op](const py::object& a, const py::object& b) {
        const auto [x, y] = operand_pair(a, b);
        return op(x, y);
      },
        py::arg("a"), py::arg("b"));
}

template <typename Op>
void reduction(py::module_& m, const char* name, Op op) {
  m.def(name, [op](const py::object& x, const py::object& axis, bool keepdims) {
        // Over no axes: the reduction of each element alone, with the op's dtype rules and
        // refusals, as the reduction over a new axis of one.
        if (no_axes(axis)) return op(unsqueeze(as_tensor(x), 0), {0}, false);
        return op(as_tensor(x), ints_of(axis), keepdims);
      },
      py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false);
}

// A context manager that opens a `Scope` (an RAII guard of a setting) for its block and closes
// it on exit, exceptions included: eddy.no_grad() and enable_grad() (GradModeGuard), autocast
// (AutocastScope, ops/autocast.h) and default_device (DefaultDeviceScope). A stack of them, so
// that one object entered again in a nested block restores each level in turn: with one guard
// the inner entry replaced the outer's, and leaving both left the setting of the inner block on.
template <typename Scope, typename Setting>
class ScopeContext {
 public:
  explicit ScopeContext(Setting setting) : setting_(setting) {}
  void enter() { scopes_.push_back(std::make_shared<Scope>(setting_)); }
  void exit(const py::args&) { scopes_.pop_back(); }
  const Setting& setting() const { return setting_; }

 private:
  Setting setting_;
  std::vector<std::shared_ptr<Scope>> scopes_;  // shared: pybind11 copies what it returns
};
using GradModeContext = ScopeContext<GradModeGuard, bool>;
using DefaultDeviceContext = ScopeContext<DefaultDeviceScope, Device>;
// Autocast in a 16-bit dtype, or off (torch.autocast's enabled=False): code whose precision is
// its own inside an autocast block.
using AutocastContext = ScopeContext<AutocastScope, std::optional<DType>>;

// NumPy's norm argument: None is "backward".
std::string fft_norm(const py::object& norm) { return norm.is_none() ? "backward" : norm.cast<std::string>(); }

void bind_fft(py::module_& parent) {
  py::module_ m = parent.def_submodule("fft", "numpy.fft, differentiable to any order (FFTW on the CPU).");
  auto one_axis = [&](const char* name, Tensor (*op)(const Tensor&, int64_t, int64_t, std::string_view)) {
    m.def(name, [op, name](const py::object& x, const py::object& n, int64_t axis, const py::object& norm) {
          // The C++ functions take -1 for "the input's length"; here, as in NumPy, that is None.
          const std::optional<int64_t> index = n.is_none() ? std::nullopt : as_index(n);
          if (!n.is_none() && !index) {
            throw py::type_error(cat(name, ": n must be None or an int, got ", py::repr(n).cast<std::string>()));
          }
          const int64_t length = index.value_or(-1);
          if (!n.is_none() && length < 1) throw Error(cat(name, ": n must be a positive length, got ", length));
          return op(as_tensor(x), length, axis, fft_norm(norm));
        },
        py::arg("x"), py::arg("n") = py::none(), py::arg("axis") = -1, py::arg("norm") = "backward");
  };
  one_axis("fft", &fft::fft);
  one_axis("ifft", &fft::ifft);
  one_axis("rfft", &fft::rfft);
  one_axis("irfft", &fft::irfft);
  one_axis("hfft", &fft::hfft);
  one_axis("ihfft", &fft::ihfft);
  using Multi = Tensor (*)(const Tensor&, const std::vector<int64_t>&, const std::vector<int64_t>&, std::string_view);
  // `real_transform`: rfft2, irfft2, rfftn, irfftn; `inverse_real`: the last two.
  auto many_axes = [&](const char* name, Multi op, std::vector<int64_t> default_axes, bool real_transform,
                       bool inverse_real) {
    m.def(name, [=](const py::object& x, const py::object& s, const py::object& axes, const py::object& norm) {
          const Tensor input = as_tensor(x);
          std::vector<int64_t> lengths = ints_of(s, "s");
          const std::vector<int64_t> chosen = axes.is_none() ? default_axes : ints_of(axes, "axes");
          // The C++ functions read empty axes as "every axis"; NumPy's axes=() transforms none, as
          // does s=() without axes.
          if (no_axes(axes, "axes") || (axes.is_none() && !s.is_none() && lengths.empty())) {
            if (real_transform) throw Error(cat(name, ": axes or s is empty; pass None to transform every axis"));
            EDDY_CHECK(lengths.empty(), name, ": s has ", lengths.size(), " entries but axes is empty");
            return is_complex(input.dtype()) ? input : cast(input, complex_dtype(input.dtype()));
          }
          // NumPy's -1 in s is the input's length, which C++'s inverse real transforms read as
          // their default output length 2 (m - 1) on the last axis.
          if (inverse_real && !lengths.empty() && lengths.back() == -1) {
            const int64_t last_axis = chosen.empty() ? -1 : chosen.back();
            lengths.back() = input.size(normalize_axis(last_axis, input.dim(), name));
          }
          return op(input, lengths, chosen, fft_norm(norm));
        },
        py::arg("x"), py::arg("s") = py::none(), py::arg("axes") = py::none(), py::arg("norm") = "backward");
  };
  many_axes("fft2", &fft::fft2, {-2, -1}, false, false);
  many_axes("ifft2", &fft::ifft2, {-2, -1}, false, false);
  many_axes("rfft2", &fft::rfft2, {-2, -1}, true, false);
  many_axes("irfft2", &fft::irfft2, {-2, -1}, true, true);
  many_axes("fftn", &fft::fftn, {}, false, false);
  many_axes("ifftn", &fft::ifftn, {}, false, false);
  many_axes("rfftn", &fft::rfftn, {}, true, false);
  many_axes("irfftn", &fft::irfftn, {}, true, true);
  m.def("fftfreq", [](int64_t n, double d, const py::object& dtype) { return fft::fftfreq(n, d, dtype_or(dtype, DType::f64)); },
        py::arg("n"), py::arg("d") = 1.0, py::arg("dtype") = py::none());
  m.def("rfftfreq", [](int64_t n, double d, const py::object& dtype) { return fft::rfftfreq(n, d, dtype_or(dtype, DType::f64)); },
        py::arg("n"), py::arg("d") = 1.0, py::arg("dtype") = py::none());
  // As above, axes=() shifts no axis, where the C++ functions read empty axes as every axis.
  using Shift = Tensor (*)(const Tensor&, const std::vector<int64_t>&);
  auto shift = [&](const char* name, Shift op) {
    m.def(name, [op](const py::object& x, const py::object& axes) {
          return no_axes(axes, "axes") ? as_tensor(x) : op(as_tensor(x), ints_of(axes, "axes"));
        },
        py::arg("x"), py::arg("axes") = py::none());
  };
  shift("fftshift", &fft::fftshift);
  shift("ifftshift", &fft::ifftshift);
  m.def("spectral_conv", [](const py::object& x, const py::object& weights, const std::vector<int64_t>& modes) {
        return fft::spectral_conv(as_tensor(x), as_tensor(weights), modes);
      },
      py::arg("x"), py::arg("weights"), py::arg("modes"));
}

}  // namespace

void bind_ops(py::module_& m) {
  py::class_<Generator>(m, "Generator", "Counter-based (Philox) random numbers: element i depends only on the "
                                        "seed and the draw's offset, not on threads.")
      .def(py::init<uint64_t>(), py::arg("seed") = 0);
  m.def("manual_seed", &manual_seed, py::arg("seed"),
        "Reseeds the default generator: rand/randn without a generator, and the weights of models built "
        "without a seed, repeat from here.");

  // ---- creation ----
  m.def("zeros", [](const py::object& shape, const py::object& dtype) { return zeros(shape_of(shape), dtype_or(dtype, DType::f32)); },
        py::arg("shape"), py::arg("dtype") = py::none());
  m.def("ones", [](const py::object& shape, const py::object& dtype) { return ones(shape_of(shape), dtype_or(dtype, DType::f32)); },
        py::arg("shape"), py::arg("dtype") = py::none());
  m.def("full", [](const py::object& shape, const py::object& value, const py::object& dtype) {
        const DType d = dtype_or(dtype, DType::f32);
        const Shape dims = shape_of(shape);
        // An integer fill stays exact past 2^53, where a double would round it (2^62 + 1 came out 2^62).
        if (is_integral(d) && PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
          const int64_t fill = value.cast<int64_t>();
          EDDY_CHECK(d != DType::i32 || (fill >= INT32_MIN && fill <= INT32_MAX), "full: ", fill,
                     " does not fit in int32");
          return cast(tensor(std::vector<int64_t>(static_cast<size_t>(numel(dims)), fill), dims), d);
        }
        const auto fill = value.cast<std::complex<double>>();
        EDDY_CHECK(fill.imag() == 0 || is_complex(d), "full: the value ", py::str(value).cast<std::string>(),
                   " has an imaginary part, and ", d, " is real; give a complex dtype");
        return full(dims, fill, d);
      },
      py::arg("shape"), py::arg("value"), py::arg("dtype") = py::none());
  m.def("zeros_like", [](const py::object& x) { return zeros_like(as_tensor(x)); }, py::arg("x"));
  m.def("ones_like", [](const py::object& x) { return ones_like(as_tensor(x)); }, py::arg("x"));
  m.def("arange", [](const py::object& start, const py::object& stop, const py::object& step, const py::object& dtype) {
        const DType d = dtype_or(dtype, DType::f32);
        auto is_int = [](const py::object& x) { return PyLong_Check(x.ptr()) && !PyBool_Check(x.ptr()); };
        // Integer ranges are counted in integers: in doubles, values past 2^53 rounded (and repeated).
        if (is_integral(d) && is_int(start) && (stop.is_none() || is_int(stop)) && is_int(step)) {
          const py::object numpy_range = stop.is_none() ? py::module_::import("numpy").attr("arange")(0, start, step, "int64")
                                                        : py::module_::import("numpy").attr("arange")(start, stop, step, "int64");
          const Tensor shared = as_tensor(numpy_range);
          Tensor owned = Tensor::empty(shared.shape(), d);
          owned.copy_(shared);
          return owned;
        }
        return stop.is_none() ? arange(0, start.cast<double>(), step.cast<double>(), d)
                              : arange(start.cast<double>(), stop.cast<double>(), step.cast<double>(), d);
      },
      py::arg("start"), py::arg("stop") = py::none(), py::arg("step") = 1, py::arg("dtype") = py::none());
  m.def("linspace", [](double start, double stop, int64_t num, const py::object& dtype) {
        return linspace(start, stop, num, dtype_or(dtype, DType::f32));
      },
      py::arg("start"), py::arg("stop"), py::arg("num"), py::arg("dtype") = py::none());
  m.def("eye", [](int64_t n, const py::object& dtype) { return eye(n, dtype_or(dtype, DType::f32)); }, py::arg("n"),
        py::arg("dtype") = py::none());
  m.def("rand", [](const py::object& shape, const py::object& dtype, const py::object& generator) {
        return rand(shape_of(shape), dtype_or(dtype, DType::f32), generator_of(generator));
      },
      py::arg("shape"), py::arg("dtype") = py::none(), py::arg("generator") = py::none());
  m.def("randn", [](const py::object& shape, const py::object& dtype, const py::object& generator) {
        return randn(shape_of(shape), dtype_or(dtype, DType::f32), generator_of(generator));
      },
      py::arg("shape"), py::arg("dtype") = py::none(), py::arg("generator") = py::none());
  m.def("random_key", &random_key, py::arg("seed"), py::arg("offset") = 0,
        "An explicit random key [seed, offset] (int64) for uniform() and normal().");
  m.def("uniform", [](const Tensor& key, const py::object& shape, const py::object& dtype) {
        return uniform(key, shape_of(shape), dtype_or(dtype, DType::f32));
      },
      py::arg("key"), py::arg("shape"), py::arg("dtype") = py::none());
  m.def("normal", [](const Tensor& key, const py::object& shape, const py::object& dtype) {
        return normal(key, shape_of(shape), dtype_or(dtype, DType::f32));
      },
      py::arg("key"), py::arg("shape"), py::arg("dtype") = py::none());

  // ---- elementwise ----
  // The math functions of the op list (eddy/ops/math_functions.def), each under its own name.
  py::list math_function_names;
  for (const MathFunction& function : math_functions()) {
    const std::string name(function.name);
    if (function.arity == 1) {
      unary(m, name.c_str(), function.unary);
    } else {
      binary(m, name.c_str(), function.binary);
    }
    math_function_names.append(py::make_tuple(name, function.arity));
  }
  m.attr("_math_functions") = math_function_names;
  // For the test that every elementwise primitive has a Python name.
  m.def("_elementwise_primitives", [] {
    std::vector<std::string> names;
    for (const Primitive& primitive : all_primitives()) {
      if (primitive.elementwise) names.emplace_back(primitive.name);
    }
    return names;
  });
  unary(m, "neg", [](const Tensor& x) { return neg(x); });
  unary(m, "stop_gradient", [](const Tensor& x) { return stop_gradient(x); });
  unary(m, "real", [](const Tensor& x) { return real(x); });
  unary(m, "imag", [](const Tensor& x) { return imag(x); });
  unary(m, "conj", [](const Tensor& x) { return conj(x); });
  unary(m, "angle", [](const Tensor& x) { return angle(x); });
  unary(m, "square", [](const Tensor& x) { return square(x); });
  unary(m, "sigmoid", [](const Tensor& x) { return sigmoid(x); });
  unary(m, "softplus", [](const Tensor& x) { return softplus(x); });
  unary(m, "relu", [](const Tensor& x) { return relu(x); });
  unary(m, "silu", [](const Tensor& x) { return silu(x); });
  unary(m, "gelu_exact", [](const Tensor& x) { return gelu_exact(x); });
  unary(m, "contiguous", [](const Tensor& x) { return contiguous(x); });
  unary(m, "flatten", [](const Tensor& x) { return flatten(x); });
  binary(m, "add", [](const Tensor& a, const Tensor& b) { return add(a, b); });
  binary(m, "sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); });
  binary(m, "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); });
  binary(m, "div", [](const Tensor& a, const Tensor& b) { return div(a, b); });
  binary(m, "complex", [](const Tensor& a, const Tensor& b) { return complex(a, b); });
  binary(m, "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  m.def("matmul_add", [](const py::object& a, const py::object& b, const py::object& c) {
        return matmul_add(as_tensor(a), as_tensor(b), as_tensor(c));
      },
      py::arg("a"), py::arg("b"), py::arg("c"));
  binary(m, "mse_loss", [](const Tensor& a, const Tensor& b) { return mse_loss(a, b); });
  m.def("where", [](const py::object& c, const py::object& a, const py::object& b) {
        const auto [x, y] = operand_pair(a, b);
        return where(as_tensor(c), x, y);
      },
      py::arg("condition"), py::arg("a"), py::arg("b"));
  m.def("cast", [](const py::object& x, const py::object& dtype) {
          const Tensor t = as_tensor(x);
          const DType to = parse_dtype(dtype);
          // NumPy and PyTorch warn here, JAX says it will refuse; eddy refuses such losses elsewhere
          // (a complex value written into a float tensor).
          if (is_complex(t.dtype()) && !is_complex(to)) {
            throw py::type_error(cat("cast: ", t.dtype(), " to ", to, " would drop the imaginary parts; take "
                                     "eddy.real(z) (or abs, angle) for a real tensor"));
          }
          return cast(t, to);
        },
        py::arg("x"), py::arg("dtype"));

  // ---- reductions ----
  reduction(m, "sum", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return sum(x, a, k); });
  reduction(m, "mean", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return mean(x, a, k); });
  reduction(m, "prod", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return prod(x, a, k); });
  reduction(m, "max", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return max(x, a, k); });
  reduction(m, "min", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return min(x, a, k); });
  reduction(m, "norm", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return norm(x, a, k); });
  // One axis as the C++ op takes it; several, or every one (None), as SciPy's and JAX's
  // logsumexp take them (refused before): moved last and merged into one.
  m.def("logsumexp",
        [](const py::object& x, const py::object& axis, bool keepdims) {
          const Tensor t = as_tensor(x);
          if (py::isinstance<py::int_>(axis)) return logsumexp(t, axis.cast<int64_t>(), keepdims);
          std::vector<bool> reduced(static_cast<size_t>(t.dim()), axis.is_none());
          for (int64_t a : ints_of(axis)) {
            const int64_t at = a < 0 ? a + t.dim() : a;
            if (at < 0 || at >= t.dim() || reduced[static_cast<size_t>(at)]) {
              throw py::value_error(cat("logsumexp: axis ", a, " is out of range or repeated for a tensor of shape ",
                                        t.shape()));
            }
            reduced[static_cast<size_t>(at)] = true;
          }
          std::vector<int64_t> order, merged_shape;
          Shape kept_shape;
          for (int64_t i = 0; i < t.dim(); ++i) {
            if (reduced[static_cast<size_t>(i)]) continue;
            order.push_back(i);
            merged_shape.push_back(t.size(i));
          }
          for (int64_t i = 0; i < t.dim(); ++i) {
            kept_shape.push_back(reduced[static_cast<size_t>(i)] ? 1 : t.size(i));
            if (reduced[static_cast<size_t>(i)]) order.push_back(i);
          }
          merged_shape.push_back(-1);
          const Tensor result = logsumexp(reshape(permute(t, order), merged_shape), -1, false);
          return keepdims ? reshape(result, kept_shape) : result;
        },
        py::arg("x"), py::arg("axis") = -1, py::arg("keepdims") = false);
  m.def("softmax", [](const py::object& x, int64_t axis) { return softmax(as_tensor(x), axis); }, py::arg("x"),
        py::arg("axis") = -1);
  m.def("log_softmax", [](const py::object& x, int64_t axis) { return log_softmax(as_tensor(x), axis); },
        py::arg("x"), py::arg("axis") = -1);

  // ---- movement and indexing ----
  m.def("reshape", [](const py::object& x, const py::object& shape) { return reshape(as_tensor(x), shape_of(shape)); },
        py::arg("x"), py::arg("shape"));
  m.def("permute", [](const py::object& x, const std::vector<int64_t>& axes) { return permute(as_tensor(x), axes); },
        py::arg("x"), py::arg("axes"));
  // Without axes, NumPy reverses all of them and swapping the last two (torch's mT) gave another
  // result on 3 or more axes, silently: there the axes are asked for.
  m.def("transpose",
        [](const py::object& x, std::optional<int64_t> a, std::optional<int64_t> b) {
          const Tensor t = as_tensor(x);
          if (!a && !b) {
            if (t.dim() > 2) {
              throw py::type_error(cat("transpose: a tensor of shape ", t.shape(), " has more than two axes; give the "
                                       "two to swap (transpose(x, 0, 2)), or permute them all (x.T reverses them, "
                                       "as numpy.transpose does)"));
            }
            return t.dim() == 2 ? transpose(t, 0, 1) : t;
          }
          if (!a || !b) throw py::type_error("transpose: give both axes to swap, or neither");
          return transpose(t, *a, *b);
        },
        py::arg("x"), py::arg("axis1") = py::none(), py::arg("axis2") = py::none());
  m.def("broadcast_to", [](const py::object& x, const py::object& shape) { return expand(as_tensor(x), shape_of(shape)); },
        py::arg("x"), py::arg("shape"));
  m.def("squeeze", [](const py::object& x, int64_t axis) { return squeeze(as_tensor(x), axis); }, py::arg("x"),
        py::arg("axis"));
  m.def("expand_dims", [](const py::object& x, int64_t axis) { return unsqueeze(as_tensor(x), axis); }, py::arg("x"),
        py::arg("axis"));
  m.def("pad", [](const py::object& x, const std::vector<int64_t>& before, const std::vector<int64_t>& after) {
        return pad(as_tensor(x), before, after);
      },
      py::arg("x"), py::arg("before"), py::arg("after"));
  m.def("flip", [](const py::object& x, const py::object& axis) {
        return no_axes(axis) ? as_tensor(x) : flip(as_tensor(x), ints_of(axis));
      },
        py::arg("x"), py::arg("axis"));
  m.def("roll", [](const py::object& x, int64_t shift, int64_t axis) { return roll(as_tensor(x), shift, axis); },
        py::arg("x"), py::arg("shift"), py::arg("axis"));
  // Mixed dtypes promote, as every binary op does and as NumPy's and PyTorch's concatenate and
  // stack do: an int64 beside a float64 was refused.
  const auto promoted = [](std::vector<Tensor> tensors) {
    if (tensors.empty()) return tensors;
    DType common = tensors.front().dtype();
    for (const Tensor& t : tensors) common = promote(common, t.dtype());
    for (Tensor& t : tensors) {
      if (t.dtype() != common) t = cast(t, common);
    }
    return tensors;
  };
  m.def("concatenate",
        [promoted](const py::sequence& xs, int64_t axis) { return concat(promoted(tensors_of(xs)), axis); },
        py::arg("tensors"), py::arg("axis") = 0);
  m.def("stack", [promoted](const py::sequence& xs, int64_t axis) { return stack(promoted(tensors_of(xs)), axis); },
        py::arg("tensors"), py::arg("axis") = 0);
  m.def("gather", [](const py::object& x, int64_t axis, const py::object& index) {
        return gather(as_tensor(x), axis, as_tensor(index));
      },
      py::arg("x"), py::arg("axis"), py::arg("index"));
  m.def("take", [](const py::object& x, const py::object& index, int64_t axis) {
        return index_select(as_tensor(x), axis, as_tensor(index));
      },
      py::arg("x"), py::arg("index"), py::arg("axis"));
  m.def("scatter_add", [](const py::object& base, int64_t axis, const py::object& index, const py::object& src) {
        return scatter_add(as_tensor(base), axis, as_tensor(index), as_tensor(src));
      },
      py::arg("base"), py::arg("axis"), py::arg("index"), py::arg("src"));

  // ---- grad mode and threads ----
  py::class_<GradModeContext>(m, "_GradModeContext")
      .def("__enter__", &GradModeContext::enter)
      .def("__exit__", &GradModeContext::exit)
      .def_property_readonly("enabled", &GradModeContext::setting, "Whether the block records for reverse mode.");
  m.def("no_grad", [] { return GradModeContext(false); }, "with eddy.no_grad(): ops record nothing for reverse mode.");
  m.def("enable_grad", [] { return GradModeContext(true); });
  py::class_<AutocastContext>(m, "_AutocastContext")
      .def("__enter__", &AutocastContext::enter)
      .def("__exit__", &AutocastContext::exit);
  m.def("autocast",
        [](const py::object& dtype, bool enabled) {
          // None read as float64, and the error named float64.
          EDDY_CHECK(!dtype.is_none(), "eddy.autocast: dtype must be 'bfloat16' or 'float16', got None (enabled=False "
                     "turns autocast off in the block)");
          const DType low = parse_dtype(dtype);
          return AutocastContext(enabled ? std::optional<DType>(low) : std::nullopt);
        },
        py::arg("dtype") = "bfloat16", py::arg("enabled") = true,
        "with eddy.autocast('bfloat16'): float32 matrix products in the block run in the 16-bit dtype; "
        "enabled=False turns autocast off in the block (docs/optim.md, \"Half precision\").");
  py::class_<DefaultDeviceContext>(m, "_DefaultDeviceContext")
      .def("__enter__", &DefaultDeviceContext::enter)
      .def("__exit__", &DefaultDeviceContext::exit);
  m.def("default_device", [](const std::string& device) { return DefaultDeviceContext(parse_device(device)); },
        py::arg("device"),
        "with eddy.default_device('cuda'): tensors made in the block without a device (zeros, rand, "
        "eddy.tensor of Python values, file reads, models' parameters) are made there (docs/gpu.md).");
  m.def("get_default_device", [] { return device_name(default_device()); },
        "Where tensors made without a device go now: 'cpu' outside eddy.default_device blocks.");
  m.def("set_num_threads", &set_num_threads, py::arg("threads"));
  m.def("cuda_unavailable_reason", [](int index) { return device_unavailable_reason(Device::cuda(index)); },
        py::arg("index") = 0, "Empty when GPU `index` can be used; otherwise why not.");
  m.def("cuda_available", [](int index) { return device_unavailable_reason(Device::cuda(index)).empty(); },
        py::arg("index") = 0);
  m.def("num_threads", &num_threads);

  bind_fft(m);
}

}  // namespace eddy::python
