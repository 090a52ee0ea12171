#include "eddy/compiler/taylor.h"

#include <algorithm>
#include <array>
#include <tuple>

#include "eddy/autodiff/forward.h"
#include "eddy/compiler/trace.h"
#include "eddy/ops/ops.h"

namespace eddy {
namespace {

using compiler::Graph;
using compiler::GraphNode;
using compiler::ValueId;

// Products and sums in which an undefined tensor is the zero it stands for.
Tensor plus(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return add(a, b);
}

Tensor times(const Tensor& a, const Tensor& b) { return a.defined() && b.defined() ? mul(a, b) : Tensor(); }

// A value's expansion along the input coordinates: d first-order coefficients, then one
// second-order coefficient per channel. A channel is the set of coordinates whose pure second
// derivatives it sums: one coordinate for d^2/dx_i^2, several for a collapsed Laplacian. Empty
// when the value does not depend on x. Coefficients broadcast to the value's shape without
// always having it: the input's seeds are [1, d] rows, and rows stay shared for as long as the
// ops allow, which makes the first layer's coefficients single rows.
struct Jet {
  std::vector<Tensor> coefficients;
};

using Channels = std::vector<std::vector<int64_t>>;

// A coefficient shaped for input `position` of `p`. A broadcast row gives the right answer where
// every output row depends only on the same row of that input (elementwise ops, matmul's left
// operand), a broadcast column where every output column depends only on the same column
// (matmul's right operand); elsewhere the op sees the coefficient at the input's shape, as a
// broadcast view.
Tensor fit(const Primitive& p, size_t position, const Tensor& coefficient, const Tensor& input) {
  if (p.elementwise || coefficient.shape() == input.shape()) return coefficient;
  // A matrix product's output row i depends on row i of its left operand alone.
  if (p.cost == CostClass::gemm && position == 0 && coefficient.dim() == input.dim() &&
      coefficient.shape().back() == input.shape().back()) {
    return coefficient;
  }
  // And its output column j on column j of its right operand alone (feature-major layers).
  if (p.cost == CostClass::gemm && position == 1 && coefficient.dim() == input.dim() && coefficient.dim() >= 2 &&
      coefficient.shape()[coefficient.dim() - 2] == input.shape()[input.dim() - 2]) {
    return coefficient;
  }
  // An op that only moves axes moves a broadcast axis with the others: the seed row of the points
  // [N, d] turns into a column of the feature-major layers [d, N], and the first layer's
  // coefficients stay [width, 1] instead of [width, N] (on distributed points, where N is the
  // global count, that expansion was every rank computing them for all the points).
  if (p.moves_axes && coefficient.dim() == input.dim()) return coefficient;
  return expand(coefficient, input.shape());
}

// First and second partial derivatives of an elementwise primitive at its inputs, with respect
// to the inputs listed in `moving`; undefined where zero. They come from the primitive's
// second-order rule where it has one, else from its tangent rule: the rule at a unit tangent is
// the first partial, and running it once more with an input moving at unit speed (a forward
// level) gives the second.
struct Partials {
  std::vector<Tensor> first;
  std::vector<std::vector<Tensor>> second;
};

Partials partials(const Primitive& p, Inputs values, const Attrs& attrs, const Tensor& output,
                  const std::vector<size_t>& moving) {
  const Tensor one = scalar(1.0, output.dtype(), output.device());
  Partials result{std::vector<Tensor>(moving.size()),
                  std::vector<std::vector<Tensor>>(moving.size(), std::vector<Tensor>(moving.size()))};
  if (p.derivatives) {
    std::tie(result.first[0], result.second[0][0]) = p.derivatives(values[0], output);
    return result;
  }
  if (p.jvp_from_output) {
    // Unary, with a rule in terms of y = f(x): y moves at speed f'(x) when x moves at unit speed.
    const Tensor slope = p.jvp_from_output(values, attrs, output, one);
    ForwardLevel level;
    const std::array<Tensor, 1> moved{with_tangent(values[0], level.id(), one)};
    const Tensor again = p.jvp_from_output(moved, attrs, with_tangent(output, level.id(), slope), one);
    result.first[0] = slope;
    result.second[0][0] = tangent_at(again, level.id());
    return result;
  }
  for (size_t a = 0; a < moving.size(); ++a) {
    for (size_t b = 0; b < moving.size(); ++b) {
      ForwardLevel level;
      std::vector<Tensor> moved(values.begin(), values.end());
      moved[moving[b]] = with_tangent(values[moving[b]], level.id(), one);
      const Tensor slope = p.jvp(moved, attrs, static_cast<int>(moving[a]), one);
      if (a == b) result.first[a] = without_tangent(slope, level.id());
      result.second[a][b] = tangent_at(slope, level.id());
    }
  }
  return result;
}

// Maps the jets of a node's inputs to the jet of its output. `jets[i]` is null when input i
// does not move with x.
class Rules {
 public:
  Rules(const Channels& channels, int64_t coordinates) : channels_(channels), coordinates_(coordinates) {}

  Jet apply(const GraphNode& node, Inputs values, const std::vector<const Jet*>& jets, const Tensor& output) const {
    const Primitive& p = *node.primitive;
    const bool moves = std::any_of(jets.begin(), jets.end(), [](const Jet* jet) { return jet != nullptr; });
    if (!moves || !is_inexact(output.dtype())) return {};
    // No tangent rule means a zero derivative (comparisons, sign), unless reverse rules say
    // otherwise: then the jet is not zero but unknown.
    if (!p.jvp) {
      if (p.has_vjp()) throw Error(cat("taylor_jets: no Taylor rule for ", p.name, "; use nested reverse mode"));
      return {};
    }
    Jet jet;
    if (p.linear) {
      jet = linear(p, values, node.attrs, jets);
    } else if (p.bilinear) {  // y = a b gives y'' = a'' b + a b'' + 2 a' b'

      jet = bilinear(p, values, node.attrs, jets);
    } else if (p.elementwise) {
      jet = elementwise(p, values, node.attrs, jets, output);
    } else {
      throw Error(cat("taylor_jets: no Taylor rule for ", p.name, "; use nested reverse mode"));
    }
    const bool zero = std::none_of(jet.coefficients.begin(), jet.coefficients.end(),
                                   [](const Tensor& c) { return c.defined(); });
    return zero ? Jet{} : jet;
  }

 private:
  size_t slots() const { return static_cast<size_t>(coordinates_) + channels_.size(); }
  size_t channel_slot(size_t channel) const { return static_cast<size_t>(coordinates_) + channel; }

  // Every coefficient through each moving input's tangent rule: the whole rule for linear
  // primitives, the terms with one moving factor for bilinear ones.
  Jet linear(const Primitive& p, Inputs values, const Attrs& attrs, const std::vector<const Jet*>& jets) const {
    Jet out{std::vector<Tensor>(slots())};
    for (size_t i = 0; i < jets.size(); ++i) {
      if (!jets[i]) continue;
      for (size_t s = 0; s < slots(); ++s) {
        const Tensor& c = jets[i]->coefficients[s];
        if (!c.defined()) continue;
        out.coefficients[s] = plus(out.coefficients[s], p.jvp(values, attrs, static_cast<int>(i), fit(p, i, c, values[i])));
      }
    }
    return out;
  }

  Jet bilinear(const Primitive& p, Inputs values, const Attrs& attrs, const std::vector<const Jet*>& jets) const {
    Jet out = linear(p, values, attrs, jets);
    if (!jets[0] || !jets[1]) return out;
    const std::vector<Tensor> cross = per_channel([&](int64_t k) -> Tensor {
      const Tensor &a = jets[0]->coefficients[k], &b = jets[1]->coefficients[k];
      if (!a.defined() || !b.defined()) return {};
      return dispatch(p, {fit(p, 0, a, values[0]), fit(p, 1, b, values[1])});
    });
    for (size_t c = 0; c < channels_.size(); ++c) {
      if (cross[c].defined()) out.coefficients[channel_slot(c)] = plus(out.coefficients[channel_slot(c)], 2.0 * cross[c]);
    }
    return out;
  }

  // Scalar calculus: y' = sum_a f_a x_a', y'' = sum_a f_a x_a'' + sum_ab f_ab x_a' x_b'.
  Jet elementwise(const Primitive& p, Inputs values, const Attrs& attrs, const std::vector<const Jet*>& jets,
                  const Tensor& output) const {
    std::vector<size_t> moving;
    for (size_t i = 0; i < jets.size(); ++i) {
      if (jets[i]) moving.push_back(i);
    }
    const Partials d = partials(p, values, attrs, output, moving);
    auto coefficient = [&](size_t a, size_t slot) -> const Tensor& { return jets[moving[a]]->coefficients[slot]; };
    Jet out{std::vector<Tensor>(slots())};
    for (size_t s = 0; s < slots(); ++s) {
      for (size_t a = 0; a < moving.size(); ++a) out.coefficients[s] = plus(out.coefficients[s], times(d.first[a], coefficient(a, s)));
    }
    for (size_t a = 0; a < moving.size(); ++a) {
      for (size_t b = 0; b < moving.size(); ++b) {
        if (!d.second[a][b].defined()) continue;
        const std::vector<Tensor> products = per_channel([&](int64_t k) {
          return times(coefficient(a, static_cast<size_t>(k)), coefficient(b, static_cast<size_t>(k)));
        });
        for (size_t c = 0; c < channels_.size(); ++c) {
          out.coefficients[channel_slot(c)] = plus(out.coefficients[channel_slot(c)], times(d.second[a][b], products[c]));
        }
      }
    }
    return out;
  }

  // For each channel, the sum of term(k) over its coordinates; each term is computed once.
  std::vector<Tensor> per_channel(const std::function<Tensor(int64_t)>& term) const {
    std::vector<Tensor> terms(static_cast<size_t>(coordinates_));
    std::vector<bool> known(terms.size(), false);
    std::vector<Tensor> sums;
    for (const std::vector<int64_t>& channel : channels_) {
      Tensor total;
      for (int64_t k : channel) {
        if (!known[k]) {
          terms[k] = term(k);
          known[k] = true;
        }
        total = plus(total, terms[k]);
      }
      sums.push_back(total);
    }
    return sums;
  }

  const Channels& channels_;
  int64_t coordinates_;
};

void check_coordinates(const std::vector<int64_t>& coordinates, int64_t count, const char* what) {
  for (size_t i = 0; i < coordinates.size(); ++i) {
    EDDY_CHECK(coordinates[i] >= 0 && coordinates[i] < count, "taylor_jets: ", what, " ", coordinates[i],
               " is not a coordinate of the ", count, "-column input (0..", count - 1, ")");
    EDDY_CHECK(std::find(coordinates.begin(), coordinates.begin() + static_cast<std::ptrdiff_t>(i), coordinates[i]) ==
                   coordinates.begin() + static_cast<std::ptrdiff_t>(i),
               "taylor_jets: ", what, " ", coordinates[i], " is listed twice");
  }
}

void check_input(const Tensor& x, const TaylorOptions& options) {
  EDDY_CHECK(x.defined(), "taylor_jets: x is an undefined tensor");
  EDDY_CHECK(x.dim() == 2 && x.shape()[1] > 0, "taylor_jets: x must be [N, d] points with d > 0, got shape ",
             x.shape());
  EDDY_CHECK(is_floating(x.dtype()), "taylor_jets: x must be float32 or float64, got ", x.dtype());
  check_coordinates(options.second_coordinates, x.shape()[1], "second coordinate");
  check_coordinates(options.laplacian_coordinates, x.shape()[1], "Laplacian coordinate");
}

Graph capture(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  return compiler::trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0])}; }, {x}).graph;
}

// What to carry: a channel per requested second derivative, then the collapsed Laplacian unless
// those channels already hold all its coordinates, in which case it is their sum.
struct Plan {
  Channels channels;
  std::vector<int64_t> laplacian_coordinates;
  bool laplacian_from_seconds = false;
};

Plan plan_for(const TaylorOptions& options, int64_t d) {
  Plan plan;
  for (int64_t i : options.second_coordinates) plan.channels.push_back({i});
  plan.laplacian_coordinates = options.laplacian_coordinates;
  if (plan.laplacian_coordinates.empty()) {
    for (int64_t i = 0; i < d; ++i) plan.laplacian_coordinates.push_back(i);
  }
  const std::vector<int64_t>& seconds = options.second_coordinates;
  plan.laplacian_from_seconds =
      std::all_of(plan.laplacian_coordinates.begin(), plan.laplacian_coordinates.end(),
                  [&](int64_t i) { return std::find(seconds.begin(), seconds.end(), i) != seconds.end(); });
  if (options.laplacian && !plan.laplacian_from_seconds) plan.channels.push_back(plan.laplacian_coordinates);
  return plan;
}

// Runs the graph on x carrying jets, and returns the output's value and jet. Values and jets are
// dropped after their last use, so memory stays that of one pass.
std::pair<Tensor, Jet> run(const Graph& graph, const Tensor& x, const Channels& channels) {
  const int64_t d = x.shape()[1];
  std::vector<Tensor> values(graph.values.size());
  std::vector<Jet> jets(graph.values.size());
  const ValueId input = graph.inputs.at(0);
  values[input] = x;
  std::vector<Tensor>& seeds = jets[input].coefficients;
  seeds.resize(static_cast<size_t>(d) + channels.size());
  const Tensor identity = eye(d, x.dtype(), x.device());
  for (int64_t i = 0; i < d; ++i) seeds[i] = slice(identity, 0, i, i + 1);
  for (const compiler::CapturedTensor& entry : graph.captured) values[entry.id] = entry.tensor;

  std::vector<int> uses = graph.use_counts();
  const Rules rules(channels, d);
  for (const GraphNode& node : graph.nodes) {
    std::vector<Tensor> in;
    std::vector<const Jet*> in_jets;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ValueId id = node.inputs[i];
      in.push_back(values[id]);
      const bool moves = !jets[id].coefficients.empty() && node.primitive->differentiable_input(static_cast<int>(i));
      in_jets.push_back(moves ? &jets[id] : nullptr);
    }
    Tensor out = dispatch(*node.primitive, in, node.attrs);
    jets[node.output] = rules.apply(node, in, in_jets, out);
    values[node.output] = std::move(out);
    for (ValueId id : node.inputs) {
      if (--uses[id] == 0) {
        values[id] = Tensor();
        jets[id] = Jet();
      }
    }
  }
  const ValueId output = graph.outputs.at(0);
  return {values[output], jets[output]};
}

TaylorJets propagate(const Graph& graph, const Tensor& x, const TaylorOptions& options) {
  const Shape& output_shape = graph.value(graph.outputs.at(0)).shape;
  EDDY_CHECK(output_shape.size() == 2 && output_shape[0] == x.shape()[0], "taylor_jets: f must map [N, d] = ",
             x.shape(), " points to [N, k] values, got shape ", output_shape);
  const int64_t d = x.shape()[1];
  const Plan plan = plan_for(options, d);
  // Not a structured binding: the lambda below captures both, which clang before 16 (the fuzz
  // build's Debian clang 14) refuses.
  const std::pair<Tensor, Jet> ran = run(graph, x, plan.channels);
  const Tensor& value = ran.first;
  const Jet& jet = ran.second;

  auto full = [&](size_t slot) {
    if (jet.coefficients.empty() || !jet.coefficients[slot].defined()) return zeros_like(value);
    const Tensor& c = jet.coefficients[slot];
    return c.shape() == value.shape() ? c : expand(c, value.shape());
  };
  TaylorJets result{value, {}, {}, {}};
  for (size_t slot = 0; slot < plan.channels.size() + static_cast<size_t>(d); ++slot) {
    (slot < static_cast<size_t>(d) ? result.first : result.second).push_back(full(slot));
  }
  if (!options.laplacian) return result;
  if (!plan.laplacian_from_seconds) {
    result.laplacian = result.second.back();
    result.second.pop_back();
    return result;
  }
  const std::vector<int64_t>& seconds = options.second_coordinates;
  for (int64_t i : plan.laplacian_coordinates) {
    const auto position = std::find(seconds.begin(), seconds.end(), i) - seconds.begin();
    result.laplacian = plus(result.laplacian, result.second[static_cast<size_t>(position)]);
  }
  return result;
}

}  // namespace

TaylorJets taylor_jets(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, const TaylorOptions& options) {
  check_input(x, options);
  return propagate(capture(f, x), x, options);
}

TaylorOperator::TaylorOperator(std::function<Tensor(const Tensor&)> f, TaylorOptions options)
    : f_(std::move(f)), options_(std::move(options)) {}

TaylorJets TaylorOperator::operator()(const Tensor& x) { return (*this)(x, options_); }

TaylorJets TaylorOperator::operator()(const Tensor& x, const TaylorOptions& options) {
  check_input(x, options);
  auto known = std::find_if(traced_.begin(), traced_.end(), [&](const Traced& t) {
    return t.shape == x.shape() && t.dtype == x.dtype() && t.device == x.device();
  });
  if (known == traced_.end()) {
    traced_.push_back(Traced{x.shape(), x.dtype(), x.device(), capture(f_, x)});
    known = traced_.end() - 1;
  }
  return propagate(known->graph, x, options);
}

}  // namespace eddy
