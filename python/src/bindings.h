#pragma once
// Shared pieces of the eddy Python module (eddy._eddy). The bindings are thin: each Python call
// converts its arguments, calls the C++ function of the same name, and converts the result.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cxxabi.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::python {

namespace py = pybind11;

// A Python value as a tensor: an eddy Tensor as it is; a NumPy array, buffer or anything
// `numpy.asarray` takes, shared without a copy where its layout allows (otherwise copied);
// Python scalars as 0-d tensors. `dtype` (None, a string, a NumPy dtype or an eddy dtype) casts.
Tensor as_tensor(const py::handle& value, const py::object& dtype = py::none());
// The two operands of a binary op: a Python number (not a bool) beside a float or complex tensor
// is a scalar of that tensor's dtype (a complex number, of its complex dtype), the rule of NumPy 2
// and PyTorch for Python scalars and of eddy's operators: float32 stays float32, and a float32
// tensor compared with 0.1 is compared with float32's 0.1. Everything else goes through as_tensor.
std::pair<Tensor, Tensor> operand_pair(const py::handle& a, const py::handle& b);
// `value` as the operand beside the tensor `other`, by the same rule.
Tensor operand_beside(const Tensor& other, const py::handle& value);
// A tensor or a sequence of tensor-like values as a list of tensors.
std::vector<Tensor> tensors_of(const py::handle& values);
// None stays None; anything else goes through parse_dtype.
std::optional<DType> optional_dtype(const py::object& dtype);
// A model's dtype argument: float32 when None.
DType model_dtype(const py::object& dtype);
// A model's seed argument: None draws a fresh seed from eddy's default generator (eddy.manual_seed
// makes the sequence repeat), so that two layers built alike get different weights, as in
// PyTorch; with a fixed default every Linear(16, 16) had the same matrix.
uint64_t model_seed(const py::object& seed);
DType parse_dtype(const py::handle& dtype);
// Raises Python's OverflowError (pybind11 has no exception type for it).
[[noreturn]] void throw_overflow_error(const std::string& message);

// CPython (before 3.14) ends a thread that asks for the GIL while the interpreter shuts down (a
// daemon thread still in eddy's C++ at exit) with pthread_exit. Its forced unwinding would run
// C++ destructors that touch Python objects without the GIL, or reach a noexcept frame and call
// std::terminate, aborting the exit. Such a thread is parked here instead, as Python 3.14 parks
// them itself, until the process ends.
[[noreturn]] inline void park_thread_at_interpreter_exit() {
  for (;;) pause();
}

// py::gil_scoped_release and py::gil_scoped_acquire, parking the thread where taking the GIL
// ends it. The C++ work inside a GilRelease scope lets other Python threads run beside it.
class GilRelease {
 public:
  GilRelease() : thread_state_(PyEval_SaveThread()) {}
  ~GilRelease() {
    try {
      PyEval_RestoreThread(thread_state_);
    } catch (abi::__forced_unwind&) {
      park_thread_at_interpreter_exit();
    }
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* thread_state_;
};

class GilAcquire {
 public:
  GilAcquire() {
    try {
      gil_.emplace();
    } catch (abi::__forced_unwind&) {
      park_thread_at_interpreter_exit();
    }
  }

 private:
  std::optional<py::gil_scoped_acquire> gil_;
};

// Calls Python code from C++ (a model's forward, a traced function, a closure) with the GIL held,
// as `callable(*args, **kwargs)`. CPython can end the thread inside it, at a switch of the GIL in
// the interpreter loop; the thread is parked here, before the unwinding reaches C++ frames whose
// py::object destructors would release references without the GIL (the exit then crashed in
// Python's last garbage collection). A Python exception leaves as py::error_already_set.
inline py::object call_python(const py::handle& callable, const py::tuple& args,
                              const py::handle& kwargs = py::handle()) {
  PyObject* result = nullptr;
  try {
    result = PyObject_Call(callable.ptr(), args.ptr(), kwargs.ptr());
  } catch (abi::__forced_unwind&) {
    park_thread_at_interpreter_exit();
  }
  if (result == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

// Whether a Python int is an int32 value.
inline bool fits_int32(const py::int_& integer) {
  return integer >= py::int_(INT32_MIN) && integer <= py::int_(INT32_MAX);
}
// The first of the smallest and the largest of int64 `values` that int32 cannot hold, if either.
std::optional<int64_t> int32_misfit(const Tensor& values);
// Refuses floating `numbers` that the integer dtype cannot hold: ValueError for a NaN,
// OverflowError past its range (`who` begins the message).
void require_numbers_fit(std::string_view who, const Tensor& numbers, DType integer);

// ---- interop.cpp ----
std::string numpy_name(DType dtype);
// A NumPy array over the tensor's memory (any strides); the array keeps `tensor` alive.
py::array to_numpy(const py::object& tensor);
std::vector<py::ssize_t> byte_strides(const Tensor& t);
// DLPack export (a "dltensor" capsule owning a reference to the tensor) and import.
py::capsule to_dlpack(const Tensor& t);
// A device as Python shows it: "cpu", "cuda:0".
std::string device_name(Device device);
// (DLPack device type, index) of where `t` lives, for __dlpack_device__.
std::pair<int, int> dlpack_device(const Tensor& t);
Tensor from_dlpack(const py::object& source);
// A tensor over the array's memory, or over a converted copy when eddy cannot share it.
Tensor wrap_array(py::array array);

// ---- indexing.cpp ----
struct Indexed {
  Tensor view;
  bool is_view = true;  // false when an integer-array index gathered a copy
};
// x[key] with NumPy semantics; for_write keeps integer indices as strided views of x, so that an
// assignment reaches x's memory.
Indexed index(const Tensor& x, const py::object& key, bool for_write = false);

void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_autodiff(py::module_& m);
void bind_nn(py::module_& m);
void bind_transformers(py::module_& nn);
void bind_solvers(py::module_& m);
void bind_compiler(py::module_& m);
void bind_tokenizer(py::module_& m);

// ---- tokenizer.cpp ----
// Text that may end inside a UTF-8 character (decoded ids, generated tokens) as a str, broken
// bytes as U+FFFD, as `tokenizers` decodes.
py::str decoded_text(const std::string& utf8);
void bind_dist(py::module_& m);

}  // namespace eddy::python
