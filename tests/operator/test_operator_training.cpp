// `eddy train` end to end on small synthetic operators: FNO learns a smoothing operator and
// DeepONet an antiderivative; resume is bit-exact; compiled steps give the eager numbers; config
// and data errors name their source.

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <numbers>
#include <sstream>

#include "eddy/eddy.h"
#include "eddy/io/checkpoint.h"
#include "eddy/io/hdf5.h"
#include "eddy/compiler/predictor.h"
#include "solvers/operator/export.h"
#include "solvers/operator/trainer.h"
#include "support/expect_error.h"
#include "support/smoothing_data.h"

namespace eddy::operator_learning {
namespace {

namespace fs = std::filesystem;

class OperatorTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("eddy_operator_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    write_smoothing_data((dir_ / "smooth.h5").string());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Trained at 32 points, tested at 64.
  static void write_smoothing_data(const std::string& path) {
    eddy::write_smoothing_data(path, {{"train", 64, 32}, {"test", 16, 64}}, 4, 3);
  }

  std::string config(const std::string& extra = "") const {
    return cat("data:\n  file: ", (dir_ / "smooth.h5").string(),
               "\n  train: {input: train/u, output: train/smooth}\n"
               "  test:\n    - {name: fine, input: test/u, output: test/smooth}\n"
               "    - {name: coarse, input: test/u, output: test/smooth, stride: 2}\n"
               "model: {type: fno, modes: [6], width: 8, layers: 2, projection_width: 16, grid_coordinates: false}\n"
               "training: {epochs: 30, batch_size: 16, learning_rate: 1.0e-2, dtype: float64}\n"
               "output: {dir: ", (dir_ / "run").string(), ", checkpoint_every: 2}\n", extra);
  }

  // u(x) = sum of random cosines at 20 sensors, and G(u)(y) = integral_0^y u, exactly, at 25
  // points y: 200 training and 50 test pairs. Returns the file's path.
  std::string write_antiderivative_data() const {
    const std::string path = (dir_ / "anti.h5").string();
    io::Hdf5Writer out(path);
    Generator generator(4);
    const int64_t sensors = 20, points = 25;
    Tensor xs = linspace(0, 1, sensors, DType::f64), ys = linspace(0, 1, points, DType::f64);
    for (const auto& [split, count] : {std::pair{"train", 200}, std::pair{"test", 50}}) {
      Tensor u = zeros({count, sensors}, DType::f64), g = zeros({count, points}, DType::f64);
      for (int k = 0; k < 3; ++k) {
        Tensor c = randn({count, 1}, DType::f64, &generator);
        const double w = std::numbers::pi * k;
        u = u + c * cos(w * xs);
        g = g + c * (k == 0 ? ys : sin(w * ys) / w);
      }
      out.write(std::string(split) + "/u", u);
      out.write(std::string(split) + "/g", g);
    }
    out.write("y", ys);
    out.commit();
    return path;
  }

  static OperatorProblem problem_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
    auto config = io::Config::parse(text, "test.yaml", overrides);
    return read_operator_problem(*config);
  }

  fs::path dir_;
};

// A run of no epochs said "training loss 0", a loss nothing had computed.
TEST_F(OperatorTraining, ARunOfNoEpochsReportsNoTrainingLoss) {
  const TrainResult result = train(problem_of(config(), {"training.epochs=0"}), {});
  ASSERT_TRUE(result.finished) << result.message;
  EXPECT_NE(result.message.find("0 epochs; no training step taken"), std::string::npos) << result.message;
  EXPECT_TRUE(std::isnan(result.train_loss));
}

TEST_F(OperatorTraining, FnoLearnsASmoothingOperatorAndEvaluatesAtAnotherResolution) {
  const OperatorProblem problem = problem_of(config());
  const TrainResult result = train(problem, {});
  ASSERT_TRUE(result.finished) << result.message;
  // Trained at 32 points, tested at 64 and at 32 (stride 2) with the same weights.
  EXPECT_LT(result.test_relative_l2.at("fine"), 0.05);
  EXPECT_LT(result.test_relative_l2.at("coarse"), 0.05);
  const std::string predictions = (dir_ / "run" / "predictions.h5").string();
  // In the data file's layout, which has no channel axis (it had the model's [16, 1, 64]).
  EXPECT_EQ(io::read_hdf5(predictions, "test/fine/prediction").shape(), (Shape{16, 64}));
  EXPECT_EQ(io::read_hdf5(predictions, "test/coarse/prediction").shape(), (Shape{16, 32}));
  const Tensor history = io::read_hdf5(predictions, "history/train_loss");
  ASSERT_EQ(history.shape(), (Shape{30}));
  EXPECT_LT(history.to_vector<double>().back(), 0.2 * history.to_vector<double>().front());
  EXPECT_TRUE(fs::exists(dir_ / "run" / "sample0_fine.vti"));
}

TEST_F(OperatorTraining, ResumeContinuesBitExactly) {
  // Evaluated every 3 epochs: the shortened run's last epoch, 2, is off that cadence, and its
  // evaluation stayed in the resumed run's history (test_epoch [2, 3, 4] against [3, 4]).
  const OperatorProblem straight = problem_of(
      config(), {"training.epochs=4", "training.evaluate_every=3", "output.dir=" + (dir_ / "a").string()});
  ASSERT_TRUE(train(straight, {}).finished);
  // Stopped after the checkpoint of epoch 2 (a 2-epoch run), then resumed to 4.
  const OperatorProblem first = problem_of(
      config(), {"training.epochs=4", "training.evaluate_every=3", "output.dir=" + (dir_ / "b").string()});
  OperatorProblem shortened = first;
  shortened.training.epochs = 2;
  ASSERT_TRUE(train(shortened, {}).finished);
  TrainOptions resume;
  resume.resume = true;
  const TrainResult resumed = train(first, resume);
  ASSERT_TRUE(resumed.finished) << resumed.message;
  const std::string a = (dir_ / "a" / "predictions.h5").string(), b = (dir_ / "b" / "predictions.h5").string();
  EXPECT_EQ(max(abs(io::read_hdf5(a, "test/fine/prediction") - io::read_hdf5(b, "test/fine/prediction")))
                .item<double>(),
            0.0);
  EXPECT_EQ(io::read_hdf5(a, "history/train_loss").to_vector<double>(),
            io::read_hdf5(b, "history/train_loss").to_vector<double>());
  EXPECT_EQ(io::read_hdf5(b, "history/test_epoch").to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_EQ(io::read_hdf5(a, "history/test_relative_l2/fine").to_vector<double>(),
            io::read_hdf5(b, "history/test_relative_l2/fine").to_vector<double>());
  // The run's length is counted in epochs, and a resume past it says so (it said "step 4").
  OperatorProblem shorter = first;
  shorter.training.epochs = 3;
  const std::string error = error_of([&] { train(shorter, resume); });
  EXPECT_NE(error.find("is at epoch 4, past this run's end (3: training.epochs)"), std::string::npos) << error;
}

// A resume onto other training data went on with the checkpoint's normalisers (the loss jumped
// from 0.003 to 1.0, silently); the same data, written again, resumes.
// Each split's file follows data.file when a run's config.yaml is read again with it overridden: the
// splits' files were written resolved, and the rerun trained and tested on the first run's file.
TEST_F(OperatorTraining, SplitsFollowDataFileWhenARunsConfigIsReadAgain) {
  const OperatorProblem first = problem_of(config());
  const std::string file = (dir_ / "smooth.h5").string(), other = (dir_ / "other.h5").string();
  const OperatorProblem again = problem_of(first.resolved_config, {"data.file=" + other});
  EXPECT_EQ(again.data.train.file, other);
  ASSERT_EQ(again.data.tests.size(), 2u);
  for (const SplitSpec& test : again.data.tests) EXPECT_EQ(test.file, other);
  // Checkpoints record them as they did when config.yaml held them: the list of test sets whole.
  EXPECT_EQ(first.derived_settings.at("data.train.file"), file);
  EXPECT_NE(first.derived_settings.at("data.test").find("file: " + file + ", first: 0"), std::string::npos)
      << first.derived_settings.at("data.test");
}

// The mean squared error is taken in units of the outputs' deviation, so data of magnitude 1e-4
// train as data of magnitude 1 do (on physical values the gradients fell below AdamW's eps, and
// the model learned nothing: test error 1.0).
TEST_F(OperatorTraining, AnMseLossLearnsDataOfAnyMagnitude) {
  eddy::write_smoothing_data((dir_ / "small.h5").string(), {{"train", 64, 32}, {"test", 16, 64}}, 4, 3, 1e-4);
  const auto run = [&](const std::string& file, const std::string& folder) {
    return train(problem_of(config(), {"training.loss=mse", "training.epochs=10", "data.file=" + (dir_ / file).string(),
                                       "output.dir=" + (dir_ / folder).string()}),
                 {});
  };
  const TrainResult unit = run("smooth.h5", "unit"), small = run("small.h5", "small");
  ASSERT_TRUE(unit.finished && small.finished);
  EXPECT_LT(unit.test_relative_l2.at("fine"), 0.5);
  EXPECT_NEAR(small.train_loss / unit.train_loss, 1, 1e-6);
  EXPECT_NEAR(small.test_relative_l2.at("fine") / unit.test_relative_l2.at("fine"), 1, 1e-6);
}

TEST_F(OperatorTraining, AResumeOntoOtherTrainingDataIsRefused) {
  const OperatorProblem first = problem_of(config(), {"training.epochs=2"});
  ASSERT_TRUE(train(first, {}).finished);
  TrainOptions resume;
  resume.resume = true;
  write_smoothing_data((dir_ / "smooth.h5").string());  // the same samples, a new file
  ASSERT_TRUE(train(problem_of(config(), {"training.epochs=3"}), resume).finished);
  eddy::write_smoothing_data((dir_ / "smooth.h5").string(), {{"train", 64, 32}, {"test", 16, 64}}, 4, 4);
  const std::string error = error_of([&] { train(problem_of(config(), {"training.epochs=4"}), resume); });
  EXPECT_NE(error.find("--resume: data.train (its samples' content) is "), std::string::npos) << error;
  EXPECT_NE(error.find(" now; only training settings may change"), std::string::npos) << error;
  EXPECT_NE(error.find("Start a new run (another output.dir)"), std::string::npos) << error;
}

TEST_F(OperatorTraining, DeepOnetLearnsTheAntiderivative) {
  // The cosine schedule settles the last epochs: at a constant rate the final error ranged from
  // 0.04 to 0.08 over seeds, and rounding-level differences (compiled kernels against eager ones)
  // moved it as far; with the schedule it stayed within 0.027 to 0.036 over six seeds, compiled
  // or eager.
  const std::string text = cat("data:\n  file: ", write_antiderivative_data(),
                               "\n  points: y\n  train: {input: train/u, output: train/g}\n"
                               "  test: {name: test, input: test/u, output: test/g}\n"
                               "model: {type: deeponet, latent: 20, width: 40, depth: 2, activation: tanh}\n"
                               "training: {epochs: 300, batch_size: 25, learning_rate: 2.0e-3, dtype: float64,\n"
                               "           schedule: {type: cosine}}\n"
                               "output: {dir: ", (dir_ / "deeponet").string(), "}\n");
  const TrainResult result = train(problem_of(text), {});
  ASSERT_TRUE(result.finished) << result.message;
  EXPECT_LT(result.test_relative_l2.at("test"), 0.05);
}

// `eddy export` of an operator run: the artifact, loaded without the trainer, predicts what the
// trainer wrote for a test set on the training grid (normalisers included), for any number of
// samples, taking and giving rows in the data file's layout; DeepONet's query points travel
// inside it.
TEST_F(OperatorTraining, ExportedModelPredictsWhatTheTrainerWrote) {
  const std::string deeponet = cat("data:\n  file: ", write_antiderivative_data(),
                                   "\n  points: y\n  train: {input: train/u, output: train/g}\n"
                                   "  test: {name: test, input: test/u, output: test/g}\n"
                                   "model: {type: deeponet, latent: 8, width: 16, depth: 2, activation: tanh}\n"
                                   "training: {epochs: 3, batch_size: 25, learning_rate: 2.0e-3, dtype: float64}\n"
                                   "output: {dir: ", (dir_ / "deeponet").string(), "}\n");
  struct Case {
    OperatorProblem problem;
    std::string test_set;  // one on the training grid
    Shape traced;
  };
  const std::vector<Case> cases{
      {problem_of(config(), {"training.epochs=3"}), "coarse", {7, 32}},
      {problem_of(deeponet), "test", {7, 20}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.problem.output.dir);
    ASSERT_TRUE(train(c.problem, {}).finished);
    const ExportSummary summary = export_run(c.problem.output.dir, "", 7);
    EXPECT_EQ(summary.input_shape, c.traced);
    EXPECT_EQ(summary.signature.inputs.at(0).name, c.problem.data.train.input);
    EXPECT_EQ(summary.signature.outputs, std::vector<std::string>{c.problem.data.train.output});
    const Predictor predictor = Predictor::load(summary.dir);
    const std::string predictions = c.problem.output.dir + "/predictions.h5";
    // predictions.h5 holds the data file's layout, as the artifact takes and gives it.
    const Tensor input = io::read_hdf5(predictions, "test/" + c.test_set + "/input");
    const Tensor expected = io::read_hdf5(predictions, "test/" + c.test_set + "/prediction");
    const Tensor predicted = predictor.predict({input}).at(0);  // 16 or 50 samples: a padded last batch
    ASSERT_EQ(predicted.shape(), expected.shape());
    EXPECT_LT(max(abs(predicted - expected)).item<double>(), 1e-10 * max(abs(expected)).item<double>());
    if (c.problem.model.type == ModelType::deeponet) {
      expect_error([&] { export_run(c.problem.output.dir, "", 7, {64}); }, {"--grid applies to FNO runs"});
    }
  }
}

// An FNO trained at 32 points, exported for 64: the artifact takes and gives rows on that grid and
// predicts what the trainer wrote for the test set there. --grid is checked against the model.
TEST_F(OperatorTraining, FnoExportedForAnotherGridPredictsThere) {
  const OperatorProblem problem = problem_of(config(), {"training.epochs=3"});
  ASSERT_TRUE(train(problem, {}).finished);
  const ExportSummary summary = export_run(problem.output.dir, (dir_ / "fine").string(), 5, {64});
  EXPECT_EQ(summary.input_shape, (Shape{5, 64}));
  const std::string predictions = problem.output.dir + "/predictions.h5";
  const Tensor input = io::read_hdf5(predictions, "test/fine/input");
  const Tensor expected = io::read_hdf5(predictions, "test/fine/prediction");
  const Tensor predicted = Predictor::load(summary.dir).predict({input}).at(0);
  ASSERT_EQ(predicted.shape(), (Shape{16, 64}));
  EXPECT_LT(max(abs(predicted - expected)).item<double>(), 1e-10 * max(abs(expected)).item<double>());

  const auto export_for = [&](const std::vector<int64_t>& grid) {
    return [&, grid] { export_run(problem.output.dir, (dir_ / "bad").string(), 5, grid); };
  };
  expect_error(export_for({64, 64}), {"--grid gives 2 sizes ([64, 64]) but the model has 1 spatial axes"});
  expect_error(export_for({1}), {"--grid sizes must be at least 2 points, got [1]"});
  // Said once, without the hint for a missing training file, which is there ("export: export: ...
  // put the file back there").
  const std::string message = error_of(export_for({1}));
  EXPECT_EQ(message.find("export: export:"), std::string::npos) << message;
  EXPECT_EQ(message.find("put the file back"), std::string::npos) << message;

  // The training file replaced by one at another resolution: the model would be rebuilt on that
  // grid (its padding scaled to it), and predict otherwise than the trainer; export refuses.
  const SplitSpec& train_split = problem.data.train;
  Shape input_shape = io::hdf5_shape(train_split.file, train_split.input);
  Shape output_shape = io::hdf5_shape(train_split.file, train_split.output);
  input_shape.back() *= 2;
  output_shape.back() *= 2;
  {
    io::Hdf5Writer replaced(train_split.file);
    replaced.write(train_split.input, zeros(input_shape, DType::f64) + 1);
    replaced.write(train_split.output, zeros(output_shape, DType::f64) + 1);
    replaced.commit();
  }
  expect_error(export_for({}), {"is " + to_string(input_shape) + " now", "trained on", "Put the training file back"});
}

// The compiled batch step and evaluation give the eager numbers, to float32 rounding: FNO with a
// last batch of another size (24, 24, 16: a second trace), and DeepONet with a test set at half
// its query points, which must be an input of the compiled forward pass, not a capture.
TEST_F(OperatorTraining, CompiledStepsMatchEagerOnes) {
  const std::string deeponet = cat("data:\n  file: ", write_antiderivative_data(),
                                   "\n  points: y\n  train: {input: train/u, output: train/g}\n"
                                   "  test:\n    - {name: fine, input: test/u, output: test/g}\n"
                                   "    - {name: coarse, input: test/u, output: test/g, stride: 2}\n"
                                   "model: {type: deeponet, latent: 20, width: 40, depth: 2, activation: tanh}\n"
                                   "training: {epochs: 3, batch_size: 30, learning_rate: 2.0e-3}\n"
                                   "output: {dir: ", (dir_ / "run").string(), "}\n");
  const std::vector<std::string> fno_overrides{"training.epochs=3", "training.batch_size=24", "training.dtype=float32"};
  for (const OperatorProblem& problem : {problem_of(config(), fno_overrides), problem_of(deeponet)}) {
    SCOPED_TRACE(problem.model.type == ModelType::fno ? "fno" : "deeponet");
    std::map<bool, TrainResult> results;
    std::map<bool, std::vector<double>> losses;
    std::map<bool, std::string> logs;
    for (bool eager : {true, false}) {
      std::ostringstream log;
      TrainOptions options;
      options.eager = eager;
      options.log = &log;
      results[eager] = train(problem, options);
      ASSERT_TRUE(results[eager].finished) << results[eager].message;
      losses[eager] = io::read_hdf5(problem.output.dir + "/predictions.h5", "history/train_loss").to_vector<double>();
      logs[eager] = log.str();
      fs::remove_all(problem.output.dir);
    }
    ASSERT_EQ(losses[false].size(), 3u);
    for (size_t e = 0; e < 3; ++e) EXPECT_NEAR(losses[false][e], losses[true][e], 1e-5 * losses[true][e]) << e;
    EXPECT_LT(losses[true].back(), losses[true].front());
    for (const auto& [name, error] : results[true].test_relative_l2) {
      EXPECT_NEAR(results[false].test_relative_l2.at(name), error, 1e-5 * error) << name;
    }
    EXPECT_EQ(logs[true].find("compiled"), std::string::npos) << logs[true];
    EXPECT_NE(logs[false].find("training step compiled in "), std::string::npos) << logs[false];
    EXPECT_NE(logs[false].find("evaluation compiled in "), std::string::npos) << logs[false];
  }
}

TEST_F(OperatorTraining, ANonFiniteLossStopsWithTheCheckpointNamed) {
  io::Hdf5Writer out((dir_ / "nan.h5").string());
  Tensor u = ones({4, 8}, DType::f64);
  out.write("u", u);
  // Finite data (NaN data is refused when it loads) whose squared error overflows float32 (a test
  // set of such outputs is refused when it loads: its relative L2 error cannot be taken).
  out.write("v", u * 1e30);
  out.commit();
  const std::string text = cat("data:\n  file: ", (dir_ / "nan.h5").string(),
                               "\n  normalize: false\n  train: {input: u, output: v, samples: 2}\n  test: {input: u, output: u, first: 2}\n"
                               "model: {type: fno, modes: [2], width: 4, layers: 1, projection_width: 4}\n"
                               "training: {loss: mse}\n"
                               "output: {dir: ", (dir_ / "nan").string(), "}\n");
  const TrainResult result = train(problem_of(text), {});
  EXPECT_FALSE(result.finished);
  EXPECT_NE(result.message.find("epoch 1, batch 1"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("no checkpoint was written yet"), std::string::npos) << result.message;
}

TEST_F(OperatorTraining, ConfigAndDataErrorsNameTheirSource) {
  expect_error([&] { problem_of(config("trianing: {}\n")); }, {"test.yaml", "unknown key 'trianing'"});
  expect_error([&] { problem_of(config(), {"model.modes=[0]"}); }, {"model.modes", "integers >= 1"});
  // Modes the training grid cannot hold are never trained (and a finer grid would use them so).
  expect_error([&] { OperatorModel(problem_of(config(), {"model.modes=[40]"}), training_layout(problem_of(config())),
                                   dist::default_communicator()); },
               {"command-line override 'model.modes=[40]': model.modes: entry 0 = 40 exceeds the 17 Fourier modes "
                "that the training grid's 32 points hold"});
  // The same with the grid split over ranks, where the check was skipped (every rank holds whole grids).
  expect_error([&] { OperatorModel(problem_of(config(), {"model.modes=[40]", "parallel={mesh: [2], names: [grid]}"}),
                                   training_layout(problem_of(config())), dist::default_communicator()); },
               {"model.modes: entry 0 = 40 exceeds the 17 Fourier modes"});
  // A padding whose padded grid cannot fit is refused at its key, before the first step asks for TiB.
  expect_error([&] { OperatorModel(problem_of(config(), {"model.padding=1000000000"}),
                                   training_layout(problem_of(config())), dist::default_communicator()); },
               {"command-line override 'model.padding=1000000000': model.padding: one layer's activations",
                "on the grid padded by 1000000000 need at least"});
  expect_error([&] { problem_of(config(), {"model.type=unet"}); }, {"model.type", "fno, deeponet"});
  // Weights beyond memory name the sizes that make them (layers were blamed on width, and
  // projection_width or a DeepONet's latent named no key).
  expect_error([&] { problem_of(config(), {"model.layers=1e9"}); },
               {"model.layers:", "layers 1000000000", "need at least"});
  expect_error([&] { problem_of(config(), {"model.projection_width=1e12"}); },
               {"model.projection_width:", "projection_width 1000000000000", "need at least"});
  // Export reads without it: a run trained on a larger machine exports on a smaller one.
  auto trained = io::Config::parse(config(), "test.yaml", {"model.projection_width=1e12"});
  EXPECT_NO_THROW(read_operator_problem(*trained, /*for_training=*/false));
  // Integer keys read as integers: 06 is refused as every integer key refuses it, a negative seed too.
  expect_error([&] { problem_of(config(), {"model.modes=[06]"}); }, {"model.modes[0]", "leading 0"});
  expect_error([&] { problem_of(config(), {"training.seed=-1"}); }, {"training.seed", "must be non-negative"});
  expect_error([&] { problem_of(config(), {"training.batch_size=0"}); }, {"training.batch_size", "at least 1"});
  expect_error([&] { problem_of(config(), {"data.train.stride=0"}); }, {"data.train.stride"});
  // A missing dataset lists what the file holds.
  expect_error([&] { load_data(problem_of(config(), {"data.train.input=train/a"})); },
               {"data.train", "train/a", "train/u"});
  // One spatial axis of data for a 2-D model: the shapes and the remedy are in the message (not the
  // channel key, which would leave fewer axes still).
  const std::string axes = error_of([&] { load_data(problem_of(config(), {"model.modes=[4, 4]"})); });
  EXPECT_NE(axes.find("has shape [64, 32]: samples, and a grid of 1 axis, but model.modes has 2 entries (one per "
                      "grid axis): give model.modes 1 entry"), std::string::npos) << axes;
  EXPECT_EQ(axes.find("input_channels"), std::string::npos) << axes;
  // Read as channels, the same data has no grid axis left.
  expect_error([&] { load_data(problem_of(config(), {"data.input_channels=true"})); },
               {"has shape [64, 32]: an FNO needs a grid axis after the samples' axis and the channels'"});
  expect_error([&] { load_data(problem_of(config(), {"data.train.samples=100"})); },
               {"samples = 100", "only 64"});
  // The parallel section: its axis names, and grid needing an unpadded FNO (dp need not divide
  // the batch: shares may differ by a sample).
  expect_error([&] { problem_of(config("parallel: {mesh: [2], names: [mp]}\n")); }, {"parallel.names", "dp, grid"});
  expect_error([&] { problem_of(config("parallel: {mesh: [2, 1], names: [dp]}\n")); },
               {"parallel.names", "one name per mesh axis"});
  EXPECT_EQ(problem_of(config("parallel: {mesh: [3], names: [dp]}\n")).parallel.ranks("dp"), 3);
  expect_error([&] { problem_of(config("parallel: {mesh: [2], names: [grid]}\n"), {"model.padding=4"}); },
               {"model.padding", "must be 0 when parallel.mesh splits the grid over 2 ranks"});
  expect_error([&] { problem_of(config("parallel: {mesh: [2], names: [grid]}\n"), {"model.type=deeponet"}); },
               {"parallel.names", "a DeepONet has no grid"});
}

// Values of any magnitude float32 holds train: the normalisers' statistics are taken in float64
// (in float32, inputs of 1e-25 were left unscaled as a constant channel and inputs of 1e20 scaled
// to 0, both silently). Outputs whose squared norms leave float32's range, which the relative L2
// loss needs, and values beyond float32 are refused before training, naming the remedy.
TEST_F(OperatorTraining, DataOfAnyMagnitudeFloat32HoldsIsStandardisedOrRefused) {
  const std::string source = (dir_ / "smooth.h5").string(), scaled = (dir_ / "scaled.h5").string();
  const Tensor u = io::read_hdf5(source, "train/u"), smooth = io::read_hdf5(source, "train/smooth");
  {
    io::Hdf5Writer out(scaled);
    for (const double scale : {1e-25, 1e20}) out.write(cat("train/u_", scale), cast(u, DType::f64) * scale);
    out.write("train/u_1e39", cast(u, DType::f64) * 1e39);
    out.write("train/u_1e-50", cast(u, DType::f64) * 1e-50);
    out.write("train/u", u);
    // Sample 0 zero at the even points, which a stride of 2 keeps.
    Tensor odd = contiguous(io::read_hdf5(source, "test/smooth"));
    slice(slice(odd, 0, 0, 1), 1, 0, odd.shape()[1], 2).fill_(0.0);
    out.write("test/odd", odd);
    out.write("test/u", io::read_hdf5(source, "test/u"));
    out.write("train/smooth", smooth);
    for (const double scale : {1e-21, 1e20}) out.write(cat("train/smooth_", scale), cast(smooth, DType::f64) * scale);
    out.commit();
  }
  const std::vector<std::string> files = {
      cat("data.file=", scaled), "training.dtype=float32",
      cat("data.test=[{name: t, file: ", source, ", input: test/u, output: test/smooth}]")};
  for (const double scale : {1e-25, 1e20}) {
    SCOPED_TRACE(cat("inputs times ", scale));
    std::vector<std::string> overrides = files;
    overrides.push_back(cat("data.train.input=train/u_", scale));
    const OperatorProblem p = problem_of(config(), overrides);
    const Dataset data = load_data(p);
    const Tensor wide = cast(io::read_hdf5(scaled, cat("train/u_", scale)), DType::f64);
    const double deviation = std::sqrt(mean(square(wide - mean(wide))).item<double>());
    const double stored = OperatorModel(p, data.train).state_dict().at("input_normalizer.stddev").item<double>();
    EXPECT_NEAR(stored / deviation, 1.0, 1e-6);
  }
  for (const double scale : {1e-21, 1e20}) {
    std::vector<std::string> overrides = files;
    overrides.push_back(cat("data.train.output=train/smooth_", scale));
    expect_error([&] { load_data(problem_of(config(), overrides)); },
                 {"data.train", "sample 0", scale < 1 ? "squared norm that underflows float32" : "overflows float32",
                  "training.dtype: float64"});
    overrides[1] = "training.dtype=float64";
    EXPECT_NO_THROW(load_data(problem_of(config(), overrides)));
  }
  std::vector<std::string> beyond = files;
  beyond.push_back("data.train.input=train/u_1e39");
  expect_error([&] { load_data(problem_of(config(), beyond)); },
               {"data.train", "dataset 'train/u_1e39' holds a value beyond the range of float32 at [0, ",
                "train in float64"});
  std::vector<std::string> below = files;
  below.push_back("data.train.input=train/u_1e-50");
  expect_error([&] { load_data(problem_of(config(), below)); },
               {"dataset 'train/u_1e-50' holds a value below the range of float32 (it would be 0) at [0, "});
  // The outputs are checked as the split keeps them, after its stride.
  std::vector<std::string> strided = files;
  strided[2] = cat("data.test=[{name: s2, file: ", scaled, ", input: test/u, output: test/odd, stride: 2}]");
  expect_error([&] { load_data(problem_of(config(), strided)); }, {"data.test[0]", "sample 0 is all zeros"});
  strided[2] = cat("data.test=[{name: s1, file: ", scaled, ", input: test/u, output: test/odd}]");
  EXPECT_NO_THROW(load_data(problem_of(config(), strided)));
}

TEST_F(OperatorTraining, BadTestSetsAndDataAreRefusedBeforeTraining) {
  // A misspelt key in an entry of a test-set list was ignored (`strid: 2` tested at full size).
  expect_error([&] { problem_of(config(), {"data.test=[{name: a, input: test/u, output: test/smooth, strid: 2}]"}); },
               {"unknown key 'strid' in data.test[0]", "did you mean 'stride'"});
  // Names become file names and HDF5 groups: the run trained, then failed to write its results.
  // A control character or a name too long for a file failed those writes after training too.
  const auto test_set_named = [](const std::string& name) {
    return cat("data.test=[{name: \"", name, "\", input: test/u, output: test/smooth}]");
  };
  for (const std::string& name : std::vector<std::string>{"a/b", "", ".", "..", "a\\tb", std::string(232, 'n')}) {
    expect_error([&] { problem_of(config(), {test_set_named(name)}); }, {"data.test[0].name", "a test set's name"});
  }
  EXPECT_NO_THROW(problem_of(config(), {test_set_named(std::string(231, 'n'))}));
  // Too coarse a stride for a spectral layer: found at load, not after the first epoch.
  expect_error([&] { load_data(problem_of(config(), {"data.train.stride=32"})); },
               {"data.train", "the grid [64, 1, 1] at stride 32", "at least 2 points"});
  expect_error([&] { problem_of(config(), {"data.points=y"}); }, {"data.points", "DeepONet"});
  // The channel axes are an FNO's: a DeepONet run with them set trained as if they were not.
  expect_error([&] { problem_of(config(), {"model.type=deeponet", "data.input_channels=true"}); },
               {"data.input_channels", "FNO's channel axis"});
  expect_error([&] { problem_of(config(), {"model.type=deeponet", "data.output_channels=true"}); },
               {"data.output_channels", "without one"});
  // A NaN in the data trained on quietly; it is refused with its dataset and position.
  const std::string nan_file = (dir_ / "nan.h5").string();
  {
    Tensor u = io::read_hdf5((dir_ / "smooth.h5").string(), "train/u");
    Tensor poisoned = contiguous(u);
    slice(slice(poisoned, 0, 5, 6), 1, 7, 8).fill_(std::nan(""));
    io::Hdf5Writer out(nan_file);
    out.write("train/u", poisoned);
    out.write("train/smooth", io::read_hdf5((dir_ / "smooth.h5").string(), "train/smooth"));
    out.commit();
  }
  expect_error([&] { load_data(problem_of(config(), {cat("data.train.file=", nan_file)})); },
               {"data.train", "dataset 'train/u' holds a non-finite value (NaN or infinity) at [5, 7]"});
  // A test sample whose output is all zeros made the test error inf every epoch, and the run ended
  // without its final checkpoint; training on one with the relative L2 loss did the same.
  const std::string zero_file = (dir_ / "zero.h5").string();
  const std::string train_as_test = "data.test=[{name: t, input: train/u, output: train/smooth}]";
  {
    Tensor smooth = contiguous(io::read_hdf5((dir_ / "smooth.h5").string(), "test/smooth"));
    slice(smooth, 0, 3, 4).fill_(0.0);
    io::Hdf5Writer out(zero_file);
    for (const char* name : {"train/u", "train/smooth", "test/u"}) {
      out.write(name, io::read_hdf5((dir_ / "smooth.h5").string(), name));
    }
    out.write("test/smooth", smooth);
    out.commit();
  }
  expect_error([&] { load_data(problem_of(config(), {cat("data.file=", zero_file)})); },
               {"data.test[0]", "output 'test/smooth' sample 3 is all zeros", "leave it out of this test set"});
  expect_error([&] { load_data(problem_of(config(), {cat("data.file=", zero_file), "data.train.output=test/smooth",
                                                     "data.train.input=test/u", train_as_test})); },
               {"data.train", "sample 3 is all zeros", "training.loss: mse"});
  load_data(problem_of(config(), {cat("data.file=", zero_file), "data.train.output=test/smooth",
                                  "data.train.input=test/u", train_as_test, "training.loss=mse"}));
  // eddy check opens every test set as train does, without loading samples.
  expect_error([&] { data_layout(problem_of(config(), {"data.test=[{name: c, file: /nonexistent.h5, input: a, output: u}]"})); },
               {"data.test", "cannot open HDF5 file /nonexistent.h5"});
  // A file where the run's folder should be.
  expect_error([&] { problem_of(config(), {cat("output.dir=", nan_file)}); }, {"output.dir", "is a file, not a folder"});
  // Every 5th of 64 periodic points ends with a gap of 4 across the period, which the Fourier
  // layers took as even: a test error 10 to 25 times the training one. Every 3rd is even on a
  // grid of 64 points with both ends (63 intervals), the other convention.
  expect_error([&] { load_data(problem_of(config(), {"data.test=[{name: s, input: test/u, output: test/smooth, stride: 5}]"})); },
               {"data.test", "stride 5 does not divide the 64 points", "nor its 63 intervals"});
  load_data(problem_of(config(), {"data.test=[{name: s, input: test/u, output: test/smooth, stride: 3}]"}));
  // Complex data: a cast kept the real parts.
  const std::string complex_file = (dir_ / "complex.h5").string();
  {
    io::Hdf5Writer out(complex_file);
    const Tensor u = io::read_hdf5((dir_ / "smooth.h5").string(), "train/u");
    out.write("train/u", complex(u, u));
    out.write("train/smooth", io::read_hdf5((dir_ / "smooth.h5").string(), "train/smooth"));
    out.commit();
  }
  expect_error([&] { load_data(problem_of(config(), {cat("data.train.file=", complex_file)})); },
               {"data.train", "dataset 'train/u' is complex", "two channels"});
}

// One pair of datasets gives both splits by rows (`first`); a test set of training rows was
// accepted and its errors reported as test errors.
TEST_F(OperatorTraining, SplitsTakeRowsFromFirstAndATestSetOfTrainingRowsIsRefused) {
  const std::string held_out = "data.test=[{name: held, input: train/u, output: train/smooth, first: 48}]";
  const Dataset data = load_data(problem_of(config(), {"data.train.samples=48", held_out}));
  EXPECT_EQ(data.train.size, 48);
  ASSERT_EQ(data.tests[0].size, 16);
  const Tensor rows = slice(io::read_hdf5((dir_ / "smooth.h5").string(), "train/u"), 0, 48, 64);
  EXPECT_EQ(reshape(data.tests[0].input, rows.shape()).to_vector<double>(), rows.to_vector<double>());
  expect_error([&] { load_data(problem_of(config(), {"data.train.samples=49", held_out})); },
               {"test set 'held' reads rows 48 to 63 of 'train/u'", "training set rows 0 to 48", "training errors"});
  // The training rows spelled another way: an absolute HDF5 path, a link to the file.
  const std::string link = (dir_ / "link.h5").string();
  std::filesystem::create_symlink(dir_ / "smooth.h5", link);
  for (const std::string& test : {std::string("data.test=[{name: held, input: /train//u, output: train/smooth}]"),
                                  cat("data.test=[{name: held, input: ./train/u, output: train/smooth, file: ", link,
                                      "}]")}) {
    SCOPED_TRACE(test);
    expect_error([&] { load_data(problem_of(config(), {"data.train.samples=48", test})); }, {"training errors"});
  }
  // And through a link inside the file.
  const hid_t file = H5Fopen((dir_ / "smooth.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_GE(H5Lcreate_soft("/train/u", file, "held_u", H5P_DEFAULT, H5P_DEFAULT), 0);
  H5Fclose(file);
  expect_error([&] { load_data(problem_of(config(), {"data.train.samples=48", "data.test=[{name: held, input: held_u, "
                                                     "output: train/smooth}]"})); },
               {"training errors"});
  expect_error([&] { load_data(problem_of(config(), {"data.test=[{name: past, input: test/u, output: test/smooth, first: 16}]"})); },
               {"first = 16 but 'test/u' holds 16 samples"});
  expect_error([&] { problem_of(config(), {"data.train.first=-1"}); }, {"data.train.first", "non-negative"});
}

}  // namespace
}  // namespace eddy::operator_learning
