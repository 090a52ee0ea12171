// spectral_conv against a direct DFT formulation, its resolution invariance, and its gradients.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "eddy/eddy.h"
#include "eddy/fft/fft.h"
#include "eddy/fft/spectral.h"

namespace eddy::fft {
namespace {

constexpr double kTwoPi = 2 * std::numbers::pi;

Tensor random_complex(const Shape& shape, Generator& gen) {
  return complex(randn(shape, DType::f64, &gen), randn(shape, DType::f64, &gen));
}

// Index of kept frequency m (0..n-1) in the weights' axis of 2k entries, or -1 if dropped.
int64_t kept_index(int64_t m, int64_t n, int64_t k) {
  if (m < k) return m;
  if (m >= n - k) return k + (m - (n - k));
  return -1;
}

TEST(SpectralConv, MatchesDirectDftIn2D) {
  const int64_t batch = 2, in = 2, out = 3, n1 = 8, n2 = 10, k1 = 3, k2 = 4;
  Generator gen(5);
  Tensor x = randn({batch, in, n1, n2}, DType::f64, &gen);
  Tensor w = random_complex(spectral_weight_shape(in, out, {k1, k2}), gen);
  Tensor y = spectral_conv(x, w, {k1, k2});
  ASSERT_EQ(y.shape(), (Shape{batch, out, n1, n2}));

  auto xv = x.to_vector<double>();
  auto wv = w.to_vector<c128>();
  auto yv = y.to_vector<double>();
  auto x_at = [&](int64_t b, int64_t i, int64_t j1, int64_t j2) { return xv[((b * in + i) * n1 + j1) * n2 + j2]; };
  auto w_at = [&](int64_t i, int64_t o, int64_t r, int64_t c) { return wv[((i * out + o) * 2 * k1 + r) * k2 + c]; };
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t o = 0; o < out; ++o) {
      // Mixed spectrum Z[m1, m2] on the kept modes (m2 < k2 <= n2 / 2, so no Nyquist column).
      std::vector<c128> z(n1 * k2, 0.0);
      for (int64_t m1 = 0; m1 < n1; ++m1) {
        int64_t r = kept_index(m1, n1, k1);
        if (r < 0) continue;
        for (int64_t m2 = 0; m2 < k2; ++m2) {
          for (int64_t i = 0; i < in; ++i) {
            c128 coefficient = 0;
            for (int64_t j1 = 0; j1 < n1; ++j1) {
              for (int64_t j2 = 0; j2 < n2; ++j2) {
                double angle = -kTwoPi * (double(j1 * m1) / n1 + double(j2 * m2) / n2);
                coefficient += x_at(b, i, j1, j2) * std::polar(1.0, angle);
              }
            }
            z[m1 * k2 + m2] += coefficient * w_at(i, o, r, m2);
          }
        }
      }
      // Inverse real transform: middle columns count twice (k and -k), DC once.
      for (int64_t j1 = 0; j1 < n1; ++j1) {
        for (int64_t j2 = 0; j2 < n2; ++j2) {
          double value = 0;
          for (int64_t m1 = 0; m1 < n1; ++m1) {
            for (int64_t m2 = 0; m2 < k2; ++m2) {
              double angle = kTwoPi * (double(j1 * m1) / n1 + double(j2 * m2) / n2);
              value += (m2 == 0 ? 1.0 : 2.0) * (z[m1 * k2 + m2] * std::polar(1.0, angle)).real();
            }
          }
          value /= double(n1 * n2);
          EXPECT_NEAR(yv[((b * out + o) * n1 + j1) * n2 + j2], value, 1e-11);
        }
      }
    }
  }
}

TEST(SpectralConv, SameWeightsAtTwoResolutionsAgreeOnSmoothInput) {
  Generator gen(7);
  const int64_t modes = 4;
  Tensor w = random_complex(spectral_weight_shape(1, 2, {modes, modes}), gen);
  auto sample = [](int64_t n) {
    Tensor s = arange(0, double(n), 1, DType::f64) * (kTwoPi / double(n));
    Tensor a = reshape(s, {n, 1}), b = reshape(s, {1, n});
    Tensor field = sin(a) + cos(2.0 * b) + 0.5 * sin(a + b) + 0.25 * cos(3.0 * a - b);
    return reshape(field, {1, 1, n, n});
  };
  Tensor coarse = spectral_conv(sample(16), w, {modes, modes});
  Tensor fine = spectral_conv(sample(32), w, {modes, modes});
  Tensor fine_on_coarse = slice(slice(fine, 2, 0, 32, 2), 3, 0, 32, 2);
  EXPECT_LT(max(abs(fine_on_coarse - coarse)).item<double>(), 1e-12);
  EXPECT_GT(max(abs(coarse)).item<double>(), 0.1);  // not trivially zero
}

TEST(SpectralConv, GradientsMatchFiniteDifferences) {
  Generator gen(9);
  Tensor x = randn({2, 2, 12}, DType::f64, &gen);
  Tensor w = random_complex(spectral_weight_shape(2, 2, {4}), gen);
  Tensor target = randn({2, 2, 12}, DType::f64, &gen);
  auto loss = [&](const Tensor& xs, const Tensor& ws) {
    return sum(square(tanh(spectral_conv(xs, ws, {4})) - target));
  };
  Tensor vx = randn(x.shape(), DType::f64, &gen);
  Tensor vw = random_complex(w.shape(), gen);
  Tensor xl = x.detach().requires_grad_(), wl = w.detach().requires_grad_();
  auto grads = grad({loss(xl, wl)}, {xl, wl}, {}, true);
  const double ad = sum(grads[0] * vx).item<double>() + sum(real(conj(grads[1]) * vw)).item<double>();
  const double h = 1e-6;
  const double fd = (loss(x + h * vx, w + h * vw).item<double>() - loss(x - h * vx, w - h * vw).item<double>()) /
                    (2 * h);
  EXPECT_NEAR(ad, fd, 1e-6 * (1 + std::abs(fd)));

  // Second order: the directional derivative of the gradient along vx.
  Tensor directional = sum(grads[0] * vx);
  Tensor second = grad({directional}, {xl})[0];
  auto grad_x_at = [&](const Tensor& xs) {
    Tensor leaf = xs.detach().requires_grad_();
    return sum(grad({loss(leaf, w)}, {leaf})[0] * vx).item<double>();
  };
  const double fd2 = (grad_x_at(x + h * vx) - grad_x_at(x - h * vx)) / (2 * h);
  EXPECT_NEAR(sum(second * vx).item<double>(), fd2, 1e-5 * (1 + std::abs(fd2)));
}

// A grid too coarse for the weights keeps the modes it can hold: the same result as weights cut
// down to those modes (lowest frequencies of both signs, and the half spectrum's first entries).
TEST(SpectralConv, CoarseGridUsesTheLowestModesOfTheWeights) {
  Generator gen(9);
  Tensor x = randn({2, 2, 6, 5}, DType::f64, &gen);
  Tensor w = random_complex(spectral_weight_shape(2, 3, {4, 4}), gen);
  // Axis 2: 6 points hold 3 modes of each sign (of the weights' 4); axis 3: 5 points, 3 half modes.
  // Bin 3 of 6 points is +3 and -3 at once, which pass with the mean of their weights: the cut
  // weights hold their sum at -3, which modes 3 on 6 points halve.
  const Tensor nyquist = slice(w, 2, 5, 6) + slice(w, 2, 3, 4);
  Tensor cut = slice(concat({slice(w, 2, 0, 3), nyquist, slice(w, 2, 6, 8)}, 2), 3, 0, 3);
  Tensor y = spectral_conv(x, w, {4, 4});
  EXPECT_LT(max(abs(y - spectral_conv(x, cut, {3, 3}))).item<double>(), 1e-12);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 6, 5}));
}

// With one channel and every weight 1, spectral_conv keeps the corner modes and drops the rest:
// irfftn(mask * rfftn(x)). In 3-D, with odd and even axes and one axis kept whole (2k = n, whose
// bin n/2 passes half: only -n/2 has a weight), this checks the transform pruned axis by axis
// against the full one.
TEST(SpectralConv, MatchesAFullTransformLowPassIn3D) {
  Generator gen(11);
  const Shape grid{6, 7, 8};
  const std::vector<int64_t> modes{3, 2, 3};
  Tensor x = randn({1, 1, grid[0], grid[1], grid[2]}, DType::f64, &gen);
  const Shape weight_shape = spectral_weight_shape(1, 1, modes);
  Tensor w = complex(ones(weight_shape, DType::f64), zeros(weight_shape, DType::f64));
  const auto kept_along = [](int64_t n, int64_t k) {
    const Tensor negative = 2 * k == n ? concat({full({1}, 0.5, DType::f64), ones({k - 1}, DType::f64)}, 0)
                                       : ones({k}, DType::f64);
    return concat({ones({k}, DType::f64), zeros({n - 2 * k}, DType::f64), negative}, 0);
  };
  const int64_t half = grid[2] / 2 + 1;
  Tensor mask = reshape(kept_along(grid[0], modes[0]), {grid[0], 1, 1}) *
                reshape(kept_along(grid[1], modes[1]), {1, grid[1], 1}) *
                reshape(concat({ones({modes[2]}, DType::f64), zeros({half - modes[2]}, DType::f64)}, 0), {1, 1, half});
  const std::vector<int64_t> axes{2, 3, 4};
  Tensor low_pass = irfftn(rfftn(x, grid, axes) * complex(mask, zeros_like(mask)), grid, axes);
  EXPECT_LT(max(abs(spectral_conv(x, w, modes) - low_pass)).item<double>(), 1e-12);
}

// The same weights give the same function on every grid that holds the input's modes, also where
// a grid's kept modes reach its bin n/2 on a leading axis: that bin (+n/2 and -n/2 at once) was
// weighted whole by -n/2's weight, unlike a finer grid, which weighs +n/2 and -n/2 apart. Modes 4
// on 8 points have no weight for +4; modes 6 do, which the coarse grid cannot keep apart.
TEST(SpectralConv, AModeAtTheGridsNyquistBinPassesAsOnFinerGrids) {
  // Two channels of cos(2 pi 4 x) cos(2 pi y) + sin(2 pi 2 x): frequencies an 8 x 8 grid holds,
  // 4 at its bin n/2 along x.
  const auto field = [](int64_t n) {
    const Tensor x = reshape(arange(0, n, 1, DType::f64) / static_cast<double>(n), {n, 1});
    const Tensor y = reshape(arange(0, n, 1, DType::f64) / static_cast<double>(n), {1, n});
    const Tensor u = cos(8 * M_PI * x) * cos(2 * M_PI * y) + sin(4 * M_PI * x) + 0 * y;
    return unsqueeze(stack({u, 2.0 * u}, 0), 0);
  };
  for (const std::vector<int64_t>& modes : {std::vector<int64_t>{4, 3}, std::vector<int64_t>{6, 3}}) {
    SCOPED_TRACE(to_string(modes));
    Generator gen(12);
    const Tensor w = complex(randn(spectral_weight_shape(2, 3, modes), DType::f64, &gen),
                             randn(spectral_weight_shape(2, 3, modes), DType::f64, &gen));
    const Tensor coarse = spectral_conv(field(8), w, modes), fine = spectral_conv(field(16), w, modes);
    const Tensor fine_on_coarse = slice(slice(fine, 2, 0, 16, 2), 3, 0, 16, 2);
    EXPECT_LT(max(abs(coarse - fine_on_coarse)).item<double>(), 1e-12 * max(abs(fine)).item<double>());
  }
}

// An odd leading axis of n points holds +(n - 1) / 2 as well as -(n - 1) / 2: with more modes than
// that, +3 of 7 points was dropped though it had a weight, unlike on 14 or 21 points.
TEST(SpectralConv, AnOddGridKeepsItsHighestPositiveFrequency) {
  Generator gen(13);
  const std::vector<int64_t> modes{4, 2};
  const Tensor w = complex(randn(spectral_weight_shape(1, 1, modes), DType::f64, &gen),
                           randn(spectral_weight_shape(1, 1, modes), DType::f64, &gen));
  const auto field = [](int64_t n) {  // cos(2 pi 3 x) + sin(2 pi 2 x), constant along y
    const Tensor x = reshape(arange(0, n, 1, DType::f64) / static_cast<double>(n), {1, 1, n, 1});
    return expand(cos(6 * M_PI * x) + sin(4 * M_PI * x), {1, 1, n, 4});
  };
  const Tensor coarse = spectral_conv(field(7), w, modes);
  for (int64_t factor : {2, 3}) {
    const Tensor fine = spectral_conv(field(7 * factor), w, modes);
    const Tensor fine_on_coarse = slice(fine, 2, 0, 7 * factor, factor);
    EXPECT_LT(max(abs(coarse - fine_on_coarse)).item<double>(), 1e-12 * max(abs(fine)).item<double>())
        << factor << " times finer";
  }
}

TEST(SpectralConv, RejectsWeightsOfTheWrongShape) {
  Tensor x = zeros({1, 1, 8}, DType::f64);
  EXPECT_THROW(spectral_conv(x, zeros({1, 1, 3}, DType::c128), {4}), Error);
  EXPECT_THROW(spectral_conv(x, zeros({2, 1, 4}, DType::c128), {4}), Error);
  EXPECT_THROW(spectral_conv(zeros({1, 1, 1}, DType::f64), zeros({1, 1, 1}, DType::c128), {1}), Error);
}

}  // namespace
}  // namespace eddy::fft
