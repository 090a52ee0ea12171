#include "eddy/fft/spectral.h"

#include "eddy/fft/fft.h"
#include "eddy/ops/ops.h"

namespace eddy::fft {

Shape spectral_weight_shape(int64_t in_channels, int64_t out_channels, const std::vector<int64_t>& modes) {
  Shape shape{in_channels, out_channels};
  for (size_t i = 0; i < modes.size(); ++i) shape.push_back(i + 1 < modes.size() ? 2 * modes[i] : modes[i]);
  return shape;
}

int64_t spectral_modes_held(int64_t points, bool last_axis) { return last_axis ? points / 2 + 1 : points / 2; }

Tensor spectral_conv(const Tensor& x, const Tensor& weights, const std::vector<int64_t>& modes) {
  const int64_t d = static_cast<int64_t>(modes.size());
  EDDY_CHECK(d >= 1 && x.dim() == d + 2, "spectral_conv: input of shape ", x.shape(), " does not match ", d,
             " spatial axes ([batch, channels, n_1..n_d] expected)");
  EDDY_CHECK(weights.dim() == d + 2 && weights.shape()[0] == x.shape()[1] &&
                 weights.shape() == spectral_weight_shape(x.shape()[1], weights.shape()[1], modes),
             "spectral_conv: weights have shape ", weights.shape(), " but input ", x.shape(), " with modes ",
             to_string(modes), " needs ", spectral_weight_shape(x.shape()[1], weights.shape()[1], modes));
  // A grid too coarse for the weights' modes uses the modes it can hold: the weights of the
  // lowest |frequencies| (both signs), so the same weights serve every resolution.
  std::vector<int64_t> sizes, kept(modes);
  Tensor w = weights;
  for (int64_t i = 0; i < d; ++i) {
    const int64_t axis = 2 + i, n = x.shape()[axis], k = modes[i];
    const bool last = i == d - 1;
    EDDY_CHECK(k >= 1, "spectral_conv: mode counts must be >= 1, got ", to_string(modes));
    EDDY_CHECK(n >= 2, "spectral_conv: axis ", axis, " of the input ", x.shape(), " has fewer than 2 points");
    kept[i] = std::min(k, spectral_modes_held(n, last));
    const int64_t held = kept[i];
    if (!last && 2 * held == n) {
      // The bin n/2 holds +n/2 and -n/2 at once, which a finer grid weighs apart, each with half
      // the amplitude: it passes with the mean of their weights (+n/2's zero where the modes stop
      // below it). Weighted whole by -n/2's, a component at n/2 came out unlike on finer grids.
      const Tensor minus = slice(w, axis, 2 * k - held, 2 * k - held + 1);
      const Tensor nyquist = held < k ? (minus + slice(w, axis, held, held + 1)) * 0.5 : minus * 0.5;
      w = concat({slice(w, axis, 0, held), nyquist, slice(w, axis, 2 * k - held + 1, 2 * k)}, axis);
    } else if (held < k) {
      w = last ? slice(w, axis, 0, held) : concat({slice(w, axis, 0, held), slice(w, axis, 2 * k - held, 2 * k)}, axis);
    }
    sizes.push_back(n);
  }
  // The forward transform is pruned to the kept modes: the real transform along the last axis
  // runs over the whole grid, each other axis's only over the modes already kept along the axes
  // after it, and each axis is cut to its corner block right after its transform. Same values as
  // cutting a full rfftn; the 2-D FNO layer's spectral_conv took 15 to 21% less time forward and
  // 17 to 22% less with its gradient (docs/benchmarks.md, FNO layer). The block: [batch, in,
  // 2k_1, ..., k_d].
  const int64_t last_axis = d + 1;
  Tensor block = slice(rfft(x, sizes.back(), last_axis), last_axis, 0, kept.back());
  for (int64_t i = d - 2; i >= 0; --i) {
    const int64_t axis = 2 + i, n = sizes[i], k = kept[i];
    const Tensor transformed = fft(block, n, axis);
    block = concat({slice(transformed, axis, 0, k), slice(transformed, axis, n - k, n)}, axis);
  }
  // Channel mixing per mode as a batched matmul over modes: [modes..., batch, in] @ [modes..., in, out].
  std::vector<int64_t> modes_first, weights_modes_first;
  for (int64_t i = 0; i < d; ++i) modes_first.push_back(2 + i);
  weights_modes_first = modes_first;
  modes_first.insert(modes_first.end(), {0, 1});
  weights_modes_first.insert(weights_modes_first.end(), {0, 1});
  Tensor mixed = matmul(permute(block, modes_first), permute(w, weights_modes_first));
  std::vector<int64_t> back(d + 2);
  back[0] = d;
  back[1] = d + 1;
  for (int64_t i = 0; i < d; ++i) back[2 + i] = i;
  Tensor out = permute(mixed, back);  // [batch, out, 2k_1, ..., k_d]
  // Back the same way: each leading axis filled with zeros between its corners and transformed,
  // then the last axis's half spectrum, which irfft pads with zeros to the grid's.
  for (int64_t i = 0; i + 1 < d; ++i) {
    const int64_t axis = 2 + i, n = sizes[i], k = kept[i];
    Shape gap_shape = out.shape();
    gap_shape[axis] = n - 2 * k;
    const Tensor filled =
        concat({slice(out, axis, 0, k), zeros(gap_shape, out.dtype(), out.device()), slice(out, axis, k, 2 * k)}, axis);
    out = ifft(filled, n, axis);
  }
  return irfft(out, sizes.back(), last_axis);
}

}  // namespace eddy::fft
