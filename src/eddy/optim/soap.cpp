#include "eddy/optim/soap.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "eddy/autodiff/tape.h"
#include "eddy/core/distribution.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/symmetric_eigen.h"

namespace eddy::optim {
namespace {

// Q_L^T X Q_R; an undefined basis is the identity (a side that is not rotated).
Tensor to_eigenbasis(Tensor x, const Tensor& left, const Tensor& right) {
  if (left.defined()) x = matmul(transpose(left), x);
  if (right.defined()) x = matmul(x, right);
  return x;
}

// Q_L X Q_R^T, the inverse of to_eigenbasis.
Tensor from_eigenbasis(Tensor x, const Tensor& left, const Tensor& right) {
  if (left.defined()) x = matmul(left, x);
  if (right.defined()) x = matmul(x, transpose(right));
  return x;
}

// The order that ranks the columns q_k of `basis` by q_k^T F q_k, ascending, as LAPACK ranks the
// eigenvectors of F.
std::vector<int64_t> rank_by_rayleigh_quotient(const Tensor& factor, const Tensor& basis) {
  const std::vector<double> quotients = sum(basis * matmul(factor, basis), {0}).to_vector<double>();
  std::vector<int64_t> order(quotients.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return quotients[a] < quotients[b]; });
  return order;
}

// The eigenvectors of the symmetric `factor` (columns, ascending eigenvalues), where those of its
// numerically zero eigenvalues, of which any orthonormal basis of that space would do, are the
// basis of it closest to columns of `previous` (the orthogonal Procrustes solution), not LAPACK's
// arbitrary one. A factor of a layer with fewer inputs than outputs never has full rank, and with
// LAPACK's choice a last-bit change in a gradient changed SOAP's update by O(1) at a refresh:
// compiled and eager runs, and one rank and several, parted by 1e-2 within a few steps.
std::optional<Tensor> eigenbasis_near(const Tensor& factor, const Tensor& previous) {
  std::optional<Tensor> eigenvectors = symmetric_eigenvectors(factor);
  if (!eigenvectors) return std::nullopt;
  const Tensor vectors = cast(*eigenvectors, DType::f64), f = cast(factor, DType::f64);
  const std::vector<double> values = sum(vectors * matmul(f, vectors), {0}).to_vector<double>();
  const int64_t n = factor.size(0);
  // Below sqrt(eps) of the largest eigenvalue, rounding in the factor's dtype decides the
  // eigenvectors as much as the factor does: those directions count as the zero eigenspace.
  const double eps = factor.dtype() == DType::f64 ? 2.2e-16 : 1.2e-7;
  const double zero = 4 * static_cast<double>(n) * eps * std::max(std::abs(values.front()), std::abs(values.back()));
  const auto null = static_cast<int64_t>(
      std::find_if(values.begin(), values.end(), [&](double value) { return value > zero; }) - values.begin());
  if (null == 0) return eigenvectors;
  if (null == n) return previous;  // a zero factor: no direction is preferred
  const Tensor kernel = slice(vectors, 1, 0, null), old = cast(previous, DType::f64);
  // The `null` columns of the previous basis that lie most in that space, then the orthonormal
  // basis of the space nearest to their projections: K W with W the polar factor of C = K^T Q_sel.
  const Tensor projections = matmul(transpose(kernel), old);
  const std::vector<double> lengths = sum(square(projections), {0}).to_vector<double>();
  std::vector<int64_t> chosen(static_cast<size_t>(n));
  std::iota(chosen.begin(), chosen.end(), 0);
  std::stable_sort(chosen.begin(), chosen.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  chosen.resize(static_cast<size_t>(null));
  std::sort(chosen.begin(), chosen.end());  // in the previous basis's order
  const Tensor c = index_select(projections, 1, tensor(chosen));
  // polar(C) = C (C^T C)^(-1/2), from the eigendecomposition of C^T C.
  const Tensor gram = matmul(transpose(c), c);
  const std::optional<Tensor> gram_vectors = symmetric_eigenvectors(gram);
  if (!gram_vectors) return eigenvectors;
  const Tensor singular_squares = sum(*gram_vectors * matmul(gram, *gram_vectors), {0});
  const std::vector<double> squares = singular_squares.to_vector<double>();
  if (squares.front() <= 1e-12 * squares.back()) return eigenvectors;  // the chosen columns miss part of the space
  const Tensor inverse_root = matmul(*gram_vectors / sqrt(singular_squares), transpose(*gram_vectors));
  const Tensor aligned = matmul(kernel, matmul(c, inverse_root));
  return cast(concat({aligned, slice(vectors, 1, null, n)}, 1), factor.dtype());
}

}  // namespace

Soap::Soap(std::vector<Tensor> parameters, const SoapOptions& options)
    : Optimizer(std::move(parameters), options.learning_rate, "soap"),
      options_(options),
      shampoo_beta_(options.shampoo_beta.value_or(options.beta2)) {
  check_range(options.beta1, 0, 1, false, name(), "beta1");
  check_range(options.beta2, 0, 1, false, name(), "beta2");
  check_range(shampoo_beta_, 0, 1, false, name(), "shampoo_beta");
  EDDY_CHECK(std::isfinite(options.eps) && options.eps > 0, name(), ": eps must be > 0, got ", options.eps);
  check_range(options.weight_decay, 0, HUGE_VAL, false, name(), "weight_decay");
  EDDY_CHECK(options.precondition_frequency >= 1, name(), ": precondition_frequency must be at least 1, got ",
             options.precondition_frequency);
  EDDY_CHECK(options.max_preconditioner_dimension >= 0, name(),
             ": max_preconditioner_dimension must be >= 0, got ", options.max_preconditioner_dimension);
  for (size_t i = 0; i < this->parameters().size(); ++i) {
    const Tensor& p = this->parameters()[i];
    ParameterState state{zeros_like(p), zeros_like(p), {}, {}};
    if (p.dim() == 2) {
      for (auto [side, n] : {std::pair{&state.left, p.size(0)}, std::pair{&state.right, p.size(1)}}) {
        if (n > options.max_preconditioner_dimension) continue;
        *side = {zeros({n, n}, p.dtype(), p.device()), eye(n, p.dtype(), p.device())};
      }
      EDDY_CHECK(!is_distributed(p) || !(state.left.rotated() || state.right.rotated()), name(), ": parameter ", i,
                 " is a distributed matrix; SOAP's Kronecker factors need the whole matrix");
    }
    states_.push_back(std::move(state));
  }
}

void Soap::step() {
  NoGradGuard no_grad;
  count_step();
  // The first refresh comes after step 1, so that a basis is never computed from the gradient it
  // then rotates (a basis built from G alone would make that step a sign-like one).
  const bool refresh = steps() == 1 || steps() % options_.precondition_frequency == 0;
  for (size_t i = 0; i < parameters().size(); ++i) {
    const Tensor g = parameters()[i].grad();
    if (!g.defined()) continue;
    update(i, g);
    if (refresh) refresh_bases(i);
  }
}

void Soap::update(size_t index, const Tensor& g) {
  ParameterState& s = states_[index];
  Tensor p = parameters()[index];
  const double t = static_cast<double>(steps());
  const double correction1 = 1 - std::pow(options_.beta1, t);
  const double correction2 = 1 - std::pow(options_.beta2, t);
  const double lr = learning_rate();
  if (options_.weight_decay != 0) p.copy_(p * (1 - lr * options_.weight_decay));
  const Tensor rotated = to_eigenbasis(g, s.left.basis, s.right.basis);
  s.m = options_.beta1 * s.m + (1 - options_.beta1) * rotated;
  s.v = options_.beta2 * s.v + (1 - options_.beta2) * square(rotated);
  const Tensor direction = s.m / (sqrt(s.v / correction2) + options_.eps);
  p.copy_(p - (lr / correction1) * from_eigenbasis(direction, s.left.basis, s.right.basis));
  if (s.left.rotated()) s.left.factor = shampoo_beta_ * s.left.factor + (1 - shampoo_beta_) * matmul(g, transpose(g));
  if (s.right.rotated()) {
    s.right.factor = shampoo_beta_ * s.right.factor + (1 - shampoo_beta_) * matmul(transpose(g), g);
  }
}

void Soap::refresh_bases(size_t index) {
  ParameterState& s = states_[index];
  const Tensor old_left = s.left.basis, old_right = s.right.basis;
  for (int64_t axis : {0, 1}) {
    Side& side = axis == 0 ? s.left : s.right;
    if (!side.rotated()) continue;
    // A non-finite factor comes from a non-finite gradient, which has already reached the weights;
    // the basis is kept and the next loss reports the failure.
    std::optional<Tensor> basis = eigenbasis_near(side.factor, side.basis);
    if (!basis) continue;
    // V holds one variance per basis direction, which no rotation carries over. Each new
    // eigenvector inherits the variance of the old basis vector ranked where it ranks by the
    // current factor's Rayleigh quotients, as the authors' implementation does.
    s.v = index_select(s.v, axis, tensor(rank_by_rayleigh_quotient(side.factor, side.basis)));
    side.basis = std::move(*basis);
  }
  // M is a plain matrix in the rotated coordinates: take it back to the parameter's and into the
  // new basis.
  s.m = to_eigenbasis(from_eigenbasis(s.m, old_left, old_right), s.left.basis, s.right.basis);
}

template <typename Self>
auto Soap::entries(Self& self) {
  std::vector<std::pair<std::string, decltype(&self.states_[0].m)>> out;
  for (size_t i = 0; i < self.states_.size(); ++i) {
    auto& s = self.states_[i];
    out.emplace_back(self.key("m", i), &s.m);
    out.emplace_back(self.key("v", i), &s.v);
    if (s.left.rotated()) {
      out.emplace_back(self.key("left", i), &s.left.factor);
      out.emplace_back(self.key("left_basis", i), &s.left.basis);
    }
    if (s.right.rotated()) {
      out.emplace_back(self.key("right", i), &s.right.factor);
      out.emplace_back(self.key("right_basis", i), &s.right.basis);
    }
  }
  return out;
}

nn::StateDict Soap::state_dict() const {
  nn::StateDict state;
  save_steps(state);
  for (const auto& [key, tensor] : entries(*this)) state[key] = copy_of(*tensor);
  return state;
}

void Soap::load_state_dict(const nn::StateDict& state) {
  state_entry(state, name() + ".step", {}, DType::i64);
  const auto all = entries(*this);
  for (size_t i = 0; i < states_.size(); ++i) {
    check_moment(state_entry(state, key("m", i), states_[i].m.shape(), states_[i].m.dtype()), key("m", i), false);
    check_moment(state_entry(state, key("v", i), states_[i].v.shape(), states_[i].v.dtype()), key("v", i), true);
  }
  for (const auto& [key, tensor] : all) state_entry(state, key, tensor->shape(), tensor->dtype());
  load_steps(state);
  for (const auto& [key, tensor] : all) *tensor = copy_of(state.at(key));
}

}  // namespace eddy::optim
