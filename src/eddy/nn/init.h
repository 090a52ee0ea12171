#pragma once
// Weight initialisers. Each fills a tensor in place from an explicit Generator, so a seed gives
// the same weights on any thread count. Fan-in and fan-out follow eddy's [in, out] weight layout.

#include "eddy/core/rng.h"
#include "eddy/core/tensor.h"

namespace eddy::nn::init {

// Glorot & Bengio (2010): U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform(Tensor& weight, Generator& generator, double gain = 1.0);
// N(0, gain^2 * 2 / (fan_in + fan_out)).
void xavier_normal(Tensor& weight, Generator& generator, double gain = 1.0);
// He et al. (2015), for ReLU-like layers: U(-b, b), b = gain * sqrt(3 / fan_in), gain sqrt(2).
void kaiming_uniform(Tensor& weight, Generator& generator, double gain = 1.4142135623730951);
// N(0, gain^2 / fan_in).
void kaiming_normal(Tensor& weight, Generator& generator, double gain = 1.4142135623730951);
// N(0, stddev^2) regardless of shape: GPT-2 and Llama initialise weights this way (std 0.02).
void normal(Tensor& tensor, Generator& generator, double stddev);
void zeros(Tensor& tensor);
void constant(Tensor& tensor, double value);

// Within its scope, on this thread, the random initialisers above fill zeros and draw nothing: for
// a model built only to have every parameter loaded from a file (`eddy lm generate`, `quantize`,
// `export`, `eddy.lm.load`), where the draws were a third of the load time.
class SkipRandomInitialisation {
 public:
  SkipRandomInitialisation();
  ~SkipRandomInitialisation();
  SkipRandomInitialisation(const SkipRandomInitialisation&) = delete;
  SkipRandomInitialisation& operator=(const SkipRandomInitialisation&) = delete;

 private:
  bool was_skipping_;
};

}  // namespace eddy::nn::init
