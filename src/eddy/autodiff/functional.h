#pragma once
// Function transformations in the style of JAX, built on grad() and jvp levels. They compose to
// any order: grad(grad(grad(f))), jvp of grad (forward-over-reverse), and so on.

#include <functional>
#include <utility>
#include <vector>

#include "eddy/autodiff/forward.h"
#include "eddy/autodiff/tape.h"

namespace eddy {

using Function = std::function<Tensor(const Tensor&)>;
using MultiFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Forward mode: (f(primals), J(primals) * tangents).
std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp(const MultiFunction& f,
                                                         const std::vector<Tensor>& primals,
                                                         const std::vector<Tensor>& tangents);
std::pair<Tensor, Tensor> jvp(const Function& f, const Tensor& primal, const Tensor& tangent);

// Reverse mode: (f(primals), cotangents^T J(primals)).
std::pair<std::vector<Tensor>, std::vector<Tensor>> vjp(const MultiFunction& f,
                                                         const std::vector<Tensor>& primals,
                                                         const std::vector<Tensor>& cotangents);
std::pair<Tensor, Tensor> vjp(const Function& f, const Tensor& primal, const Tensor& cotangent);

// The gradient of a function with a one-element output, as a function.
Function grad(Function f);
// Hessian-vector product by forward-over-reverse.
Tensor hvp(const Function& f, const Tensor& x, const Tensor& v);

enum class JacobianMode { forward, reverse };
// Shape f(x).shape + x.shape. Forward mode costs one jvp per input element, reverse one vjp
// per output element: pick the smaller side. For a complex x forward mode gives df/dz only when f
// is holomorphic (elsewhere, the derivative along the real axis), so it takes a complex x only
// with `holomorphic` set, as JAX's jacfwd does; reverse mode refuses complex values.
Tensor jacobian(const Function& f, const Tensor& x, JacobianMode mode = JacobianMode::reverse,
                bool holomorphic = false);
// Shape x.shape + x.shape, for f with a one-element output (forward-over-reverse).
Tensor hessian(const Function& f, const Tensor& x);

}  // namespace eddy
