#pragma once
// The spectral convolution at the heart of Fourier neural operators (Li et al., ICLR 2021):
// transform, keep the lowest modes, mix channels with complex weights per mode, transform back.
// A composite of eddy ops, so it is differentiable to any order.

#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::fft {

// x: [batch, in_channels, n_1, ..., n_d] real. modes: k_1..k_d, the frequencies kept per axis.
// weights: [in_channels, out_channels, 2 k_1, ..., 2 k_{d-1}, k_d] complex: on every axis but the
// last both the lowest positive (first k) and negative (last k) frequencies are kept; the last
// axis is the half spectrum, so only k_d. Returns [batch, out_channels, n_1, ..., n_d].
// The same weights apply at any resolution; a grid that cannot hold k_i modes on an axis
// (n_i < 2 k_i, or n_d / 2 + 1 < k_d) uses the weights of the lowest frequencies it can hold.
Tensor spectral_conv(const Tensor& x, const Tensor& weights, const std::vector<int64_t>& modes);

// The weight shape spectral_conv expects.
Shape spectral_weight_shape(int64_t in_channels, int64_t out_channels, const std::vector<int64_t>& modes);
// How many modes spectral_conv can use along an axis of `points` points: n / 2 + 1 along the last
// (real-transform) axis, n / 2 of each sign along the others. More modes than this keep weights
// the grid never reaches.
int64_t spectral_modes_held(int64_t points, bool last_axis);

}  // namespace eddy::fft
