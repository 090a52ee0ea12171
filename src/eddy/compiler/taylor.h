#pragma once
// Taylor mode: the value, the first derivatives and chosen pure second derivatives (or their
// collapsed sum, the Laplacian) of a pointwise function, in one forward pass over its captured
// graph. Every value carries a truncated Taylor expansion along each input coordinate; each
// primitive maps the expansions of its inputs to that of its output by the forward-Laplacian
// rules (Li et al., 2023, "Forward Laplacian") and collapsed Taylor mode (Dangel et al., 2024),
// which sum second-order coefficients as they go instead of carrying one per coordinate.
//
// The rules are eddy ops, so the results stay differentiable: reverse mode through them gives
// the weight gradient of a PDE residual, which is what PINN training needs. For the same reason
// a training step that calls taylor_jets can be compile()d whole, which fuses the rules' work.

#include <cstdint>
#include <functional>
#include <vector>

#include "eddy/compiler/graph.h"

namespace eddy {

struct TaylorOptions {
  // Coordinates i whose pure second derivative d^2 f / d x_i^2 is wanted on its own.
  std::vector<int64_t> second_coordinates;
  // The Laplacian over laplacian_coordinates (every coordinate when that list is empty), carried
  // as one collapsed coefficient, or summed from `second` when those hold all its coordinates.
  bool laplacian = false;
  std::vector<int64_t> laplacian_coordinates;
};

// For f: [N, d] -> [N, k] and points x: [N, d]; every tensor is [N, k].
struct TaylorJets {
  Tensor value;
  std::vector<Tensor> first;   // d f / d x_i for each of the d coordinates
  std::vector<Tensor> second;  // d^2 f / d x_i^2 for each entry of options.second_coordinates
  Tensor laplacian;            // when options.laplacian
};

// f must be pointwise (row n of its output depends only on row n of x) and built from
// primitives with Taylor rules: linear ones, elementwise ones, mul and matmul. Anything else is
// an eddy::Error naming the primitive. Traces f once per call; TaylorOperator keeps the trace.
TaylorJets taylor_jets(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                       const TaylorOptions& options = {});

// taylor_jets with the traced graph kept per input shape, dtype and device, so that repeated
// calls (training steps) trace once. The graph reads the tensors f captured (its weights) by
// reference, so in-place optimiser updates are seen; f must compute the same graph on every
// call with a given input shape.
class TaylorOperator {
 public:
  explicit TaylorOperator(std::function<Tensor(const Tensor&)> f, TaylorOptions options = {});
  TaylorJets operator()(const Tensor& x);
  // With other derivatives than the constructor's: the trace depends only on f and x, so callers
  // whose needs vary (a PINN's conditions) share it.
  TaylorJets operator()(const Tensor& x, const TaylorOptions& options);

 private:
  struct Traced {
    Shape shape;
    DType dtype;
    Device device;
    compiler::Graph graph;
  };

  std::function<Tensor(const Tensor&)> f_;
  TaylorOptions options_;
  std::vector<Traced> traced_;
};

}  // namespace eddy
