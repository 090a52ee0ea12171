// Function transformations: jvp, vjp, grad, hvp, jacobian and hessian.

#include "eddy/autodiff/functional.h"

#include "eddy/core/distribution.h"
#include "eddy/ops/ops.h"

namespace eddy {
namespace {

void check_matching(std::string_view op, const Tensor& primal, const Tensor& other,
                    std::string_view what, size_t i) {
  EDDY_CHECK(other.defined(), op, ": ", what, " ", i, " is undefined");
  EDDY_CHECK(other.shape() == primal.shape(), op, ": ", what, " ", i, " has shape ", other.shape(),
             " but its ", what == "cotangent" ? "output" : "primal", " has shape ", primal.shape());
}

// An integer or bool primal has no derivatives: forward mode cast its tangent to the integers (0.5
// became 0), and reverse mode failed in requires_grad_, naming neither the transformation nor the
// argument.
void require_differentiable(std::string_view transformation, const Tensor& primal, size_t index) {
  EDDY_CHECK(is_inexact(primal.dtype()), transformation, ": primal ", index, " is ", primal.dtype(), " (grad, jacobian, "
             "hessian and hvp differentiate through vjp and jvp); derivatives are taken with respect to floating or "
             "complex values: cast it (cast(x, float64)) before the function");
}

// A fresh differentiation target standing for `x`: a new leaf when x is a constant (keeping its
// forward tangents, for forward-over-reverse), and a recorded identity of x otherwise, so an
// outer grad still sees through it (grad of grad).
Tensor as_target(const Tensor& x) {
  // A distributed tensor's derivatives are those of its local part (core/distribution.h).
  if (const Distribution* layout = distribution_of(x); layout && !x.requires_grad()) {
    Tensor target = with_local(x, as_target(layout->local));
    // Its tangents ride on it, not on the local part, and would otherwise be lost here; grad
    // then refuses to run a backward pass under them (autodiff/backward.cpp).
    target.impl()->tangents = x.impl()->tangents;
    return target;
  }
  if (!x.requires_grad()) {
    Tensor leaf = shallow_alias(x);
    leaf.impl()->autograd.reset();
    return leaf.requires_grad_();
  }
  return squeeze(unsqueeze(x, 0), 0);
}

}  // namespace

std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp(const MultiFunction& f,
                                                         const std::vector<Tensor>& primals,
                                                         const std::vector<Tensor>& tangents) {
  EDDY_CHECK(primals.size() == tangents.size(), "jvp: ", primals.size(), " primals but ",
             tangents.size(), " tangents");
  ForwardLevel level;
  std::vector<Tensor> duals;
  for (size_t i = 0; i < primals.size(); ++i) {
    check_matching("jvp", primals[i], tangents[i], "tangent", i);
    require_differentiable("jvp", primals[i], i);
    duals.push_back(
        with_tangent(primals[i], level.id(), direction_for(primals[i], tangents[i], cat("jvp: tangent ", i))));
  }
  std::vector<Tensor> outputs = f(duals);
  std::vector<Tensor> output_tangents;
  for (Tensor& out : outputs) {
    Tensor tangent = tangent_at(out, level.id());
    output_tangents.push_back(tangent.defined() ? tangent : zeros_like(out));
    out = without_tangent(out, level.id());
  }
  return {outputs, output_tangents};
}

std::pair<Tensor, Tensor> jvp(const Function& f, const Tensor& primal, const Tensor& tangent) {
  auto [outs, tans] = jvp([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; },
                          {primal}, {tangent});
  return {outs[0], tans[0]};
}

std::pair<std::vector<Tensor>, std::vector<Tensor>> vjp(const MultiFunction& f,
                                                         const std::vector<Tensor>& primals,
                                                         const std::vector<Tensor>& cotangents) {
  std::vector<Tensor> targets, outputs;
  {
    GradModeGuard recording(true);
    for (size_t i = 0; i < primals.size(); ++i) {
      require_differentiable("vjp", primals[i], i);
      targets.push_back(as_target(primals[i]));
    }
    outputs = f(targets);
  }
  // The result must stay differentiable when an outer transformation differentiates it again:
  // through the primals, the cotangents, or a tensor `f` reads besides them (a closure's weights;
  // looking at the primals alone, grad of x * grad(y -> x * y) came out 2 and not 4).
  bool outer_graph = depends_on_leaves_other_than(outputs, targets);
  for (const Tensor& x : primals) outer_graph = outer_graph || x.requires_grad();
  for (const Tensor& c : cotangents) outer_graph = outer_graph || (c.defined() && c.requires_grad());
  const bool create_graph = GradMode::enabled() && outer_graph;
  // No cotangents: ones, for functions with one-element outputs (as in grad).
  EDDY_CHECK(cotangents.empty() || cotangents.size() == outputs.size(), "vjp: ",
             cotangents.size(), " cotangents for ", outputs.size(), " outputs");
  // In the outputs' dtypes here, under vjp's names, so that grad takes them as they are.
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < cotangents.size(); ++i) {
    check_matching("vjp", outputs[i], cotangents[i], "cotangent", i);
    seeds.push_back(direction_for(outputs[i], cotangents[i], cat("vjp: cotangent ", i)));
  }
  for (size_t i = 0; cotangents.empty() && i < outputs.size(); ++i) {
    EDDY_CHECK(!outputs[i].defined() || outputs[i].numel() == 1, "vjp: output ", i, " has shape ",
               outputs[i].shape(), "; pass cotangents for outputs with more than one element");
  }
  std::vector<Tensor> grads = grad(outputs, targets, seeds, create_graph);
  if (!create_graph) {
    for (Tensor& out : outputs) out = out.detach();
  }
  return {outputs, grads};
}

std::pair<Tensor, Tensor> vjp(const Function& f, const Tensor& primal, const Tensor& cotangent) {
  auto [outs, grads] = vjp([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; },
                           {primal}, {cotangent});
  return {outs[0], grads[0]};
}

Function grad(Function f) {
  return [f](const Tensor& x) {
    Tensor probe;
    auto [outs, grads] = vjp(
        [&](const std::vector<Tensor>& xs) {
          probe = f(xs[0]);
          EDDY_CHECK(probe.numel() == 1, "grad: the function returned shape ", probe.shape(),
                     "; grad needs a one-element output (use vjp or jacobian otherwise)");
          return std::vector<Tensor>{probe};
        },
        {x}, {});
    return grads[0];
  };
}

Tensor hvp(const Function& f, const Tensor& x, const Tensor& v) {
  const Tensor direction = direction_for(x, v, "hvp: the direction v");
  if (!is_distributed(x) && !is_distributed(v)) return jvp(grad(f), x, direction).second;
  // Forward over reverse loses the tangent in a backward pass over distributed tensors (their
  // ranks' local parts carry none), so these take the gradient of <grad f, v> instead.
  return grad([&](const Tensor& y) { return sum(grad(f)(y) * direction); })(x);
}

Tensor jacobian(const Function& f, const Tensor& x, JacobianMode mode, bool holomorphic) {
  const int64_t n = x.numel();
  Shape out_shape;
  std::vector<Tensor> columns;
  // Directions are rows of an identity, built with ops (not written in place), so a jacobian
  // inside a captured function is captured too.
  if (mode == JacobianMode::forward) {
    // Along real directions only: conj(z) came back with derivative 1, where df/dz is 0.
    EDDY_CHECK(!is_complex(x.dtype()) || holomorphic, "jacobian: forward mode on a ", x.dtype(), " input gives df/dz "
               "only for a holomorphic f (conj, abs and real are not); set holomorphic to say f is one, as JAX's "
               "jacfwd asks");
    const Tensor basis = eye(n, x.dtype(), x.device());
    for (int64_t i = 0; i < n; ++i) {
      auto [out, tangent] = jvp(f, x, reshape(slice(basis, 0, i, i + 1), x.shape()));
      out_shape = out.shape();
      columns.push_back(flatten(tangent));
    }
    // With no direction to push, f is evaluated once for its output's shape: the result lacked
    // that part of out + x (jacfwd of an input of 0 elements).
    if (n == 0) out_shape = f(x.detach()).shape();
    // columns[i] holds d out / d x_i: stack on the last axis, then shape out + x.
    Shape shape = out_shape;
    shape.insert(shape.end(), x.shape().begin(), x.shape().end());
    if (n == 0) return zeros(shape, x.dtype(), x.device());
    return reshape(stack(columns, 1), shape);
  }
  Tensor out = f(x.detach());
  // A complex row of cotangents gives conj(J) rows, and a real input keeps only their real part:
  // reverse mode would return neither J nor an error (JAX and PyTorch refuse too).
  EDDY_CHECK(!is_complex(x.dtype()) && !is_complex(out.dtype()), "jacobian: reverse mode needs real values, got a ",
             x.dtype(), " input and a ", out.dtype(), " output; forward mode gives the complex derivative df/dz of a ",
             "holomorphic function");
  // Its cotangent rows are ordinary tensors, which a distributed output's backward refuses (the
  // error named a grad_outputs the caller never passed).
  EDDY_CHECK(!is_distributed(out) && !is_distributed(x), "jacobian: reverse mode of a distributed function is not "
             "supported; forward mode (mode=\"forward\" in Python) gives its jacobian");
  const int64_t m = out.numel();
  const Tensor basis = eye(m, out.dtype(), out.device());
  for (int64_t j = 0; j < m; ++j) {
    auto [value, row] = vjp(f, x, reshape(slice(basis, 0, j, j + 1), out.shape()));
    columns.push_back(flatten(row));
  }
  Shape shape = out.shape();
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  if (m == 0) return zeros(shape, x.dtype(), x.device());
  return reshape(stack(columns, 0), shape);
}

Tensor hessian(const Function& f, const Tensor& x) {
  // grad of a complex input is conj(df/dz) by PyTorch's convention, not holomorphic, so forward
  // mode over it would not give the real Hessian in the real and imaginary parts.
  EDDY_CHECK(!is_complex(x.dtype()), "hessian: needs a real input, got ", x.dtype(), " with shape ", x.shape(),
             "; take the real and imaginary parts as a real input of twice the size");
  if (!is_distributed(x)) return jacobian(grad(f), x, JacobianMode::forward);
  // Reverse over reverse for a distributed input, as hvp takes it: row i is the product with the
  // i-th direction (the Hessian being symmetric).
  const int64_t n = x.numel();
  Shape shape = x.shape();
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  if (n == 0) return zeros(shape, x.dtype(), x.device());
  const Tensor basis = eye(n, x.dtype(), x.device());
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(flatten(hvp(f, x, reshape(slice(basis, 0, i, i + 1), x.shape()))));
  return reshape(stack(rows, 0), shape);
}

}  // namespace eddy
