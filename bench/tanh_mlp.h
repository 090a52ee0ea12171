#pragma once
// The PINN benchmarks' network: a tanh MLP with Xavier-like weights and zero biases, all
// gradient leaves, with the same seed in every run.

#include <cmath>
#include <vector>

#include "eddy/eddy.h"

namespace eddy_bench {

class TanhMlp {
 public:
  TanhMlp(const std::vector<int64_t>& widths, eddy::DType dtype) {
    eddy::Generator generator(0);
    for (size_t l = 0; l + 1 < widths.size(); ++l) {
      const double scale = std::sqrt(1.0 / static_cast<double>(widths[l]));  // Xavier-like
      weights_.push_back((eddy::randn({widths[l], widths[l + 1]}, dtype, &generator) * scale)
                             .detach()
                             .requires_grad_());
      biases_.push_back(eddy::zeros({widths[l + 1]}, dtype).requires_grad_());
    }
  }

  eddy::Tensor operator()(const eddy::Tensor& input) const {
    eddy::Tensor hidden = input;
    for (size_t l = 0; l < weights_.size(); ++l) {
      hidden = eddy::matmul(hidden, weights_[l]) + biases_[l];
      if (l + 1 < weights_.size()) hidden = eddy::tanh(hidden);
    }
    return hidden;
  }

  std::vector<eddy::Tensor> parameters() const {
    std::vector<eddy::Tensor> all = weights_;
    all.insert(all.end(), biases_.begin(), biases_.end());
    return all;
  }

 private:
  std::vector<eddy::Tensor> weights_, biases_;
};

}  // namespace eddy_bench
