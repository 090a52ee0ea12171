// The slab-decomposed real FFTs against the serial ones, and their derivatives. Run by ctest as a
// plain process and under `mpirun -np 2`. Every rank builds the same whole field from one seed,
// transforms its own rows with dist::rfft2 / irfft2, and compares them with the same rows of the
// serial eddy::fft result on the whole field (what gathering the slabs would give). Derivatives
// are those of the global loss (the sum over ranks), against central differences of it in
// directions that differ from rank to rank.

#include <gtest/gtest.h>

#include "eddy/dist/collectives.h"
#include "eddy/dist/distributed_fft.h"
#include "eddy/eddy.h"
#include "eddy/fft/fft.h"
#include "support/expect_error.h"
#include "support/job_directory.h"

namespace eddy::dist {
namespace {

// <a, b> as real vectors, for real or complex tensors.
double dot(const Tensor& a, const Tensor& b) { return sum(real(conj(a) * b)).item<double>(); }

double max_abs(const Tensor& t) { return max(abs(t)).item<double>(); }

// This rank's rows of a field [..., n0, n1] that every rank holds whole.
Tensor my_rows(const Tensor& whole, int64_t n0, int64_t n1) {
  const SlabRows rows = slab_rows(n0, n1);
  return slice(whole, whole.dim() - 2, rows.start, rows.stop());
}

// The same on every rank (the whole field), or different per rank (directions, weights).
Tensor shared_random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return randn(shape, dtype, &generator);
}
Tensor per_rank_random(const Shape& shape, DType dtype, uint64_t salt) {
  Generator generator(1000 * salt + static_cast<uint64_t>(world().rank()) + 1);
  return randn(shape, dtype, &generator);
}

struct Grid {
  int64_t n0, n1;
};
// Even and odd row counts (odd ones split unevenly over 2 ranks) and even and odd columns.
const std::vector<Grid> kGrids = {{16, 12}, {15, 10}, {9, 7}};

TEST(SlabRows, CoverTheGridInRankOrder) {
  for (const Grid& grid : kGrids) {
    const SlabRows mine = slab_rows(grid.n0, grid.n1);
    Tensor starts = zeros({world().size()}, DType::f64), counts = zeros({world().size()}, DType::f64);
    slice(starts, 0, world().rank(), world().rank() + 1).fill_(static_cast<double>(mine.start));
    slice(counts, 0, world().rank(), world().rank() + 1).fill_(static_cast<double>(mine.count));
    const std::vector<double> start = all_reduce(starts).to_vector<double>(), count = all_reduce(counts).to_vector<double>();
    double next = 0;
    for (int r = 0; r < world().size(); ++r) {
      EXPECT_EQ(start[r], next) << "rank " << r << " of the " << grid.n0 << "-row grid";
      next += count[r];
    }
    EXPECT_EQ(next, grid.n0);
    if (world().size() == 2) {
      EXPECT_EQ(count[1], static_cast<double>(grid.n0 / 2));  // FFTW's blocks: ceil(n0 / 2) rows first
    }
  }
}

TEST(DistributedFft, EqualsTheSerialTransformsOnTheWholeField) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const double tolerance = dtype == DType::f64 ? 1e-13 : 2e-6;
    for (const Grid& grid : kGrids) {
      for (const Shape& batch : {Shape{}, Shape{3}, Shape{2, 2}}) {
        Shape shape = batch;
        shape.push_back(grid.n0);
        shape.push_back(grid.n1);
        const Tensor field = shared_random(shape, dtype, 7);
        const Tensor spectrum = fft::rfft2(field);
        const std::string where = cat(dtype, " ", shape);

        const Tensor forward = rfft2(my_rows(field, grid.n0, grid.n1), grid.n0);
        ASSERT_EQ(forward.shape(), my_rows(spectrum, grid.n0, grid.n1).shape()) << where;
        EXPECT_LT(max_abs(forward - my_rows(spectrum, grid.n0, grid.n1)), tolerance * max_abs(spectrum)) << where;

        const Tensor inverse = irfft2(my_rows(spectrum, grid.n0, grid.n1), grid.n0, grid.n1);
        EXPECT_EQ(inverse.dtype(), dtype);
        EXPECT_LT(max_abs(inverse - my_rows(field, grid.n0, grid.n1)), tolerance * max_abs(field)) << where;

        // A spectrum that is not the transform of a real field (imaginary parts in the DC and
        // Nyquist columns that no real field has): the inverse treats it as the serial one does.
        const Tensor arbitrary = complex(shared_random(spectrum.shape(), dtype, 8), shared_random(spectrum.shape(), dtype, 9));
        const Tensor serial = fft::irfft2(arbitrary, {grid.n0, grid.n1});
        EXPECT_LT(max_abs(irfft2(my_rows(arbitrary, grid.n0, grid.n1), grid.n0, grid.n1) - my_rows(serial, grid.n0, grid.n1)),
                  tolerance * max_abs(serial))
            << where;
      }
    }
  }
}

TEST(DistributedFft, RoundTripsEveryRanksSlab) {
  for (const Grid& grid : kGrids) {
    const Tensor slab = per_rank_random({2, slab_rows(grid.n0, grid.n1).count, grid.n1}, DType::f64, 3);
    const Tensor back = irfft2(rfft2(slab, grid.n0), grid.n0, grid.n1);
    EXPECT_LT(max_abs(back - slab), 1e-14 * (1 + max_abs(slab)));
  }
}

TEST(DistributedFft, RejectsBadInput) {
  const SlabRows rows = slab_rows(15, 10);
  const std::string rank = cat("rank ", world().rank(), " of ", world().size());
  expect_error([&] { rfft2(zeros({2, rows.count + 1, 10}, DType::f64), 15); },
               {"dist::rfft2", rank, cat("[", rows.start, ", ", rows.stop(), ")"), cat("[2, ", rows.count + 1, ", 10]")});
  expect_error([&] { irfft2(zeros({rows.count, 10}, DType::c128), 15, 10); },
               {"dist::irfft2", "half spectrum", cat("[..., ", rows.count, ", 6]"), cat("[", rows.count, ", 10]")});
  expect_error([&] { rfft2(zeros({rows.count, 10}, DType::c128), 15); }, {"dist::rfft2", "float32 or float64"});
  expect_error([&] { rfft2(zeros({rows.count, 10}, DType::i64), 15); }, {"dist::rfft2", "float32 or float64"});
  expect_error([&] { irfft2(zeros({rows.count, 6}, DType::f64), 15, 10); }, {"dist::irfft2", "complex"});
  expect_error([&] { rfft2(zeros({10}, DType::f64), 15); }, {"dist::rfft2", "at least 2 axes", "[10]"});
  expect_error([&] { irfft2(zeros({6}, DType::c128), 15, 10); }, {"dist::irfft2", "at least 2 axes", "[6]"});
}

// Nonlinear maps around the transforms, so second derivatives are not trivially zero. A real
// slab [2, rows, n1] of an n0 x n1 grid goes in; every case also passes through the other
// transform, with a spectral multiplier sliced by rows as a solver would.
struct Case {
  std::string name;
  Grid grid;
  std::function<Tensor(const Tensor&)> fn;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const Grid& grid : {Grid{8, 6}, Grid{7, 5}}) {
    const Tensor multiplier = my_rows(complex(shared_random({grid.n0, grid.n1 / 2 + 1}, DType::f64, 21),
                                              shared_random({grid.n0, grid.n1 / 2 + 1}, DType::f64, 22)),
                                      grid.n0, grid.n1);
    const std::string size = cat(grid.n0, "x", grid.n1);
    all.push_back({"rfft2 " + size, grid, [grid](const Tensor& x) {
                     const Tensor z = rfft2(sin(x), grid.n0);
                     return square(real(z)) + sin(imag(z));
                   }});
    all.push_back({"irfft2 of rfft2 " + size, grid, [grid, multiplier](const Tensor& x) {
                     return tanh(irfft2(rfft2(x * x, grid.n0) * multiplier, grid.n0, grid.n1)) * x;
                   }});
  }
  return all;
}

class DistributedFftDerivatives : public ::testing::Test {
 protected:
  static constexpr double kStep = 1e-5, kTolerance = 1e-7;

  static Shape input_shape(const Case& c) { return {2, slab_rows(c.grid.n0, c.grid.n1).count, c.grid.n1}; }
  static Tensor local_loss(const Case& c, const Tensor& x, uint64_t salt) {
    const Tensor y = c.fn(x);
    return sum(per_rank_random(y.shape(), DType::f64, salt) * y);
  }
  static double global_loss(const Case& c, const Tensor& x, uint64_t salt) {
    NoGradGuard no_grad;
    return global_sum(local_loss(c, x, salt).item<double>());
  }
  static double finite_difference(const std::function<double(const Tensor&)>& f, const Tensor& x, const Tensor& v) {
    return (f(x + kStep * v) - f(x - kStep * v)) / (2 * kStep);
  }
  static void expect_close(double got, double want, const std::string& what) {
    EXPECT_NEAR(got, want, kTolerance * (1 + std::abs(want))) << what << " on rank " << world().rank();
    EXPECT_GT(std::abs(want), 1e-3) << what << ": a vanishing derivative tests nothing";
  }
};

TEST_F(DistributedFftDerivatives, FirstOrderInReverseAndForwardMode) {
  uint64_t salt = 10;
  for (const Case& c : cases()) {
    const Tensor x = per_rank_random(input_shape(c), DType::f64, ++salt);
    const Tensor v = per_rank_random(x.shape(), DType::f64, ++salt);
    const double fd = finite_difference([&](const Tensor& at) { return global_loss(c, at, salt); }, x, v);
    const Tensor leaf = x.detach().requires_grad_();
    const Tensor g = grad({local_loss(c, leaf, salt)}, {leaf})[0];
    expect_close(global_sum(dot(g, v)), fd, c.name + " reverse");
    const Tensor tangent = jvp([&](const Tensor& input) { return local_loss(c, input, salt); }, x, v).second;
    expect_close(global_sum(tangent.item<double>()), fd, c.name + " forward");
  }
}

// The derivative along v of G(x) = sum over ranks of <u, grad L(x)>: reverse over reverse, and
// forward over reverse (hvp).
TEST_F(DistributedFftDerivatives, SecondOrderInReverseAndForwardMode) {
  uint64_t salt = 50;
  for (const Case& c : cases()) {
    const Tensor x = per_rank_random(input_shape(c), DType::f64, ++salt);
    const Tensor u = per_rank_random(x.shape(), DType::f64, ++salt);
    const Tensor v = per_rank_random(x.shape(), DType::f64, ++salt);
    auto gradient = [&](const Tensor& at, bool create_graph) {
      const Tensor leaf = at.detach().requires_grad_();
      return std::pair{leaf, grad({local_loss(c, leaf, salt)}, {leaf}, {}, create_graph)[0]};
    };
    const double fd = finite_difference([&](const Tensor& at) { return global_sum(dot(u, gradient(at, false).second)); }, x, v);

    auto [leaf, g] = gradient(x, true);
    const Tensor reverse_over_reverse = grad({sum(u * g)}, {leaf})[0];
    expect_close(global_sum(dot(reverse_over_reverse, v)), fd, c.name + " reverse over reverse");

    const Tensor forward_over_reverse = hvp([&](const Tensor& at) { return local_loss(c, at, salt); }, x, v);
    expect_close(global_sum(dot(u, forward_over_reverse)), fd, c.name + " forward over reverse");
  }
}

// <A x, y> = <x, A^T y> summed over ranks, with A^T from vjp, for both transforms.
TEST(DistributedFftTranspose, TransformsAreAdjointToTheirVjp) {
  uint64_t salt = 90;
  for (const Grid& grid : kGrids) {
    const int64_t rows = slab_rows(grid.n0, grid.n1).count;
    auto random_like = [&salt](const Shape& shape, bool complex_valued) {
      const Tensor re = per_rank_random(shape, DType::f64, ++salt);
      return complex_valued ? complex(re, per_rank_random(shape, DType::f64, ++salt)) : re;
    };
    const std::vector<std::pair<Tensor, Function>> linear = {
        {random_like({2, rows, grid.n1}, false), [&](const Tensor& in) { return rfft2(in, grid.n0); }},
        {random_like({2, rows, grid.n1 / 2 + 1}, true), [&](const Tensor& in) { return irfft2(in, grid.n0, grid.n1); }},
    };
    for (const auto& [input, fn] : linear) {
      const Tensor ax = fn(input);
      const Tensor y = random_like(ax.shape(), is_complex(ax.dtype()));
      const double left = global_sum(dot(ax, y)), right = global_sum(dot(input, vjp(fn, input, y).second));
      EXPECT_NEAR(left, right, 1e-12 * (1 + std::abs(left))) << grid.n0 << "x" << grid.n1;
    }
  }
}

}  // namespace
}  // namespace eddy::dist
