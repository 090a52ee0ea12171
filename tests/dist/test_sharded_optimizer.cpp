// ZeRO stage 1 (dist/sharded_optimizer.h) against plain data parallelism: average_gradients()
// followed by the unsharded optimiser. Run by ctest as a plain process, under `mpirun -np 1` and
// under `mpirun -np 2`. The model's parameters hold 23 elements, so 2 ranks own 12 and 11.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "eddy/dist/data_parallel.h"
#include "eddy/dist/dtensor.h"
#include "eddy/dist/sharded_optimizer.h"
#include "eddy/eddy.h"
#include "eddy/io/safetensors.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/sgd.h"
#include "eddy/optim/soap.h"
#include "support/expect_error.h"
#include "support/job_directory.h"

namespace eddy::dist {
namespace {

constexpr int64_t kRows = 10;

// A least-squares fit y ~ x w + b + c, plus a parameter that only rank 0 uses and one that no
// rank uses, whose gradients are then zeros and undefined in the mean over ranks.
struct Model {
  std::vector<Tensor> parameters;  // w [5, 3], b [3], c [1], only_rank0 [2], unused [2]

  explicit Model(DType dtype) {
    Generator generator(7);
    for (const Shape& shape : {Shape{5, 3}, Shape{3}, Shape{1}, Shape{2}, Shape{2}}) {
      parameters.push_back(cast(randn(shape, DType::f64, &generator), dtype).requires_grad_());
    }
  }
  std::vector<double> values() const {
    std::vector<double> all;
    for (const Tensor& p : parameters) {
      for (double v : cast(p, DType::f64).to_vector<double>()) all.push_back(v);
    }
    return all;
  }
};

// The gradients of `model`'s loss on the rows [first, last) of a fixed data set, scaled so that
// their mean over `ranks` such shares is the gradient of the mean squared error over all rows.
void backward_on_rows(const Model& model, int64_t first, int64_t last, int ranks, bool with_only_rank0) {
  Generator generator(11);
  const DType dtype = model.parameters[0].dtype();
  const Tensor x = cast(randn({kRows, 5}, DType::f64, &generator), dtype);
  const Tensor y = cast(randn({kRows, 3}, DType::f64, &generator), dtype);
  const auto& p = model.parameters;
  const Tensor residual = matmul(slice(x, 0, first, last), p[0]) + p[1] + p[2] - slice(y, 0, first, last);
  Tensor loss = sum(square(residual)) * (static_cast<double>(ranks) / kRows);
  if (with_only_rank0) loss = loss + sum(square(p[3])) * static_cast<double>(ranks);
  for (const Tensor& parameter : p) Tensor(parameter).zero_grad();
  backward(loss);
}

// This rank's share of the gradient, as a data-parallel trainer computes it.
void backward_on_share(const Model& model, Communicator& comm) {
  const auto [first, last] = shard(0, kRows, comm.rank(), comm.size());
  backward_on_rows(model, first, last, comm.size(), comm.rank() == 0);
}

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

MakeOptimizer adamw(double weight_decay) {
  return [=](std::vector<Tensor> parameters) {
    optim::AdamOptions options;
    options.learning_rate = 0.05;
    options.weight_decay = weight_decay;
    return std::make_unique<optim::AdamW>(std::move(parameters), options);
  };
}

MakeOptimizer adam_with_l2() {
  return [](std::vector<Tensor> parameters) {
    optim::AdamOptions options;
    options.learning_rate = 0.05;
    options.weight_decay = 0.01;
    return std::make_unique<optim::Adam>(std::move(parameters), options);
  };
}

MakeOptimizer sgd_nesterov() {
  return [](std::vector<Tensor> parameters) {
    optim::SgdOptions options;
    options.learning_rate = 0.02;
    options.momentum = 0.9;
    options.nesterov = true;
    return std::make_unique<optim::Sgd>(std::move(parameters), options);
  };
}

double largest_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 0, difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(a[i]));
    difference = std::max(difference, std::abs(a[i] - b[i]));
  }
  return difference / scale;
}

// Plain data parallelism and ZeRO-1 from the same start, `steps` steps each.
void expect_same_training(const MakeOptimizer& make, DType dtype, double tolerance) {
  Model plain(dtype), sharded(dtype);
  const std::unique_ptr<optim::Optimizer> whole = make(plain.parameters);
  ShardedOptimizer zero(sharded.parameters, make);
  for (int step = 0; step < 6; ++step) {
    backward_on_share(plain, world());
    average_gradients(plain.parameters, world());
    whole->step();
    backward_on_share(sharded, world());
    zero.step();
  }
  EXPECT_LE(largest_relative_difference(plain.values(), sharded.values()), tolerance) << whole->name() << " " << dtype;
  EXPECT_TRUE(same_on_every_rank(sharded.parameters));
  // The unused parameter was skipped, as the unsharded optimiser skips it.
  EXPECT_EQ(sharded.parameters[4].to_vector<double>(), Model(dtype).parameters[4].to_vector<double>());
}

// Two ranks add each element's two gradients in either order to the same sum, and the mean and
// the update are elementwise: the same arithmetic as plain data parallelism, to the last bit.
TEST(ShardedOptimizer, MatchesPlainDataParallelism) {
  const double tolerance = world().size() <= 2 ? 0 : 1e-12;
  expect_same_training(adamw(0.1), DType::f64, tolerance);
  expect_same_training(adamw(0.1), DType::f32, world().size() <= 2 ? 0 : 1e-6);
  expect_same_training(adam_with_l2(), DType::f64, tolerance);
  expect_same_training(sgd_nesterov(), DType::f64, tolerance);
}

int64_t state_elements(const nn::StateDict& state) {
  int64_t elements = 0;
  for (const auto& [key, value] : state) {
    if (value.dim() > 0) elements += value.numel();
  }
  return elements;
}

TEST(ShardedOptimizer, EachRankHoldsItsShareOfTheState) {
  Model model(DType::f32);
  ShardedOptimizer zero(model.parameters, adamw(0));
  const int64_t total = 23, size = world().size();
  const auto [first, last] = zero.owned();
  EXPECT_TRUE(last - first == total / size || last - first == total / size + 1) << first << " " << last;
  EXPECT_EQ(global_sum(static_cast<double>(last - first)), static_cast<double>(total));
  // Adam's two moments, for the owned elements only.
  EXPECT_EQ(state_elements(zero.local().state_dict()), 2 * (last - first));
  if (size == 2) {
    EXPECT_EQ(last - first, world().rank() == 0 ? 11 : 12);
  }
  // Gathered, the state is the unsharded optimiser's: two moments of every element.
  EXPECT_EQ(state_elements(zero.state_dict()), 2 * total);
}

// The whole state of ZeRO-1 on this job's ranks, saved after 3 steps, resumes ZeRO-1 on the same
// ranks and on one process to the parameters an uninterrupted run reaches 3 steps later.
TEST(ShardedOptimizer, CheckpointResumesOnAnyNumberOfRanks) {
  JobDirectory dir("eddy_zero1_");
  const std::string path = (dir.path() / "state.safetensors").string();
  Model model(DType::f64);
  ShardedOptimizer zero(model.parameters, adamw(0.1));
  for (int step = 0; step < 3; ++step) {
    backward_on_share(model, world());
    zero.step();
  }
  nn::StateDict saved = zero.state_dict();
  for (size_t i = 0; i < model.parameters.size(); ++i) saved[cat("parameter.", i)] = model.parameters[i];
  if (world().rank() == 0) io::save_safetensors(path, saved);
  world().barrier();

  // The unsharded optimiser, run alongside, holds the same state under the same keys.
  Model plain(DType::f64);
  const std::unique_ptr<optim::Optimizer> whole = adamw(0.1)(plain.parameters);
  for (int step = 0; step < 3; ++step) {
    backward_on_share(plain, world());
    average_gradients(plain.parameters, world());
    whole->step();
  }
  const nn::StateDict expected = whole->state_dict();
  for (const auto& [key, value] : expected) {
    ASSERT_TRUE(saved.count(key)) << key;
    EXPECT_EQ(cast(saved.at(key), DType::f64).to_vector<double>(), cast(value, DType::f64).to_vector<double>()) << key;
  }

  for (int step = 0; step < 3; ++step) {
    backward_on_share(model, world());
    zero.step();
  }
  const std::vector<double> uninterrupted = model.values();

  const nn::StateDict loaded = io::load_safetensors(path).tensors;
  auto resumed = [&](Communicator& comm) {
    Model restarted(DType::f64);
    {
      NoGradGuard no_grad;
      for (size_t i = 0; i < restarted.parameters.size(); ++i) {
        Tensor(restarted.parameters[i]).copy_(loaded.at(cat("parameter.", i)));
      }
    }
    ShardedOptimizer again(restarted.parameters, adamw(0.1), RankGradients::to_average, comm);
    again.load_state_dict(loaded);
    EXPECT_EQ(again.steps(), 3);
    for (int step = 0; step < 3; ++step) {
      backward_on_share(restarted, comm);
      again.step();
    }
    return restarted.values();
  };
  EXPECT_EQ(resumed(world()), uninterrupted);
  // One process sums each gradient over all rows at once, where the ranks summed their shares and
  // then the ranks' sums: the last bits differ.
  const std::unique_ptr<Communicator> alone = make_single_process_communicator();
  EXPECT_LE(largest_relative_difference(resumed(*alone), uninterrupted), 1e-12);
}

// The reduce-scatter carries a trainer's sums (its step's loss) as average_gradients() does.
TEST(ShardedOptimizer, ReduceGradientsSumsAlongside) {
  Model model(DType::f64);
  ShardedOptimizer zero(model.parameters, adamw(0));
  backward_on_share(model, world());
  std::vector<double> sums = {double(world().rank()), 1.0};
  zero.reduce_gradients(sums);
  EXPECT_EQ(sums[0], world().size() * (world().size() - 1) / 2.0);
  EXPECT_EQ(sums[1], double(world().size()));
}

// Gradients already summed over ranks (distributed tensors' backward pass) are only sliced.
TEST(ShardedOptimizer, IdenticalGradientsAreOnlySliced) {
  Model plain(DType::f64), sharded(DType::f64);
  const std::unique_ptr<optim::Optimizer> whole = adamw(0.1)(plain.parameters);
  ShardedOptimizer zero(sharded.parameters, adamw(0.1), RankGradients::identical);
  for (int step = 0; step < 3; ++step) {
    backward_on_rows(plain, 0, kRows, 1, true);
    whole->step();
    backward_on_rows(sharded, 0, kRows, 1, true);
    zero.step();
  }
  EXPECT_EQ(plain.values(), sharded.values());
}

TEST(ShardedOptimizer, RefusesWhatItCannotShard) {
  Model model(DType::f64);
  expect_error(
      [&] {
        ShardedOptimizer zero(model.parameters, [](std::vector<Tensor> slices) {
          return std::make_unique<optim::Soap>(std::move(slices), optim::SoapOptions{});
        });
      },
      {"ShardedOptimizer (ZeRO stage 1)", "soap cannot have its state sharded", "adam, adamw and sgd"});
  const Tensor other = zeros({4}, DType::f32).requires_grad_();
  expect_error([&] { ShardedOptimizer zero({model.parameters[0], other}, adamw(0)); },
               {"parameter 1 is float32 but parameter 0 is float64", "one ShardedOptimizer per dtype"});
  if (world().size() > 1) {
    const Tensor single = zeros({1}, DType::f64).requires_grad_();
    expect_error([&] { ShardedOptimizer zero({single}, adamw(0)); },
                 {"1 parameter elements cannot be shared out over", "ranks"});
  }
  if (world().size() > 1) {
    // Parameters that differ by rank failed in MPI (sizes) or were summed unrelated (shapes).
    const Tensor sized_by_rank = zeros({4 + (world().rank() == 1 ? 1 : 0)}, DType::f64).requires_grad_();
    expect_error([&] { ShardedOptimizer zero({sized_by_rank}, adamw(0)); },
                 {"every rank must pass the same parameters, in the same order and shapes"});
    const Shape shape = world().rank() == 1 ? Shape{3, 2} : Shape{2, 3};
    const Tensor shaped_by_rank = zeros(shape, DType::f64).requires_grad_();
    expect_error([&] { ShardedOptimizer zero({shaped_by_rank}, adamw(0)); }, {"(in other shapes)"});
  }
  ShardedOptimizer zero(model.parameters, adamw(0));
  nn::StateDict state = zero.state_dict();
  state.erase("adamw.v.2");
  expect_error([&] { zero.load_state_dict(state); }, {"missing key \"adamw.v.2\"", "expected shape [1]"});
}

}  // namespace
}  // namespace eddy::dist
