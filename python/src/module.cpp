// The extension module eddy._eddy; the package eddy (python/eddy/__init__.py) re-exports it.

#include <filesystem>

#include "bindings.h"
#include "eddy/core/error.h"
#include "eddy/core/memory.h"

PYBIND11_MODULE(_eddy, m) {
  m.doc() = "eddy: differentiable physics and scientific machine learning (C++ engine).";
  eddy::keep_freed_heap_memory();
  // eddy::Error is a ValueError carrying eddy's message (op, key path, shapes, file:line:col).
  pybind11::register_exception<eddy::Error>(m, "Error", PyExc_ValueError);
  // A file system error (a folder to create under a regular file, a missing permission) is an
  // OSError with its errno, so Python picks the subclass (NotADirectoryError, PermissionError) as
  // its own file functions do; pybind11 would raise a bare RuntimeError.
  pybind11::register_exception_translator([](std::exception_ptr raised) {
    try {
      if (raised) std::rethrow_exception(raised);
    } catch (const std::filesystem::filesystem_error& e) {
      const pybind11::tuple arguments = pybind11::make_tuple(e.code().value(), e.what());
      PyErr_SetObject(PyExc_OSError, arguments.ptr());
    }
  });
  eddy::python::bind_tensor(m);
  eddy::python::bind_ops(m);
  eddy::python::bind_autodiff(m);
  eddy::python::bind_nn(m);
  eddy::python::bind_solvers(m);
  eddy::python::bind_compiler(m);
  eddy::python::bind_tokenizer(m);
  eddy::python::bind_dist(m);
}
