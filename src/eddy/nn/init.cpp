#include "eddy/nn/init.h"

#include <cmath>

#include "eddy/autodiff/tape.h"
#include "eddy/ops/ops.h"

namespace eddy::nn::init {
namespace {

struct Fans {
  double in, out;
};

// For [in, out] weights; a higher-rank tensor's leading axes count as extra fan-in (as for
// convolution-like kernels), a vector is its own fan.
Fans fans_of(const Tensor& w, std::string_view op) {
  EDDY_CHECK(w.dim() >= 1 && w.numel() > 0, op, ": needs a non-empty tensor, got shape ", w.shape());
  if (w.dim() == 1) return {double(w.shape()[0]), double(w.shape()[0])};
  const double out = double(w.shape().back());
  return {double(w.numel()) / out, out};
}

thread_local bool skipping_random_initialisation = false;

void fill_uniform(Tensor& w, Generator& g, double bound) {
  NoGradGuard no_grad;
  if (skipping_random_initialisation) {
    w.fill_(0.0);
    return;
  }
  w.copy_((2.0 * rand(w.shape(), w.dtype(), &g) - 1.0) * bound);
}

void fill_normal(Tensor& w, Generator& g, double stddev) {
  NoGradGuard no_grad;
  if (skipping_random_initialisation) {
    w.fill_(0.0);
    return;
  }
  w.copy_(randn(w.shape(), w.dtype(), &g) * stddev);
}

}  // namespace

void xavier_uniform(Tensor& w, Generator& g, double gain) {
  Fans f = fans_of(w, "xavier_uniform");
  fill_uniform(w, g, gain * std::sqrt(6.0 / (f.in + f.out)));
}

void xavier_normal(Tensor& w, Generator& g, double gain) {
  Fans f = fans_of(w, "xavier_normal");
  fill_normal(w, g, gain * std::sqrt(2.0 / (f.in + f.out)));
}

void kaiming_uniform(Tensor& w, Generator& g, double gain) {
  Fans f = fans_of(w, "kaiming_uniform");
  fill_uniform(w, g, gain * std::sqrt(3.0 / f.in));
}

void kaiming_normal(Tensor& w, Generator& g, double gain) {
  Fans f = fans_of(w, "kaiming_normal");
  fill_normal(w, g, gain / std::sqrt(f.in));
}

void normal(Tensor& t, Generator& g, double stddev) {
  EDDY_CHECK(stddev >= 0, "normal: stddev must be non-negative, got ", stddev);
  fill_normal(t, g, stddev);
}

void zeros(Tensor& t) { constant(t, 0.0); }

void constant(Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
}

SkipRandomInitialisation::SkipRandomInitialisation() : was_skipping_(skipping_random_initialisation) {
  skipping_random_initialisation = true;
}

SkipRandomInitialisation::~SkipRandomInitialisation() { skipping_random_initialisation = was_skipping_; }

}  // namespace eddy::nn::init
