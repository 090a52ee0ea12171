// Data-parallel `eddy train`: on N ranks the per-epoch training loss is the one a single process
// gets on the same global batches, to float64 rounding. ctest runs this binary as a plain process
// and under `mpirun -np 2`; on every rank the reference is a single-process training of its own.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numbers>

#include "eddy/dist/communicator.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"
#include "solvers/operator/trainer.h"
#include "support/smoothing_data.h"
#include "support/expect_error.h"
#include "support/job_directory.h"

namespace eddy::operator_learning {
namespace {

namespace fs = std::filesystem;

class DataParallelTraining : public ::testing::Test {
 protected:
  // Rank 0 writes the data into the job's folder.
  void SetUp() override {
    if (world().rank() == 0) write_data((dir_ / "smooth.h5").string());
    world().barrier();
  }

  // 37 training samples of a smoothing operator, a count that
  // leaves uneven and empty shares of the last batches.
  static void write_data(const std::string& path) {
    write_smoothing_data(path, {{"train", 37, 16}, {"test", 8, 16}}, 3, 5);
  }

  static constexpr const char* kFno =
      "{type: fno, modes: [4], width: 6, layers: 2, projection_width: 8, grid_coordinates: false}";

  OperatorProblem problem(const std::string& run, int64_t batch_size, const std::string& loss = "relative_l2",
                          const std::string& file = "smooth.h5", const std::string& model = kFno) const {
    return problem_in((dir_ / run).string(), batch_size, loss, file, model);
  }
  OperatorProblem problem_in(const std::string& run_dir, int64_t batch_size, const std::string& loss = "relative_l2",
                             const std::string& file = "smooth.h5", const std::string& model = kFno) const {
    const std::string text =
        cat("data:\n  file: ", (dir_ / file).string(),
            "\n  train: {input: train/u, output: train/smooth}\n"
            "  test:\n    - {name: fine, input: test/u, output: test/smooth}\n"
            "model: ", model, "\n"
            "training: {epochs: 4, batch_size: ", batch_size, ", learning_rate: 1.0e-2, dtype: float64, loss: ", loss,
            "}\noutput: {dir: ", run_dir, ", checkpoint_every: 2}\n");
    auto config = io::Config::parse(text, "test.yaml", {});
    return read_operator_problem(*config);
  }

  // The training loss of every epoch of run `got` against run `want`'s (1e-10 relative), as their
  // predictions.h5 record them; returns want's.
  static std::vector<double> expect_same_losses(const OperatorProblem& got, const OperatorProblem& want) {
    auto losses = [](const OperatorProblem& p) {
      return io::read_hdf5(p.output.dir + "/predictions.h5", "history/train_loss").to_vector<double>();
    };
    const std::vector<double> got_losses = losses(got), want_losses = losses(want);
    EXPECT_EQ(got_losses.size(), want_losses.size());
    for (size_t e = 0; e < std::min(got_losses.size(), want_losses.size()); ++e) {
      EXPECT_NEAR(got_losses[e], want_losses[e], 1e-10 * want_losses[e]) << "epoch " << e + 1;
    }
    return want_losses;
  }

  JobDirectory job_{"eddy_data_parallel_"};
  const fs::path& dir_ = job_.path();
};

// Batch 12: shares 6/6 and a last batch of 1 (1/0 on two ranks); 13: uneven 7/6 shares.
TEST_F(DataParallelTraining, LossPerEpochMatchesOneProcess) {
  for (const auto& [batch, loss] : {std::pair{12, "relative_l2"}, std::pair{13, "mse"}}) {
    SCOPED_TRACE(cat("batch_size ", batch, ", loss ", loss, ", rank ", world().rank()));
    const auto serial_communicator = dist::make_single_process_communicator();
    TrainOptions serial_options;
    serial_options.communicator = serial_communicator.get();
    const OperatorProblem serial_problem = problem(cat("serial_", batch, "_rank", world().rank()), batch, loss);
    const TrainResult serial = train(serial_problem, serial_options);
    ASSERT_TRUE(serial.finished) << serial.message;

    const OperatorProblem parallel_problem = problem(cat("parallel_", batch), batch, loss);
    const TrainResult parallel = train(parallel_problem, {});
    ASSERT_TRUE(parallel.finished) << parallel.message;
    EXPECT_NEAR(parallel.train_loss, serial.train_loss, 1e-10 * serial.train_loss);

    // Rank 0 wrote the run folder, and train() returned on every rank only after it had.
    const std::vector<double> serial_history = expect_same_losses(parallel_problem, serial_problem);
    ASSERT_EQ(serial_history.size(), 4u);
    // The training made progress, so matching losses are not two constant sequences.
    EXPECT_LT(serial_history.back(), 0.9 * serial_history.front());

    // ZeRO stage 1: the same steps, with each rank keeping AdamW's moments for half the weights.
    OperatorProblem zero_problem = problem(cat("zero1_", batch), batch, loss);
    zero_problem.training.zero_stage = 1;
    const TrainResult zero = train(zero_problem, {});
    ASSERT_TRUE(zero.finished) << zero.message;
    expect_same_losses(zero_problem, serial_problem);
    // Every rank returns the test errors (a script branching on them takes one path).
    EXPECT_NEAR(parallel.test_relative_l2.at("fine"), serial.test_relative_l2.at("fine"),
                1e-9 * serial.test_relative_l2.at("fine"));
    if (world().rank() == 0) {
      EXPECT_TRUE(fs::exists(parallel_problem.output.dir + "/checkpoint.safetensors"));
    }
  }
}

// A DeepONet's batches (sensor values, and the query points every rank holds) split over the ranks
// as an FNO's do: 37 samples in batches of 13, shares a sample apart.
TEST_F(DataParallelTraining, ADeepOnetMatchesOneProcess) {
  SCOPED_TRACE(cat("rank ", world().rank()));
  const std::string deeponet = "{type: deeponet, latent: 8, width: 16, depth: 2, activation: tanh}";
  const auto single = dist::make_single_process_communicator();
  TrainOptions on_one_process;
  on_one_process.communicator = single.get();
  const OperatorProblem serial_problem =
      problem(cat("deeponet_serial_rank", world().rank()), 13, "mse", "smooth.h5", deeponet);
  ASSERT_TRUE(train(serial_problem, on_one_process).finished);
  const OperatorProblem parallel_problem = problem("deeponet_parallel", 13, "mse", "smooth.h5", deeponet);
  const TrainResult parallel = train(parallel_problem, {});
  ASSERT_TRUE(parallel.finished) << parallel.message;
  const std::vector<double> losses = expect_same_losses(parallel_problem, serial_problem);
  EXPECT_LT(losses.back(), losses.front());
}

// A `parallel` section trains on distributed batches (docs/distributed.md): each batch split over
// dp, each field's grid split over grid, or both on 4 ranks. Each gives the one-process losses
// and test errors. Under mpirun the mesh is the job's ranks; as one process the section is ignored.
TEST_F(DataParallelTraining, ParallelSectionMatchesOneProcess) {
  const auto single = dist::make_single_process_communicator();
  TrainOptions on_one_process;
  on_one_process.communicator = single.get();
  const int64_t ranks = world().size();
  std::vector<std::pair<Shape, std::vector<std::string>>> layouts{{{ranks}, {"dp"}}, {{ranks}, {"grid"}}};
  if (ranks == 4) layouts.push_back({{2, 2}, {"dp", "grid"}});
  for (const auto& [mesh, names] : layouts) {
    const std::string name = cat(names.front(), names.size());
    SCOPED_TRACE(cat(name, " on rank ", world().rank()));
    // 36 samples in batches of 12: every batch splits evenly over 2 and 4 ranks.
    OperatorProblem serial_problem = problem(cat("serial_", name, "_rank", world().rank()), 12);
    serial_problem.data.train.samples = 36;
    const TrainResult serial = train(serial_problem, on_one_process);
    ASSERT_TRUE(serial.finished) << serial.message;

    OperatorProblem placed = problem(cat("placed_", name), 12);
    placed.data.train.samples = 36;
    placed.parallel.mesh = mesh;
    placed.parallel.names = names;
    const TrainResult result = train(placed, {});
    ASSERT_TRUE(result.finished) << result.message;
    EXPECT_NEAR(result.train_loss, serial.train_loss, 1e-10 * serial.train_loss);
    expect_same_losses(placed, serial_problem);
    if (world().rank() == 0) {
      EXPECT_NEAR(result.test_relative_l2.at("fine"), serial.test_relative_l2.at("fine"),
                  1e-9 * serial.test_relative_l2.at("fine"));
    }
  }
  // 37 samples in batches of 12 end with a batch of 1: one dp rank's share of it is empty.
  if (world().size() == 2) {
    OperatorProblem serial_problem = problem(cat("serial_uneven_rank", world().rank()), 12);
    const TrainResult serial = train(serial_problem, on_one_process);
    ASSERT_TRUE(serial.finished) << serial.message;
    OperatorProblem uneven = problem("uneven", 12);
    uneven.parallel.mesh = {2};
    uneven.parallel.names = {"dp"};
    const TrainResult result = train(uneven, {});
    ASSERT_TRUE(result.finished) << result.message;
    expect_same_losses(uneven, serial_problem);
  }
}

// Each rank reads only its consecutive share of the training samples (so a training set may exceed
// one node's memory), while the normalisers' statistics are those of the whole set.
TEST_F(DataParallelTraining, EachRankReadsItsShareOfTheTrainingSet) {
  SCOPED_TRACE(cat("rank ", world().rank()));
  const OperatorProblem p = problem("share", 12);
  const Dataset data = load_data(p);
  const auto single = dist::make_single_process_communicator();
  const Dataset whole = load_data(p, *single);
  const auto [first, last] = dist::shard(0, 37, world().rank(), world().size());
  EXPECT_EQ(data.train.size, 37);
  EXPECT_EQ(data.train.first, first);
  EXPECT_EQ(data.train.held(), last - first);
  EXPECT_EQ(whole.train.held(), 37);
  EXPECT_EQ(max(abs(data.train.output - slice(whole.train.output, 0, first, last))).item<double>(), 0.0);
  EXPECT_EQ(data.tests.at(0).held(), 8);  // test sets are read whole

  OperatorModel parallel(p, data.train), serial(p, whole.train, *single);
  const nn::StateDict parallel_state = parallel.state_dict(), serial_state = serial.state_dict();
  int statistics = 0;
  for (const auto& [name, value] : serial_state) {
    if (name.find("normalizer") == std::string::npos) continue;
    ++statistics;
    EXPECT_LT(max(abs(parallel_state.at(name) - value)).item<double>(), 1e-14) << name;
  }
  EXPECT_EQ(statistics, 4);  // mean and deviation of input and output
}

// A checkpoint holds nothing of the ranks that wrote it (the shuffle depends on the seed and the
// epoch only), so a run stopped on N ranks goes on on M and ends where an uninterrupted
// single-process run ends: here 2 -> 1 and 1 -> 2.
TEST_F(DataParallelTraining, ACheckpointFromNRanksResumesOnM) {
  SCOPED_TRACE(cat("rank ", world().rank()));
  const auto single = dist::make_single_process_communicator();
  TrainOptions on_one_process;
  on_one_process.communicator = single.get();
  TrainOptions resume_on_one = on_one_process, resume_on_all;
  resume_on_one.resume = resume_on_all.resume = true;
  const TrainResult whole = train(problem(cat("whole_rank", world().rank()), 13), on_one_process);
  ASSERT_TRUE(whole.finished) << whole.message;

  OperatorProblem first_half = problem("split", 13);
  first_half.training.epochs = 2;
  ASSERT_TRUE(train(first_half, {}).finished);  // rank 0 has written the checkpoint when this returns
  const fs::path copy = dir_ / cat("split_rank", world().rank());
  fs::copy(dir_ / "split", copy, fs::copy_options::recursive);
  const OperatorProblem rest = problem_in(copy.string(), 13);
  const TrainResult narrowed = train(rest, resume_on_one);
  ASSERT_TRUE(narrowed.finished) << narrowed.message;
  EXPECT_EQ(narrowed.epochs, 4);
  EXPECT_NEAR(narrowed.train_loss, whole.train_loss, 1e-10 * whole.train_loss);

  const OperatorProblem widened = problem("widened", 13);
  if (world().rank() == 0) {
    OperatorProblem first_on_one = widened;
    first_on_one.training.epochs = 2;
    ASSERT_TRUE(train(first_on_one, on_one_process).finished);
  }
  world().barrier();
  const TrainResult widened_result = train(widened, resume_on_all);
  ASSERT_TRUE(widened_result.finished) << widened_result.message;
  EXPECT_NEAR(widened_result.train_loss, whole.train_loss, 1e-10 * whole.train_loss);
}

// A checkpoint of ZeRO stage 1 holds the whole optimiser state, as plain data parallelism's does,
// so it goes on on one process to the uninterrupted run's loss.
TEST_F(DataParallelTraining, AZeroStage1CheckpointResumesOnOneProcess) {
  SCOPED_TRACE(cat("rank ", world().rank()));
  const auto single = dist::make_single_process_communicator();
  TrainOptions on_one_process;
  on_one_process.communicator = single.get();
  const TrainResult whole = train(problem(cat("whole_rank", world().rank()), 13), on_one_process);
  ASSERT_TRUE(whole.finished) << whole.message;

  OperatorProblem first_half = problem("zero1", 13);
  first_half.training.epochs = 2;
  first_half.training.zero_stage = 1;
  ASSERT_TRUE(train(first_half, {}).finished);
  const fs::path copy = dir_ / cat("zero1_rank", world().rank());
  fs::copy(dir_ / "zero1", copy, fs::copy_options::recursive);
  TrainOptions resume_on_one = on_one_process;
  resume_on_one.resume = true;
  const TrainResult resumed = train(problem_in(copy.string(), 13), resume_on_one);
  ASSERT_TRUE(resumed.finished) << resumed.message;
  EXPECT_EQ(resumed.epochs, 4);
  EXPECT_NEAR(resumed.train_loss, whole.train_loss, 1e-10 * whole.train_loss);
}

// A missing data file fails on every rank before the first collective: if one rank went on into
// the parameter broadcast, this test would hang (and ctest's timeout would fail it).
TEST_F(DataParallelTraining, DataErrorsFailOnEveryRankAlike) {
  expect_error([&] { train(problem("missing", 12, "mse", "missing.h5"), {}); }, {"missing.h5"});
  world().barrier();
}

}  // namespace
}  // namespace eddy::operator_learning
