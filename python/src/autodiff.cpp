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

bool is_container(const py::handle& value) {
  return py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value) || py::isinstance<py::dict>(value);
}

std::string type_name(const py::handle& value) { return py::str(py::type::of(value).attr("__name__")); }

// f(*tensors) -> a tensor or a sequence of tensors, as the C++ MultiFunction; `single` records
// which, so results come back in the same form.
MultiFunction multi_function(const py::function& f, bool& single) {
  return [f, &single](const std::vector<Tensor>& xs) {
    py::tuple args(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) args[i] = py::cast(xs[i]);
    py::object out = f(*args);
    single = !(py::isinstance<py::tuple>(out) || py::isinstance<py::list>(out));
    // A nested sequence became one constant tensor (its tangents zeros, its cotangents dropped).
    bool nested = py::isinstance<py::dict>(out);
    for (size_t i = 0; !single && !nested && i < py::len(out); ++i) nested = is_container(out[py::int_(i)]);
    if (nested) {
      throw py::type_error(cat("the function returned ", type_name(out), single ? "" : " holding a tuple, list or dict",
                               "; jvp and vjp take a tensor or a flat tuple or list of tensors: flatten the outputs"));
    }
    return tensors_of(out);
  };
}

py::object shaped(const std::vector<Tensor>& values, bool single) {
  if (single) return py::cast(values.at(0));
  return py::cast(values);
}

// f(tensor) -> one tensor, for jacobian, hessian and hvp. A tuple or list of tensors became one
// constant tensor, whose derivatives were zeros.
Function single_function(const py::function& f) {
  return [f](const Tensor& x) {
    py::object out = f(x);
    if (is_container(out)) {
      throw py::type_error(cat("the function returned ", type_name(out), "; jacobian, hessian and hvp take a "
                               "function of one tensor output: differentiate each output on its own, or eddy.stack them"));
    }
    return as_tensor(out);
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
