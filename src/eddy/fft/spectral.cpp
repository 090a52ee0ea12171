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
  // lowest |frequencies|, so the same weights serve every resolution. A leading axis of n points
  // holds the frequencies 0 to (n - 1) / 2 and -1 to -(n / 2) (an odd one holds one more positive
  // than negative: +(n - 1) / 2 was dropped with a weight for it); the last axis, a half spectrum,
  // 0 to n / 2.
  std::vector<int64_t> sizes, positive(modes), negative(d, 0);
  Tensor w = weights;
  for (int64_t i = 0; i < d; ++i) {
    const int64_t axis = 2 + i, n = x.shape()[axis], k = modes[i];
    const bool last = i == d - 1;
    EDDY_CHECK(k >= 1, "spectral_conv: mode counts must be >= 1, got ", to_string(modes));
    EDDY_CHECK(n >= 2, "spectral_conv: axis ", axis, " of the input ", x.shape(), " has fewer than 2 points");
    sizes.push_back(n);
    if (last) {
      positive[i] = std::min(k, spectral_modes_held(n, true));
      if (positive[i] < k) w = slice(w, axis, 0, positive[i]);
      continue;
    }
    const int64_t up = positive[i] = std::min(k, (n + 1) / 2), down = negative[i] = std::min(k, n / 2);
    Tensor minus = slice(w, axis, 2 * k - down, 2 * k);
    if (2 * down == n) {
      // The bin n/2 holds +n/2 and -n/2 at once, which a finer grid weighs apart, each with half
      // the amplitude: it passes with the mean of their weights (+n/2's zero where the modes stop
      // below it). Weighted whole by -n/2's, a component at n/2 came out unlike on finer grids.
      const Tensor lowest = slice(minus, axis, 0, 1);
      const Tensor nyquist = k > down ? (lowest + slice(w, axis, down, down + 1)) * 0.5 : lowest * 0.5;
      minus = concat({nyquist, slice(minus, axis, 1, down)}, axis);
    }
    w = concat({slice(w, axis, 0, up), minus}, axis);
  }
  // The forward transform is pruned to the kept modes: the real transform along the last axis
  // runs over the whole grid, each other axis's only over the modes already kept along the axes
  // after it, and each axis is cut to its corner block right after its transform. Same values as
  // cutting a full rfftn; the 2-D FNO layer's spectral_conv took 15 to 21% less time forward and
  // 17 to 22% less with its gradient (docs/benchmarks.md, FNO layer). The block: [batch, in,
  // positive_1 + negative_1, ..., positive_d].
  const int64_t last_axis = d + 1;
  Tensor block = slice(rfft(x, sizes.back(), last_axis), last_axis, 0, positive.back());
  for (int64_t i = d - 2; i >= 0; --i) {
    const int64_t axis = 2 + i, n = sizes[i];
    const Tensor transformed = fft(block, n, axis);
    block = concat({slice(transformed, axis, 0, positive[i]), slice(transformed, axis, n - negative[i], n)}, axis);
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
  Tensor out = permute(mixed, back);  // [batch, out, positive_1 + negative_1, ..., positive_d]
  // Back the same way: each leading axis filled with zeros between its corners and transformed,
  // then the last axis's half spectrum, which irfft pads with zeros to the grid's.
  for (int64_t i = 0; i + 1 < d; ++i) {
    const int64_t axis = 2 + i, n = sizes[i], up = positive[i], down = negative[i];
    Shape gap_shape = out.shape();
    gap_shape[axis] = n - up - down;
    const Tensor filled = concat(
        {slice(out, axis, 0, up), zeros(gap_shape, out.dtype(), out.device()), slice(out, axis, up, up + down)}, axis);
    out = ifft(filled, n, axis);
  }
  return irfft(out, sizes.back(), last_axis);
}

}  // namespace eddy::fft
