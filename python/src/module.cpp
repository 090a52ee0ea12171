// The extension module eddy._eddy; the package eddy (python/eddy/__init__.py) re-exports it.

#include "bindings.h"
#include "eddy/core/error.h"

PYBIND11_MODULE(_eddy, m) {
  m.doc() = "eddy: differentiable physics and scientific machine learning (C++ engine).";
  // eddy::Error is a ValueError carrying eddy's message (op, key path, shapes, file:line:col).
  pybind11::register_exception<eddy::Error>(m, "Error", PyExc_ValueError);
  eddy::python::bind_tensor(m);
  eddy::python::bind_ops(m);
  eddy::python::bind_autodiff(m);
  eddy::python::bind_nn(m);
  eddy::python::bind_solvers(m);
  eddy::python::bind_compiler(m);
  eddy::python::bind_tokenizer(m);
  eddy::python::bind_dist(m);
}
