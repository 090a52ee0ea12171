#pragma once
// Shared pieces of the eddy Python module (eddy._eddy). The bindings are thin: each Python call
// converts its arguments, calls the C++ function of the same name, and converts the result.

#include <pybind11/pybind11.h>

#include "eddy/core/tensor.h"

namespace eddy::python {

namespace py = pybind11;

// A Python value as a tensor: an eddy Tensor as it is; a NumPy array, buffer or anything
// `numpy.asarray` takes, shared without a copy where its layout allows (otherwise copied);
// Python scalars as 0-d tensors. `dtype` (None, a string, a NumPy dtype or an eddy dtype) casts.
Tensor as_tensor(const py::handle& value, const py::object& dtype = py::none());
// None stays None; anything else goes through parse_dtype.
std::optional<DType> optional_dtype(const py::object& dtype);
DType parse_dtype(const py::handle& dtype);

void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_autodiff(py::module_& m);
void bind_nn(py::module_& m);
void bind_solvers(py::module_& m);

}  // namespace eddy::python
