// The collectives across ranks, and their derivatives. Run by ctest three ways: as a plain
// process (the single-process communicator), under `mpirun -np 1` and under `mpirun -np 2`.
// Every rank runs every test in the same order, as SPMD code must. Derivatives are those of the
// global loss, the sum over ranks of each rank's scalar, against central differences of it in
// random directions that differ from rank to rank.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>

#include "eddy/dist/collectives.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/eddy.h"
#include "support/job_directory.h"

namespace eddy::dist {
namespace {

double dot(const Tensor& a, const Tensor& b) { return sum(a * b).item<double>(); }

// Per-rank random tensors: the same seed on every rank would hide mistakes in which rank's data
// goes where.
Tensor random(const Shape& shape, uint64_t salt) {
  Generator generator(1000 * salt + static_cast<uint64_t>(world().rank()) + 1);
  return randn(shape, DType::f64, &generator);
}

TEST(Communicator, RankAndSizeMatchTheLauncher) {
  const char* launched = std::getenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(world().size(), launched ? std::atoi(launched) : 1);
  EXPECT_GE(world().rank(), 0);
  EXPECT_LT(world().rank(), world().size());
  EXPECT_EQ(world().kind(), launched ? "mpi" : "single-process");
}

// A build without MPI refuses a launch of several processes by this count (communicator.h).
TEST(Communicator, LauncherWorldSizeComesFromTheEnvironment) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE")) {
    EXPECT_EQ(launcher_world_size(), world().size());
    return;
  }
  EXPECT_EQ(launcher_world_size(), 1);
  setenv("PMI_SIZE", "3", 1);
  EXPECT_EQ(launcher_world_size(), 3);
  unsetenv("PMI_SIZE");
  EXPECT_EQ(launcher_world_size(), 1);
}

TEST(Collectives, Values) {
  const int rank = world().rank(), size = world().size();
  const Tensor mine = full({2, 3}, rank + 1.0, DType::f64) + reshape(arange(0, 6, 1, DType::f64), {2, 3});
  const Tensor base = reshape(arange(0, 6, 1, DType::f64), {2, 3});
  const double rank_sum = size * (size + 1) / 2.0;
  EXPECT_TRUE(all_reduce(mine).to_vector<double>() == (base * double(size) + rank_sum).to_vector<double>());
  EXPECT_TRUE(all_reduce(mine, ReduceOp::mean).to_vector<double>() ==
              (base + rank_sum / size).to_vector<double>());
  EXPECT_TRUE(all_reduce(mine, ReduceOp::max).to_vector<double>() == (base + double(size)).to_vector<double>());

  const Tensor gathered = all_gather(mine);
  ASSERT_EQ(gathered.shape(), (Shape{2 * size, 3}));
  for (int r = 0; r < size; ++r) {
    EXPECT_TRUE(slice(gathered, 0, 2 * r, 2 * r + 2).to_vector<double>() == (base + r + 1.0).to_vector<double>());
  }
  // Rows [2 rank, 2 rank + 2) of the sum of every rank's [2 size, 3] tensor.
  const Tensor tall = reshape(arange(0, 6.0 * size, 1, DType::f64), {2 * size, 3}) * double(rank + 1);
  const Tensor scattered = reduce_scatter(tall);
  ASSERT_EQ(scattered.shape(), (Shape{2, 3}));
  EXPECT_TRUE(scattered.to_vector<double>() ==
              (reshape(arange(6.0 * rank, 6.0 * rank + 6, 1, DType::f64), {2, 3}) * rank_sum).to_vector<double>());

  // Parts a row apart (shard_range): 2 size + 1 rows, the later ranks holding one more.
  const int64_t rows = 2 * size + 1;
  const ShardRange share = shard_range(rows, size, rank);
  const Tensor counted = reshape(arange(0, 3.0 * rows, 1, DType::f64), {rows, 3});
  const Tensor uneven = all_gather(slice(counted, 0, share.first, share.last), world(), rows);
  EXPECT_TRUE(uneven.to_vector<double>() == counted.to_vector<double>());
  const Tensor summed_share = reduce_scatter(counted * double(rank + 1));
  EXPECT_TRUE(summed_share.to_vector<double>() ==
              (slice(counted, 0, share.first, share.last) * rank_sum).to_vector<double>());

  // Block j of rank r's input [size, 3] holds 10 r + j; block j of its output is rank j's block r.
  const Tensor ranks = reshape(arange(0, size, 1, DType::f64), {size, 1}), wide = zeros({size, 3}, DType::f64);
  const Tensor labelled = ranks + 10.0 * rank + wide;
  const Tensor exchanged = all_to_all(labelled);
  ASSERT_EQ(exchanged.shape(), (Shape{size, 3}));
  EXPECT_TRUE(exchanged.to_vector<double>() ==
              (ranks * 10.0 + double(rank) + wide).to_vector<double>());

  const int last = size - 1;
  EXPECT_TRUE(broadcast(mine, last).to_vector<double>() == (base + double(size)).to_vector<double>());
  const Tensor reduced = reduce(mine, last);
  EXPECT_TRUE(reduced.to_vector<double>() ==
              (rank == last ? base * double(size) + rank_sum : zeros({2, 3}, DType::f64)).to_vector<double>());
}

TEST(Collectives, SendAndReceiveAroundARing) {
  const int rank = world().rank(), size = world().size();
  if (size == 1) {
    EXPECT_THROW(send(ones({2}), 1), Error);
    return;
  }
  const Tensor mine = full({4}, 10.0 * rank, DType::f64);
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  // Even ranks send first, odd ranks receive first, so blocking calls cannot deadlock.
  Tensor received;
  if (rank % 2 == 0) {
    send(mine, next, 7);
    received = recv({4}, DType::f64, previous, 7);
  } else {
    received = recv({4}, DType::f64, previous, 7);
    send(mine, next, 7);
  }
  EXPECT_EQ(received.to_vector<double>(), std::vector<double>(4, 10.0 * previous));
}

TEST(Collectives, BadArgumentsThrowBeforeAnyMessage) {
  EXPECT_THROW(all_reduce(ones({2}, DType::c128), ReduceOp::max), Error);
  EXPECT_THROW(all_reduce(ones({2}, DType::i64), ReduceOp::mean), Error);
  EXPECT_THROW(broadcast(ones({2}), world().size()), Error);
  EXPECT_THROW(all_gather(scalar(1.0)), Error);
  EXPECT_THROW(reduce_scatter(scalar(1.0)), Error);
  // Two rows on each rank are no rank's share of one row.
  EXPECT_THROW(all_gather(ones({2}), world(), 1), Error);
  if (world().size() > 1) {
    EXPECT_THROW(all_to_all(ones({2 * world().size() + 1})), Error);
  }
}

// A collective between nonlinear maps, so derivatives of order 2 are not trivially zero.
struct Case {
  std::string name;
  Shape input;
  std::function<Tensor(const Tensor&)> fn;
};

std::vector<Case> cases() {
  const int size = world().size();
  return {
      {"all_reduce_sum", {2, 3}, [](const Tensor& x) { return sin(all_reduce(x * x)); }},
      {"all_reduce_mean", {2, 3}, [](const Tensor& x) { return exp(all_reduce(sin(x), ReduceOp::mean)); }},
      {"all_reduce_max", {2, 3}, [](const Tensor& x) { return square(all_reduce(sin(x), ReduceOp::max)); }},
      {"all_gather", {2, 3}, [](const Tensor& x) { return tanh(all_gather(x * x)); }},
      {"reduce_scatter", {2 * size, 3}, [](const Tensor& x) { return sin(reduce_scatter(x * x)); }},
      {"broadcast", {2, 3}, [size](const Tensor& x) { return sin(broadcast(x * x, size - 1)); }},
      {"reduce", {2, 3}, [](const Tensor& x) { return sin(reduce(x * x)) + x; }},
      {"all_to_all", {2 * size, 3}, [](const Tensor& x) { return tanh(all_to_all(x * x)); }},
  };
}

class CollectiveDerivatives : public ::testing::Test {
 protected:
  static constexpr double kStep = 1e-5, kTolerance = 1e-7;

  // This rank's share of the global loss, with a per-rank weight on the output.
  static Tensor local_loss(const Case& c, const Tensor& x, uint64_t salt) {
    const Tensor y = c.fn(x);
    return sum(random(y.shape(), salt) * y);
  }
  static double global_loss(const Case& c, const Tensor& x, uint64_t salt) {
    NoGradGuard no_grad;
    return global_sum(local_loss(c, x, salt).item<double>());
  }
  static void expect_close(double got, double want, const std::string& what) {
    EXPECT_NEAR(got, want, kTolerance * (1 + std::abs(want))) << what << " on rank " << world().rank();
  }
};

TEST_F(CollectiveDerivatives, ReverseModeMatchesFiniteDifferences) {
  uint64_t salt = 10;
  for (const Case& c : cases()) {
    const Tensor x = random(c.input, ++salt), v = random(c.input, ++salt);
    const Tensor leaf = x.detach().requires_grad_();
    const Tensor g = grad({local_loss(c, leaf, salt)}, {leaf})[0];
    const double directional = global_sum(dot(g, v));
    const double fd = (global_loss(c, x + kStep * v, salt) - global_loss(c, x - kStep * v, salt)) / (2 * kStep);
    expect_close(directional, fd, c.name);
  }
}

TEST_F(CollectiveDerivatives, ForwardModeMatchesFiniteDifferences) {
  uint64_t salt = 40;
  for (const Case& c : cases()) {
    const Tensor x = random(c.input, ++salt), v = random(c.input, ++salt);
    const Tensor tangent = jvp([&](const Tensor& input) { return local_loss(c, input, salt); }, x, v).second;
    const double fd = (global_loss(c, x + kStep * v, salt) - global_loss(c, x - kStep * v, salt)) / (2 * kStep);
    expect_close(global_sum(tangent.item<double>()), fd, c.name);
  }
}

// Order 2, reverse over reverse: the derivative along v of G(x) = sum over ranks of <u, grad L>.
TEST_F(CollectiveDerivatives, SecondOrderReverseOverReverse) {
  uint64_t salt = 70;
  for (const Case& c : cases()) {
    const Tensor x = random(c.input, ++salt), u = random(c.input, ++salt), v = random(c.input, ++salt);
    auto projected_gradient = [&](const Tensor& at) {
      const Tensor leaf = at.detach().requires_grad_();
      const Tensor g = grad({local_loss(c, leaf, salt)}, {leaf}, {}, true)[0];
      return std::pair{leaf, sum(u * g)};
    };
    auto [leaf, projected] = projected_gradient(x);
    const Tensor h = grad({projected}, {leaf})[0];
    auto global_projected = [&](const Tensor& at) { return global_sum(projected_gradient(at).second.item<double>()); };
    const double fd = (global_projected(x + kStep * v) - global_projected(x - kStep * v)) / (2 * kStep);
    expect_close(global_sum(dot(h, v)), fd, c.name);
  }
}

// <A x, y> = <x, A^T y> summed over ranks, with A^T from vjp.
TEST(CollectiveTranspose, LinearCollectivesAreAdjointToTheirVjp) {
  const int size = world().size();
  const std::vector<std::pair<Shape, Function>> linear = {
      {{2, 3}, [](const Tensor& x) { return all_reduce(x); }},
      {{2, 3}, [](const Tensor& x) { return all_gather(x); }},
      {{2 * size, 3}, [](const Tensor& x) { return reduce_scatter(x); }},
      // Parts a row apart.
      {{shard_range(2 * size + 1, size, world().rank()).size(), 3},
       [size](const Tensor& x) { return all_gather(x, world(), 2 * size + 1); }},
      {{2 * size + 1, 3}, [](const Tensor& x) { return reduce_scatter(x); }},
      {{2, 3}, [size](const Tensor& x) { return broadcast(x, size - 1); }},
      {{2, 3}, [](const Tensor& x) { return reduce(x, 0); }},
      {{2 * size, 3}, [](const Tensor& x) { return all_to_all(x); }},
  };
  uint64_t salt = 100;
  for (const auto& [shape, fn] : linear) {
    const Tensor x = random(shape, ++salt);
    const Tensor ax = fn(x);
    const Tensor y = random(ax.shape(), ++salt);
    const Tensor aty = vjp(fn, x, y).second;
    EXPECT_NEAR(global_sum(dot(ax, y)), global_sum(dot(x, aty)), 1e-10 * (1 + std::abs(global_sum(dot(ax, y)))));
  }
}

TEST(DataParallel, BroadcastTensorsCopiesRootValues) {
  const int rank = world().rank();
  Tensor a = full({3}, rank + 1.0, DType::f64), b = full({2, 2}, 10.0 * rank, DType::f32);
  broadcast_tensors({a, b});
  EXPECT_EQ(a.to_vector<double>(), std::vector<double>(3, 1.0));
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>(4, 0.0f));
}

TEST(DataParallel, AverageGradientsInOneMessageWithSums) {
  const int rank = world().rank(), size = world().size();
  Tensor used = zeros({2}, DType::f64).requires_grad_();
  Tensor only_rank0 = zeros({3}, DType::f64).requires_grad_();
  Tensor unused = zeros({1}, DType::f64).requires_grad_();
  Tensor loss = sum(used * double(rank + 1));
  if (rank == 0) loss = loss + sum(only_rank0);
  backward(loss);
  std::vector<double> sums = {double(rank), 1.0};
  average_gradients({used, only_rank0, unused}, world(), sums);
  EXPECT_EQ(used.grad().to_vector<double>(), std::vector<double>(2, (size + 1) / 2.0));
  ASSERT_TRUE(only_rank0.grad().defined());
  EXPECT_EQ(only_rank0.grad().to_vector<double>(), std::vector<double>(3, 1.0 / size));
  EXPECT_FALSE(unused.grad().defined());
  EXPECT_EQ(sums[0], size * (size - 1) / 2.0);
  EXPECT_EQ(sums[1], double(size));
}

TEST(DataParallel, SameOnEveryRankSeesOneDifferingElement) {
  const std::vector<Tensor> same{tensor(std::vector<double>{1.5, -2.0}), tensor(std::vector<float>{3.0f})};
  EXPECT_TRUE(same_on_every_rank(same));
  // The last rank's float differs in its last bit: only one rank can see it, yet all must agree.
  const float last = world().rank() == world().size() - 1 && world().size() > 1 ? std::nextafter(3.0f, 4.0f) : 3.0f;
  const std::vector<Tensor> differing{tensor(std::vector<double>{1.5, -2.0}), tensor(std::vector<float>{last})};
  EXPECT_EQ(same_on_every_rank(differing), world().size() == 1);
}

TEST(DataParallel, ShardsCoverTheBatchInOrder) {
  for (int size : {1, 2, 3, 5}) {
    for (int64_t count : {0, 1, 4, 7, 16}) {
      int64_t next = 3;
      for (int rank = 0; rank < size; ++rank) {
        const auto [first, last] = shard(3, 3 + count, rank, size);
        EXPECT_EQ(first, next);
        EXPECT_LE(last - first, count / size + 1);
        EXPECT_GE(last - first, count / size);
        next = last;
      }
      EXPECT_EQ(next, 3 + count);
    }
  }
}

}  // namespace
}  // namespace eddy::dist
