#pragma once
// The normalisation of LayerNorm and RMSNorm over the last axis, before their scale and shift,
// as one primitive each. Composed, a LayerNorm is nine ops (two means, the centring, the square,
// eps, the root, the division, the scale, the shift), each a dispatch, an output and a pass over
// the rows; one token of the language-model example's decoding ran thirteen of them, about a
// tenth of an int4 token (docs/lm.md, "Quantised inference"). The rules are written in ops, so
// derivatives of any order exist; devices without the kernel (Backend::has: all but the CPU yet)
// and dtypes other than float32 and float64 take the composed form.

#include "eddy/core/tensor.h"

namespace eddy::nn {

// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) along the last axis: the biased variance, as
// PyTorch's LayerNorm. The primitive `layer_normalize`.
Tensor layer_normalize(const Tensor& x, double eps);
// x / sqrt(mean(x^2) + eps) along the last axis (Zhang & Sennrich 2019). The primitive
// `rms_normalize`.
Tensor rms_normalize(const Tensor& x, double eps);

// The same in ops (mean, square, sqrt, division): the reference the primitives are tested against.
Tensor composed_layer_normalize(const Tensor& x, double eps);
Tensor composed_rms_normalize(const Tensor& x, double eps);

}  // namespace eddy::nn
