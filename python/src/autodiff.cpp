// Reverse and forward mode from Python. The primitives here (grad of outputs w.r.t. inputs, jvp,
// vjp, jacobian, hessian, hvp) take Python callables made of eddy ops; eddy/__init__.py builds the
// functional grad(f, argnums) on vjp, so grad(grad(f)) composes as in C++.

#include <algorithm>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "eddy/autodiff/functional.h"
#include "eddy/autodiff/tape.h"
#include "eddy/core/error.h"

namespace eddy::python {
namespace {

std::string type_name(const py::handle& value) { return py::str(py::type::of(value).attr("__name__")); }

// What a function being differentiated returned, taken as eddy tensors only: anything else (a
// NumPy array from np.sin of a tensor, a nested tuple, a number) was read as a constant, whose
// derivatives came back as zeros, silently.
std::vector<Tensor> differentiable_outputs(const py::object& out, bool sequences, const char* takes) {
  const bool sequence = py::isinstance<py::tuple>(out) || py::isinstance<py::list>(out);
  std::vector<Tensor> tensors;
  if (sequence && sequences) {
    for (const py::handle& element : out) {
      if (!py::isinstance<Tensor>(element)) {
        throw py::type_error(cat("the function returned a ", type_name(out), " holding a ", type_name(element),
                                 "; ", takes));
      }
      tensors.push_back(element.cast<Tensor>());
    }
    return tensors;
  }
  if (!py::isinstance<Tensor>(out)) throw py::type_error(cat("the function returned a ", type_name(out), "; ", takes));
  return {out.cast<Tensor>()};
}

// f(*tensors) -> a tensor or a sequence of tensors, as the C++ MultiFunction; `single` records
// which, so results come back in the same form.
MultiFunction multi_function(const py::function& f, bool& single) {
  return [f, &single](const std::vector<Tensor>& xs) {
    py::tuple args(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) args[i] = py::cast(xs[i]);
    py::object out = call_python(f, args);
    single = !(py::isinstance<py::tuple>(out) || py::isinstance<py::list>(out));
    return differentiable_outputs(out, true, "jvp and vjp take a function of an eddy tensor or a flat tuple or "
                                             "list of them (NumPy functions see values, not derivatives)");
  };
}

py::object shaped(const std::vector<Tensor>& values, bool single) {
  if (single) return py::cast(values.at(0));
  return py::cast(values);
}

// f(tensor) -> one tensor, for jacobian, hessian and hvp.
Function single_function(const py::function& f) {
  return [f](const Tensor& x) {
    return differentiable_outputs(call_python(f, py::make_tuple(x)), false, "jacobian, hessian and hvp take a function of one eddy tensor "
                                               "output (for several, differentiate each or eddy.stack them; NumPy "
                                               "functions see values, not derivatives)")
        .front();
  };
}

}  // namespace

void bind_autodiff(py::module_& m) {
  m.def("gradients", [](const py::object& outputs, const py::object& inputs, const py::object& grad_outputs,
                        bool create_graph) {
        const bool single = !(py::isinstance<py::tuple>(inputs) || py::isinstance<py::list>(inputs));
        std::vector<Tensor> seeds = grad_outputs.is_none() ? std::vector<Tensor>{} : tensors_of(grad_outputs);
        const std::vector<Tensor> outs = tensors_of(outputs);
        // As torch.autograd.grad: outputs computed under no_grad (or from nothing tracked) have no
        // graph, and their derivatives would read as zeros.
        EDDY_CHECK(std::any_of(outs.begin(), outs.end(), [](const Tensor& t) { return t.requires_grad(); }),
                   "gradients: no output requires gradients (computed under no_grad, or from tensors none of which "
                   "was marked requires_grad_()), so no derivative was recorded");
        return shaped(grad(outs, tensors_of(inputs), seeds, create_graph), single);
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs") = py::none(), py::arg("create_graph") = false,
      "d(outputs)/d(inputs) contracted with grad_outputs (ones for one-element outputs), like "
      "torch.autograd.grad; with create_graph the result is differentiable again.");
  m.def("jvp", [](const py::function& f, const py::object& primals, const py::object& tangents) {
        bool single = true;
        auto [outs, out_tangents] = jvp(multi_function(f, single), tensors_of(primals), tensors_of(tangents));
        return py::make_tuple(shaped(outs, single), shaped(out_tangents, single));
      },
      py::arg("f"), py::arg("primals"), py::arg("tangents"),
      "Forward mode: (f(*primals), J tangents). primals and tangents are tuples (or single tensors).");
  m.def("vjp", [](const py::function& f, const py::object& primals, const py::object& cotangents) {
        bool single = true;
        const bool single_input = !(py::isinstance<py::tuple>(primals) || py::isinstance<py::list>(primals));
        std::vector<Tensor> seeds = cotangents.is_none() ? std::vector<Tensor>{} : tensors_of(cotangents);
        auto [outs, grads] = vjp(multi_function(f, single), tensors_of(primals), seeds);
        return py::make_tuple(shaped(outs, single), shaped(grads, single_input));
      },
      py::arg("f"), py::arg("primals"), py::arg("cotangents") = py::none(),
      "Reverse mode: (f(*primals), cotangents^T J); cotangents default to ones for one-element outputs.");
  m.def("jacobian", [](const py::function& f, const py::object& x, const std::string& mode, bool holomorphic) {
        if (mode != "forward" && mode != "reverse") throw py::value_error("jacobian: mode must be 'forward' or 'reverse'");
        return jacobian(single_function(f), as_tensor(x), mode == "forward" ? JacobianMode::forward : JacobianMode::reverse,
                        holomorphic);
      },
      py::arg("f"), py::arg("x"), py::arg("mode") = "reverse", py::arg("holomorphic") = false);
  m.def("hessian", [](const py::function& f, const py::object& x) { return hessian(single_function(f), as_tensor(x)); },
        py::arg("f"), py::arg("x"));
  m.def("hvp", [](const py::function& f, const py::object& x, const py::object& v) {
        return hvp(single_function(f), as_tensor(x), as_tensor(v));
      },
      py::arg("f"), py::arg("x"), py::arg("v"));
}

}  // namespace eddy::python
