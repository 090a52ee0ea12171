// NumPy-style indexing of tensors: integers, slices, None, ..., one integer array or 1-D mask.

#include <pybind11/numpy.h>

#include <algorithm>

#include "bindings.h"
#include "eddy/autodiff/forward.h"
#include "eddy/autodiff/tape.h"
#include "eddy/core/distribution.h"
#include "eddy/core/tracing.h"
#include "eddy/ops/ops.h"

namespace eddy::python {
namespace {

// Integer indices and None as plain strided views, for __setitem__ and for reads of tensors that
// autodiff and tracing do not follow. The differentiable path (squeeze/unsqueeze, which reshape)
// copies a non-contiguous input, and a write into that copy would be lost, as `t[:, 1] = v` was
// and `c = t[:, 1]; c[0] = v` was.
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

}  // namespace

Indexed index(const Tensor& x, const py::object& key, bool for_write) {
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
  // Views NumPy makes are views here too, where nothing records the indexing: no gradient or
  // tangent to carry, no trace, no distributed layout.
  const bool plain_views = for_write || (!x.is_abstract() && !(GradMode::enabled() && x.requires_grad()) &&
                                         innermost_level(x) < 0 && !active_trace_recorder() && !distribution_of(x));
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
      t = plain_views ? insert_axis_view(t, axis) : unsqueeze(t, axis);
      ++axis;
    } else if (py::isinstance<py::bool_>(item)) {
      throw py::index_error("a Python bool is not a valid index");
    } else if (py::isinstance<py::int_>(item) || (py::hasattr(item, "__index__") && !is_array_like(item))) {
      // An int past int64 is an IndexError, as in NumPy (the cast said "Unable to cast").
      const Py_ssize_t index = PyNumber_AsSsize_t(item.ptr(), PyExc_IndexError);
      if (index == -1 && PyErr_Occurred()) throw py::error_already_set();
      const int64_t i = normalise_index(index, t.shape()[axis], source_axis++);
      t = plain_views ? drop_axis_view(t, axis, i) : squeeze(slice(t, axis, i, i + 1), axis);
    } else if (py::isinstance<py::slice>(item)) {
      const int64_t n = t.shape()[axis];
      py::ssize_t start, stop, step, length;
      if (!item.cast<py::slice>().compute(static_cast<py::ssize_t>(n), &start, &stop, &step, &length)) {
        throw py::error_already_set();
      }
      if (length == 0) {
        t = slice(t, axis, 0, 0);
      } else if (step > 0) {
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
      // An empty list selects nothing, as in NumPy (which reads it as float64 and allows it).
      if (indices.numel() == 0 && indices.dim() == 1 && !py::isinstance<Tensor>(item)) indices = cast(indices, DType::i64);
      if (indices.dtype() == DType::b8) {
        if (indices.dim() != 1 || indices.shape()[0] != t.shape()[axis]) {
          throw py::index_error(cat("boolean index of shape ", indices.shape(), " does not match axis ", source_axis,
                                    " of size ", t.shape()[axis], " (only 1-D masks along one axis are supported)"));
        }
        if (indices.is_abstract()) {
          throw py::index_error("a boolean mask computed inside eddy.jit: the result's shape depends on the mask's "
                                "values, which are not known when the function is traced; select with "
                                "eddy.where(mask, x, 0), or index outside the jitted function");
        }
        // The positions are read on the host: inside eddy.jit the trace is told, so that a
        // captured mask that changes later makes the next call trace again.
        if (TraceRecorder* recorder = active_trace_recorder()) recorder->host_read(indices, "a boolean mask index");
        py::module_ np = py::module_::import("numpy");
        indices = as_tensor(np.attr("flatnonzero")(to_numpy(py::cast(indices))));
      }
      if (indices.dtype() != DType::i32 && indices.dtype() != DType::i64) {
        throw py::index_error(cat("tensor indices must be integers or booleans, got ", indices.dtype()));
      }
      const int64_t n = t.shape()[axis];
      // Checked here where the indices are known; inside eddy.jit an index computed from the
      // inputs is not known until the graph runs, and index_select's kernel checks it then.
      TraceRecorder* recorder = active_trace_recorder();
      if (!indices.is_abstract() && (!recorder || recorder->readable_on_host(indices))) {
        for (int64_t i : indices.to_vector<int64_t>()) normalise_index(i, n, source_axis);
      }
      // Negative indices as they are: index_select's kernels count them from the end and refuse
      // what is still out of range (wrapped here too, -11 on an axis of 10 came back as 9 under
      // eddy.jit, where the values are not known above).
      Tensor flat = reshape(indices, {-1});
      Shape shape(t.shape().begin(), t.shape().begin() + axis);
      shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
      shape.insert(shape.end(), t.shape().begin() + axis + 1, t.shape().end());
      t = reshape(index_select(t, axis, flat), shape);
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

}  // namespace eddy::python
