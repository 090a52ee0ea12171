// The training loop the solvers share, driven by a fake trainer whose parameter counts the
// optimiser updates: checkpoints only at parameters whose loss was seen to be finite, the stop
// on a non-finite loss with the last good checkpoint kept and named, --resume from the
// checkpoint's step with changed training settings only, the history a checkpoint carries, the
// progress line's pace, and the stop on Ctrl-C or SIGTERM.

#include "solvers/common/training_loop.h"

#include <fcntl.h>
#include <pthread.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "eddy/autodiff/tape.h"
#include "eddy/eddy.h"
#include "eddy/io/safetensors.h"
#include "solvers/common/checkpoint_history.h"
#include "solvers/common/resume_settings.h"

namespace eddy::solvers {
namespace {

namespace fs = std::filesystem;

class Counter : public nn::Module {
 public:
  Counter() {
    w = zeros({1}, DType::f64);
    register_parameter("w", w);
  }
  Tensor forward(const Tensor& input) override { return input * w; }
  Tensor w;
};

// A trainer whose updates add 1 to w, and whose loss is NaN at one update.
struct FakeTrainer {
  int64_t nan_step = -1, nan_update = 0;
  double state_overflows_at = -1;  // updates from which the saved state holds an infinity
  Counter model;
  double updates = 0;  // the trainer's own state, kept in the checkpoint besides the model
  std::vector<int64_t> begun;
  std::optional<std::pair<int64_t, int64_t>> described;

  TrainingHooks hooks(int64_t updates_per_step = 1) {
    TrainingHooks h;
    h.updates_per_step = updates_per_step;
    h.begin_step = [this](int64_t step) { begun.push_back(step); };
    h.evaluate = [this](int64_t step, int64_t update) {
      return step == nan_step && update == nan_update ? std::nan("") : 1.0 / (1 + updates);
    };
    h.apply = [this] {
      NoGradGuard no_grad;
      model.w.copy_(model.w + 1);
      ++updates;
    };
    h.describe_stop = [this](int64_t step, int64_t update, double loss) {
      described = {step, update};
      return cat("fake stopped at step ", step, ": the loss is ", std::isnan(loss) ? "NaN" : "finite");
    };
    h.training_state = [this] {
      const bool overflowed = state_overflows_at >= 0 && updates >= state_overflows_at;
      return nn::StateDict{{"updates", tensor(std::vector<double>{overflowed ? INFINITY : updates})}};
    };
    h.restore = [this](const nn::StateDict& saved) { updates = saved.at("updates").item<double>(); };
    return h;
  }
};

class TrainingLoopTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("eddy_training_loop_" + std::to_string(::getpid()));
  std::string checkpoint = (dir / "checkpoint.safetensors").string();
  ProgressLine progress{nullptr, false, 0, nullptr};

  void TearDown() override { fs::remove_all(dir); }

  TrainingRun run(bool resume = false, const std::string& hash = "hash-1") {
    return {dir.string(), "config: " + hash + "\n", hash, resume, "the data"};
  }
  // Starts a loop for `trainer` and runs it to `total`; `step` ends where it stopped.
  std::optional<NonFiniteStop> train(FakeTrainer& trainer, int64_t total, int64_t every, int64_t& step,
                                     bool resume = false, int64_t updates_per_step = 1) {
    TrainingLoop loop(run(resume), trainer.model, trainer.model.parameters(), dist::default_communicator(), progress,
                      trainer.hooks(updates_per_step));
    step = loop.start();
    return loop.run(step, total, every);
  }
  // The checkpoint's step and w.
  std::pair<int64_t, double> saved() const {
    const io::SafetensorsContents contents = io::load_safetensors(checkpoint);
    return {std::stoll(contents.metadata.at("eddy.step")), contents.tensors.at("model.w").item<double>()};
  }
  std::string config_yaml() const {
    std::ifstream in(dir / "config.yaml");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
};

TEST_F(TrainingLoopTest, RunsEveryStepAndWritesTheConfig) {
  FakeTrainer trainer;
  int64_t step = -1;
  EXPECT_FALSE(train(trainer, 5, 2, step));
  EXPECT_EQ(step, 5);
  EXPECT_EQ(trainer.begun, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(trainer.model.w.item<double>(), 5.0);
  EXPECT_EQ(config_yaml(), "config: hash-1\n");
  // Due after 4, written at the first update of step 4, once its loss was seen.
  EXPECT_EQ(saved(), std::make_pair(int64_t{4}, 4.0));
}

TEST_F(TrainingLoopTest, ANonFiniteLossStopsAndNamesTheLastGoodCheckpoint) {
  FakeTrainer trainer;
  trainer.nan_step = 5;
  int64_t step = 0;
  const std::optional<NonFiniteStop> stop = train(trainer, 10, 2, step);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->step, 5);
  EXPECT_TRUE(std::isnan(stop->loss));
  EXPECT_EQ(stop->message, "fake stopped at step 5: the loss is NaN; the last good checkpoint is " + checkpoint +
                               ". Lower the learning rate or check the data.");
  EXPECT_EQ(saved(), std::make_pair(int64_t{4}, 4.0));
  EXPECT_EQ(trainer.model.w.item<double>(), 5.0);  // the NaN update was not applied
}

// Printing a NaN gave "-nan" where its sign bit was set, as the NaN of 0 * inf has on x86.
// An earlier run's results are removed, a device or pipe named like one left alone: refusing it
// there failed a run after training over a name it would never write (sample0_old.vti).
TEST(EarlierOutputs, ResultsAreRemovedAndAPipeNamedLikeOneIsLeftAlone) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("eddy_outputs_", ::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "sample0_a.vti") << "old";
  ASSERT_EQ(::mkfifo((dir / "sample0_b.vti").c_str(), 0600), 0);
  EXPECT_EQ(remove_earlier_outputs(dir.string(), "sample0_.*\\.vti"), std::vector<std::string>{"sample0_a.vti"});
  EXPECT_TRUE(std::filesystem::is_fifo(dir / "sample0_b.vti"));
  std::filesystem::remove_all(dir);
}

TEST(LossText, NamesNaNWhateverItsSignAndPrintsOtherValues) {
  EXPECT_EQ(loss_text(std::nan("")), "NaN");
  EXPECT_EQ(loss_text(-std::nan("")), "NaN");
  EXPECT_EQ(loss_text(-HUGE_VAL), "-inf");
  EXPECT_EQ(loss_text(0.25), "0.25");
  // The progress line's numbers too ("val -nan (ppl -nan)").
  EXPECT_EQ(ProgressLine::format(-std::nan("")), "NaN");
  EXPECT_EQ(ProgressLine::format(0.25), "2.500e-01");
}

TEST_F(TrainingLoopTest, ALossNotFiniteBeforeAnyUpdateDoesNotBlameTheLearningRate) {
  FakeTrainer trainer;
  trainer.nan_step = 0;
  int64_t step = 0;
  const std::optional<NonFiniteStop> stop = train(trainer, 10, 2, step);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->message, "fake stopped at step 0: the loss is NaN; no checkpoint was written yet. No update was "
                           "made yet, so the learning rate is not the cause: check the data (a division by zero, "
                           "a logarithm or square root of a negative number, an overflow)");
}

TEST_F(TrainingLoopTest, TheCheckpointDueBeforeANonFiniteLossIsNotWritten) {
  // Due after step 4, but the loss at those parameters is NaN: the one from step 2 stays.
  FakeTrainer trainer;
  trainer.nan_step = 4;
  int64_t step = 0;
  ASSERT_TRUE(train(trainer, 10, 2, step));
  EXPECT_EQ(saved(), std::make_pair(int64_t{2}, 2.0));
}

// An optimiser's state past float32's range while the loss is still finite (AdamW's second moment
// at a huge learning rate without clipping): the checkpoint refused it as an error, exit 1, with
// no history written. It is a non-finite stop, the last good checkpoint kept.
TEST_F(TrainingLoopTest, AStateThatOverflowsStopsAsANonFiniteLossDoes) {
  FakeTrainer trainer;
  trainer.state_overflows_at = 5;
  int64_t step = 0;
  const std::optional<NonFiniteStop> stop = train(trainer, 10, 2, step);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->step, 6);
  EXPECT_EQ(stop->message, "at step 6 the training state's \"optimizer.updates\" holds NaN or infinite values, though "
                           "the loss is finite; the last good checkpoint is " + checkpoint +
                               ". Lower the learning rate or check the data.");
  EXPECT_EQ(saved(), std::make_pair(int64_t{4}, 4.0));
  // The closing save, which a trainer makes after the last step, says so too.
  TrainingLoop loop(run(true), trainer.model, trainer.model.parameters(), dist::default_communicator(), progress,
                    trainer.hooks());
  loop.start();
  trainer.state_overflows_at = 0;
  EXPECT_TRUE(loop.save(9));
  EXPECT_EQ(saved(), std::make_pair(int64_t{4}, 4.0));
}

TEST_F(TrainingLoopTest, AStopBeforeAnyCheckpointSaysSo) {
  FakeTrainer trainer;
  trainer.nan_step = 1;
  int64_t step = 0;
  const std::optional<NonFiniteStop> stop = train(trainer, 10, 2, step);
  ASSERT_TRUE(stop);
  EXPECT_NE(stop->message.find("; no checkpoint was written yet."), std::string::npos) << stop->message;
  EXPECT_FALSE(fs::exists(checkpoint));
}

TEST_F(TrainingLoopTest, ACheckpointIsWrittenOnceAtTheFirstUpdateOfTheStepAfterIt) {
  FakeTrainer trainer;
  trainer.nan_step = 2;
  trainer.nan_update = 1;
  int64_t step = 0;
  ASSERT_TRUE(train(trainer, 10, 1, step, false, 3));
  EXPECT_EQ(trainer.described, std::make_pair(int64_t{2}, int64_t{1}));
  EXPECT_EQ(saved(), std::make_pair(int64_t{2}, 6.0));  // two steps of three updates, not seven
}

TEST_F(TrainingLoopTest, ResumeGoesOnFromTheCheckpointStepAsAnUninterruptedRun) {
  FakeTrainer whole;
  int64_t step = 0;
  ASSERT_FALSE(train(whole, 6, 3, step));

  FakeTrainer interrupted;
  interrupted.nan_step = 5;
  ASSERT_TRUE(train(interrupted, 6, 3, step));
  // An export of the checkpoint's weights gave the old values after the resume moved them on.
  fs::create_directories(dir / "export");
  std::ofstream(dir / "export" / "meta.json") << "{}";
  // Files the exports did not write stay: a whole hf/ went, a model card put there with it.
  fs::create_directories(dir / "hf");
  std::ofstream(dir / "hf" / "config.json") << "{}";
  std::ofstream(dir / "hf" / "README.md") << "a model card";
  FakeTrainer resumed;
  resumed.nan_step = 3;
  resumed.nan_update = 1;  // never reached: one update per step
  ASSERT_FALSE(train(resumed, 6, 3, step, true));
  EXPECT_EQ(resumed.begun, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(step, 6);
  EXPECT_FALSE(fs::exists(dir / "export"));
  EXPECT_FALSE(fs::exists(dir / "hf" / "config.json"));
  EXPECT_TRUE(fs::exists(dir / "hf" / "README.md"));
  // A linked export goes as a link: the export it points to, published elsewhere, stays.
  const fs::path published = dir.parent_path() / (dir.filename().string() + "_published");
  fs::create_directories(published);
  std::ofstream(published / "meta.json") << "{}";
  fs::create_symlink(published, dir / "export");
  FakeTrainer anew;
  ASSERT_FALSE(train(anew, 2, 1, step));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir / "export")));
  EXPECT_TRUE(fs::exists(published / "meta.json"));
  fs::remove_all(published);
  EXPECT_EQ(resumed.updates, whole.updates);
  EXPECT_EQ(resumed.model.w.item<double>(), whole.model.w.item<double>());
}

TEST_F(TrainingLoopTest, AResumedCheckpointIsGoodAndAMismatchLeavesTheConfig) {
  FakeTrainer first;
  first.nan_step = 4;
  int64_t step = 0;
  ASSERT_TRUE(train(first, 10, 2, step));
  // A stop at once after resuming still names the checkpoint resumed from.
  FakeTrainer resumed;
  resumed.nan_step = 2;
  const std::optional<NonFiniteStop> stop = train(resumed, 10, 2, step, true);
  ASSERT_TRUE(stop);
  EXPECT_NE(stop->message.find("the last good checkpoint is " + checkpoint), std::string::npos) << stop->message;
  // Another config cannot resume it, and config.yaml still describes the checkpoint.
  FakeTrainer other;
  TrainingLoop loop(run(true, "hash-2"), other.model, other.model.parameters(), dist::default_communicator(), progress,
                    other.hooks());
  EXPECT_THROW(loop.start(), Error);
  EXPECT_EQ(config_yaml(), "config: hash-1\n");
}

// A message of the error `action` throws ("" when none).
template <typename Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(TrainingLoopTest, AFolderAnotherRunWritesIsRefusedBeforeItsConfigIsReplaced) {
  // Another process's lock, as another open descriptor of the folder holds it.
  fs::create_directories(dir);
  const int other_run = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_EQ(::flock(other_run, LOCK_EX | LOCK_NB), 0);
  FakeTrainer trainer;
  int64_t step = -1;
  EXPECT_EQ(error_of([&] { train(trainer, 2, 0, step); }),
            dir.string() + " is being written by another run; wait for it to end, or give this run another "
                           "output.dir");
  EXPECT_FALSE(fs::exists(dir / "config.yaml"));
  ::close(other_run);  // that run ended
  EXPECT_FALSE(train(trainer, 2, 0, step));
  EXPECT_EQ(config_yaml(), "config: hash-1\n");
  // This process's next run there goes ahead.
  EXPECT_FALSE(train(trainer, 2, 0, step));
}

// An export taken while a new run holds the folder would write the old run's checkpoint where
// that run had just removed the old export, to outlive it beside the new results.
TEST_F(TrainingLoopTest, AnExportWhileARunHoldsTheFolderIsRefused) {
  FakeTrainer trainer;
  {
    TrainingLoop loop(run(), trainer.model, trainer.model.parameters(), dist::default_communicator(), progress,
                      trainer.hooks());
    loop.start();
    EXPECT_EQ(error_of([&] { refuse_export_while_a_run_holds(dir.string()); }),
              "export: " + dir.string() + " is being written by a run; export it once that run has ended");
  }
  EXPECT_NO_THROW(refuse_export_while_a_run_holds(dir.string()));
  EXPECT_NO_THROW(refuse_export_while_a_run_holds((dir / "missing").string()));
}

TEST_F(TrainingLoopTest, TemporaryFilesOfAKilledRunAreRemoved) {
  // A kill -9 while a file was written left NAME.tmp-PID behind for good, checkpoint-sized.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a process id that is no longer running
  const std::string dead = std::to_string(child), alive = std::to_string(::getpid());
  fs::create_directories(dir / "data");
  for (const fs::path& name : {dir / ("checkpoint.safetensors.tmp-" + dead),
                               dir / "data" / ("train.tokens.tmp-" + dead), dir / ("solution.h5.tmp-" + alive),
                               dir / "notes.tmp-draft"}) {
    std::ofstream(name) << "x";
  }
  FakeTrainer trainer;
  int64_t step = -1;
  EXPECT_FALSE(train(trainer, 2, 0, step));
  EXPECT_FALSE(fs::exists(dir / ("checkpoint.safetensors.tmp-" + dead)));
  EXPECT_FALSE(fs::exists(dir / "data" / ("train.tokens.tmp-" + dead)));
  EXPECT_TRUE(fs::exists(dir / ("solution.h5.tmp-" + alive)));  // this process's, being written
  EXPECT_TRUE(fs::exists(dir / "notes.tmp-draft"));              // not a writer's
}

TEST_F(TrainingLoopTest, ADamagedTrainingStateNamesTheCheckpoint) {
  // The model's keys were named with the file, the optimiser's not.
  FakeTrainer trainer;
  int64_t step = 0;
  ASSERT_FALSE(train(trainer, 4, 2, step));
  FakeTrainer again;
  TrainingHooks hooks = again.hooks(1);
  hooks.restore = [](const nn::StateDict&) { throw Error("load_state_dict: missing key \"adamw.m.11\""); };
  TrainingLoop loop(run(true), again.model, again.model.parameters(), dist::default_communicator(), progress, hooks);
  EXPECT_EQ(error_of([&] { loop.start(); }), checkpoint + ": load_state_dict: missing key \"adamw.m.11\"");
}

// A resume past the run's end was taken: it finished at once and wrote config.yaml with the
// shorter length. It is refused (before config.yaml is written); at the end exactly, taken.
TEST_F(TrainingLoopTest, AResumePastTheRunsEndIsRefused) {
  FakeTrainer trainer;
  int64_t step = 0;
  ASSERT_FALSE(train(trainer, 6, 3, step));
  ASSERT_EQ(saved().first, 3);
  for (const int64_t steps : {int64_t{2}, int64_t{3}}) {
    TrainingRun shorter = run(true);
    shorter.length = RunLength{steps, "training.steps"};
    FakeTrainer again;
    TrainingLoop loop(shorter, again.model, again.model.parameters(), dist::default_communicator(), progress,
                      again.hooks(1));
    if (steps == 2) {
      EXPECT_EQ(error_of([&] { loop.start(); }),
                cat("--resume: ", checkpoint, " is at step 3, past this run's end (2: training.steps); raise it "
                    "to train on from there"));
    } else {
      EXPECT_EQ(loop.start(), 3);
    }
  }
}

class ResumeSettingsTest : public TrainingLoopTest {
 protected:
  const ResumableKeys resumable = {"training.steps", "training.schedule"};
  // Trains a fresh trainer for 4 steps with `config` and keeps the checkpoint at the end.
  void train_first(const std::string& config) {
    FakeTrainer first;
    TrainingLoop loop(run_with(config, false), first.model, first.model.parameters(), dist::default_communicator(),
                      progress, first.hooks());
    int64_t step = loop.start();
    ASSERT_FALSE(loop.run(step, 4, 0));
    EXPECT_FALSE(loop.save(step).has_value());
  }
  // The step a fresh trainer resumes from with `config`.
  int64_t resume_with(const std::string& config) {
    FakeTrainer trainer;
    TrainingLoop loop(run_with(config, true), trainer.model, trainer.model.parameters(), dist::default_communicator(),
                      progress, trainer.hooks());
    return loop.start();
  }
  TrainingRun run_with(const std::string& config, bool resume) const {
    return {dir.string(), config, "hash of " + config, resume, "the data", resumable, added_later};
  }
  Settings added_later;
};

constexpr const char* kFirstConfig = "model: {width: 64}\ntraining: {steps: 4, seed: 1, schedule: {type: constant}}\n";

TEST_F(ResumeSettingsTest, TrainingSettingsMayChange) {
  train_first(kFirstConfig);
  EXPECT_EQ(resume_with("model: {width: 64}\ntraining: {steps: 8, seed: 1, schedule: {type: cosine, warmup: 2}}\n"),
            4);
}

TEST_F(ResumeSettingsTest, AnyOtherChangeIsRefusedNamingTheKeyAndLeavesTheConfig) {
  train_first(kFirstConfig);
  const std::string refused = cat("--resume: model.width is 64 in the run that wrote ", checkpoint,
                                  " but 128 now; only training settings may change (training.steps, "
                                  "training.schedule). Start a new run (another output.dir) to change them");
  EXPECT_EQ(error_of([&] { resume_with("model: {width: 128}\ntraining: {steps: 8, seed: 1}\n"); }), refused);
  EXPECT_NE(error_of([&] { resume_with("model: {width: 64}\ntraining: {steps: 4, seed: 2}\n"); })
                .find("training.seed is 1 in the run that wrote " + checkpoint + " but 2 now"),
            std::string::npos);
  EXPECT_NE(error_of([&] { resume_with("model: {width: 64, depth: 3}\ntraining: {steps: 4, seed: 1}\n"); })
                .find("model.depth is not set in the run that wrote " + checkpoint + " but 3 now"),
            std::string::npos);
  // Every difference is named (a key whose default follows another's came first and alone).
  EXPECT_NE(error_of([&] { resume_with("model: {width: 32, depth: 3}\ntraining: {steps: 4, seed: 1}\n"); })
                .find("model.depth is not set in the run that wrote " + checkpoint +
                      " but 3 now; model.width is 64 there but 32 now; only training settings may change"),
            std::string::npos);
  EXPECT_EQ(config_yaml(), kFirstConfig);
}

// eddy wrote defaults as 0.10000000000000001 before it wrote them shortest (0.1): the same number.
TEST_F(ResumeSettingsTest, TextsOfTheSameNumberAreTheSameSetting) {
  train_first("model: {width: 64, decay: 0.10000000000000001}\ntraining: {steps: 4}\n");
  EXPECT_EQ(resume_with("model: {width: 64, decay: 0.1}\ntraining: {steps: 8}\n"), 4);
  EXPECT_NE(error_of([&] { resume_with("model: {width: 64, decay: 0.11}\ntraining: {steps: 8}\n"); })
                .find("model.decay is 0.10000000000000001 in the run that wrote"),
            std::string::npos);
}

TEST_F(ResumeSettingsTest, ACheckpointWithoutSettingsResumesWithItsOwnConfigOnly) {
  train_first(kFirstConfig);
  io::SafetensorsContents saved = io::load_safetensors(checkpoint);
  saved.metadata.erase("eddy.settings");  // as eddy wrote checkpoints before it recorded them
  io::save_safetensors(checkpoint, saved.tensors, saved.metadata);
  EXPECT_NE(error_of([&] { resume_with("model: {width: 64}\ntraining: {steps: 8}\n"); })
                .find("was written by a different config"),
            std::string::npos);
  EXPECT_EQ(resume_with(kFirstConfig), 4);
}

// A resume into another command's run names that command, from the checkpoint's settings, or from
// config.yaml where the checkpoint predates them; it listed every key of both configs.
TEST_F(ResumeSettingsTest, AResumeOfAnotherCommandsRunNamesIt) {
  const std::string pinn = "geometry: {space: interval}\nmodel: {width: 64}\ntraining: {steps: 4}\n";
  const std::string operator_run = "data: {train: a.h5}\nmodel: {width: 64}\ntraining: {steps: 8}\n";
  train_first(pinn);
  const std::string expected = "--resume: " + dir.string() + " holds a run of `eddy solve` (a PINN problem), and this "
                               "is `eddy train` (a neural-operator run); resume that run with `eddy solve`";
  EXPECT_NE(error_of([&] { resume_with(operator_run); }).find(expected), std::string::npos);
  io::SafetensorsContents saved = io::load_safetensors(checkpoint);
  saved.metadata.erase("eddy.settings");
  io::save_safetensors(checkpoint, saved.tensors, saved.metadata);
  EXPECT_NE(error_of([&] { resume_with(operator_run); }).find(expected), std::string::npos);
  EXPECT_EQ(resume_with(pinn), 4);
}

TEST_F(ResumeSettingsTest, AKeyAddedLaterResumesAtTheValueEarlierCheckpointsBehavedAs) {
  train_first(kFirstConfig);  // its checkpoint records no training.optimizer
  added_later = {{"training.optimizer", "adam"}};
  EXPECT_EQ(resume_with("model: {width: 64}\ntraining: {steps: 8, seed: 1, optimizer: adam}\n"), 4);
  EXPECT_NE(error_of([&] { resume_with("model: {width: 64}\ntraining: {steps: 8, seed: 1, optimizer: soap}\n"); })
                .find("training.optimizer is adam in the run that wrote " + checkpoint + " but soap now"),
            std::string::npos);
}

TEST(ResumeSettings, SequencesAreOneValueAndSectionsCoverTheirKeys) {
  const Settings settings =
      fixed_settings("output: {grid: [16, 10]}\nfields: [u, v]\ntraining: {schedule: {type: step, every: 5}}\n",
                     {"training.schedule", "output.grid"});
  EXPECT_EQ(settings, (Settings{{"fields", "[u, v]"}}));
  EXPECT_EQ(decode_settings(encode_settings(settings), "run/checkpoint.safetensors"), settings);
  // A list read in block style (a YAML file) has the text of the same list in flow style (a
  // Python dict's config): a run of one was refused as changed when resumed by the other.
  const std::string block = "data:\n  test:\n    - name: a\n      file: t.h5\n    - {name: b, file: u.h5}\nfields:\n  - u\n";
  const std::string flow = "data: {test: [{name: a, file: t.h5}, {name: b, file: u.h5}]}\nfields: [u]\n";
  EXPECT_EQ(fixed_settings(block, {}), fixed_settings(flow, {}));
  check_same_settings(fixed_settings(flow, {}), fixed_settings(block, {}), {}, "run/checkpoint.safetensors");
  // A checkpoint from before the lists' one style recorded a block-style list in block style.
  check_same_settings({{"fields", "- u"}}, fixed_settings(flow, {}), {"data"}, "run/checkpoint.safetensors");
  EXPECT_NE(error_of([&] { check_same_settings({{"fields", "- v"}}, fixed_settings(flow, {}), {"data"}, "c"); })
                .find("fields is - v in the run that wrote c but [u] now"),
            std::string::npos);
  // A text that reads like a list is not the list (the glob "[ab]" against the list [ab]).
  EXPECT_NE(fixed_settings("exclude: \"[ab]\"\n", {}), fixed_settings("exclude: [ab]\n", {}));
  EXPECT_NE(fixed_settings("separator: \"- x\"\n", {}), fixed_settings("separator: \"[x]\"\n", {}));
  check_same_settings(fixed_settings("separator: \"- x\"\n", {}), fixed_settings("separator: '- x'\n", {}), {}, "c");
  EXPECT_NE(error_of([&] {
              check_same_settings(fixed_settings("exclude: [ab]\n", {}), fixed_settings("exclude: \"[ab]\"\n", {}), {}, "c");
            }).find("exclude is [ab]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              check_same_settings(fixed_settings("separator: \"- x\"\n", {}), fixed_settings("separator: \"[x]\"\n", {}),
                                  {}, "c");
            }).find("separator is"),
            std::string::npos);
  // Such a checkpoint recorded a multi-line text (an equation) unquoted.
  const Settings multi_line = fixed_settings("equations: {e: \"u_t\\n+ u\"}\n", {});
  EXPECT_EQ(multi_line.at("equations.e"), "\"u_t\\n+ u\"");
  check_same_settings({{"equations.e", "u_t\n+ u"}}, multi_line, {}, "c");
  EXPECT_NE(error_of([&] { check_same_settings({{"equations.e", "u_t\n- u"}}, multi_line, {}, "c"); })
                .find("equations.e is"),
            std::string::npos);
  // Texts that are one number are two settings unless both are floating-point texts; a text in
  // quotes is not the quoted record of another.
  for (const auto& [before, now] : {std::pair{"1", "1.0"}, {"01", "1"}, {"9007199254740992", "9007199254740993"}}) {
    EXPECT_NE(error_of([&] { check_same_settings({{"seed", before}}, {{"seed", now}}, {}, "c"); }).find("seed is"),
              std::string::npos)
        << before;
  }
  EXPECT_NE(fixed_settings("separator: \"[x]\"\n", {}), fixed_settings("separator: '\"[x]\"'\n", {}));
  // Texts are not read as YAML otherwise, though some read alike ("#" is a comment: a changed
  // separator passed as unchanged; a string "16.0" inside a list reads as the number 16).
  for (const auto& [before, now] : {std::pair{"#", ""}, {"end #x", "end"}, {"\"end\"", "end"}, {"[a,b]", "[a, b]"},
                                    {"a: b", "a:  b"}, {"[16]", "[16.0]"}, {"- 1", "[1.0]"}}) {
    EXPECT_NE(error_of([&] { check_same_settings({{"data.separator", before}}, {{"data.separator", now}}, {}, "c"); })
                  .find("data.separator is"),
              std::string::npos)
        << before;
  }
}

TEST(ResumeSettings, DamagedSettingsAreAnErrorNamingTheCheckpoint) {
  for (const std::string damaged : {"[1, 2]", "{a: [1, 2]}", "{a: b", "plain text"}) {
    EXPECT_NE(error_of([&] { decode_settings(damaged, "run/checkpoint.safetensors"); })
                  .find("run/checkpoint.safetensors: metadata eddy.settings is not a map"),
              std::string::npos)
        << damaged;
  }
}

TEST(CheckpointHistory, SeriesGoThroughTheTrainingStateAndAMissingOneIsNamed) {
  nn::StateDict state;
  save_series(state, "loss", {0.5, 0.25});
  EXPECT_EQ(restored_series(state, "loss", "run/checkpoint.safetensors"), (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(error_of([&] { restored_series(state, "step", "run/checkpoint.safetensors"); }),
            "--resume: run/checkpoint.safetensors has no 'history.step'; it was written by an older eddy or by "
            "another command");
}

TEST(Pace, CountsOnlyTheStepsTakenSinceThePhaseBegan) {
  // Resumed at step 100, 10 steps in 2 s: 5 steps/s, and the 90 left take 18 s. Counting from
  // step 0 would claim 55 steps/s and under 2 s left.
  const Pace resumed = pace(100, 110, 200, 2.0);
  EXPECT_DOUBLE_EQ(resumed.steps_per_second, 5.0);
  EXPECT_DOUBLE_EQ(resumed.eta_seconds, 18.0);
  EXPECT_EQ(pace(0, 50, 50, 1.0).eta_seconds, 0.0);    // done
  EXPECT_EQ(pace(10, 10, 50, 0.5).eta_seconds, 0.0);   // no step taken yet: no estimate
}

// A caller's own SIGINT handler (the Python module's), which counts the signals given to it.
std::atomic<int> callers_sigints{0};
void install_callers_sigint_handler() {
  struct sigaction callers = {};
  callers.sa_handler = [](int) { ++callers_sigints; };
  sigemptyset(&callers.sa_mask);
  sigaction(SIGINT, &callers, nullptr);
}

// Ctrl-C and SIGTERM (interrupt.h), each case in a child process: the handlers and the request
// they leave belong to the process. The loops are not started, so the children write no files.
class InterruptTest : public TrainingLoopTest {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  // Runs `trainer` for up to 10 steps, raising `signals` at the end of step 3, `gap` apart.
  int64_t run_raising(FakeTrainer& trainer, std::vector<int> signals, int& interrupted,
                      std::chrono::milliseconds gap = std::chrono::milliseconds(0)) {
    install_interrupt_handlers();
    TrainingHooks hooks = trainer.hooks();
    hooks.end_step = [signals, gap](int64_t done) {
      if (done != 3) return;
      for (size_t i = 0; i < signals.size(); ++i) {
        if (i > 0) std::this_thread::sleep_for(gap);
        std::raise(signals[i]);
      }
    };
    TrainingLoop loop(run(), trainer.model, trainer.model.parameters(), dist::default_communicator(), progress, hooks);
    int64_t step = 0;
    if (loop.run(step, 10, 0)) return -1;
    interrupted = loop.interrupted();
    return step;
  }
};

TEST_F(InterruptTest, ASignalEndsTheLoopAfterTheStepItArrivedIn) {
  EXPECT_EXIT(
      {
        FakeTrainer trainer;
        int interrupted = 0;
        const int64_t step = run_raising(trainer, {SIGTERM}, interrupted);
        std::exit(step == 3 && trainer.updates == 3 && interrupted == SIGTERM ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "eddy: stopping at the end of this step");
}

TEST_F(InterruptTest, ASecondSignalEndsTheProcessAtOnce) {
  EXPECT_EXIT(
      {
        FakeTrainer trainer;
        int interrupted = 0;
        run_raising(trainer, {SIGINT, SIGINT}, interrupted, std::chrono::milliseconds(200));
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGINT), "");
  EXPECT_EXIT(
      {
        FakeTrainer trainer;
        int interrupted = 0;
        run_raising(trainer, {SIGINT, SIGTERM}, interrupted);
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

// coreutils' timeout signals the process and then its process group: the same signal twice at once
// is one request, and the run stops after its step.
TEST_F(InterruptTest, TheSameSignalTwiceAtOnceIsOneRequest) {
  EXPECT_EXIT(
      {
        FakeTrainer trainer;
        int interrupted = 0;
        const int64_t step = run_raising(trainer, {SIGINT, SIGINT}, interrupted);
        std::exit(step == 3 && interrupted == SIGINT ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "eddy: stopping at the end of this step");
}

// Under a caller's own SIGINT handling (Python's), a SIGINT while the data is prepared goes to the
// caller's handler, which only notes it until the call returns: the loop refuses to start, the
// folder untouched, where it had run every step (and taking the folder would have removed an
// earlier run's results).
TEST_F(InterruptTest, ASigintBeforeTrainingUnderACallersHandlerEndsTheCallBeforeTheLoopStarts) {
  EXPECT_EXIT(
      {
        install_callers_sigint_handler();
        const StopTrainingOnSigint python_call;
        std::raise(SIGINT);  // while the data is read, before any loop
        FakeTrainer trainer;
        TrainingLoop loop(run(), trainer.model, trainer.model.parameters(), dist::default_communicator(), progress,
                          trainer.hooks());
        bool refused = false;
        try {
          loop.start();
        } catch (const InterruptedBeforeTraining&) {
          refused = true;
        }
        std::exit(refused && callers_sigints == 1 && !fs::exists(dir / "config.yaml") ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Whether 400 float32 products, with SIGINT sent to their thread every 200 us, all give the
// first's value, and over 100 signals reached the caller's handler.
bool products_come_through_signals() {
  install_callers_sigint_handler();
  const StopTrainingOnSigint python_call;
  const AcceptInterrupts training;
  const Tensor a = randn({512, 512}, DType::f32), b = randn({512, 512}, DType::f32);
  const Tensor expected = matmul(a, b);
  std::atomic<bool> done{false};
  const pthread_t trainer = pthread_self();
  std::thread signaller([&] {
    while (!done) {
      pthread_kill(trainer, SIGINT);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  bool same = true;
  for (int product = 0; product < 400 && same; ++product) {
    same = max(abs(matmul(a, b) - expected)).item<double>() == 0.0;
  }
  done = true;
  signaller.join();
  return same && callers_sigints > 100;
}

// oneDNN's JIT float32 GEMM runs with its stack pointer in the heap (oneDNN issue #4845): a
// handler taken there wrote its signal frame over heap memory, and a Ctrl-C in training ended in
// "corrupted size vs. prev_size" about one time in two. The handlers run on a stack of their own.
// Here every signal after the first goes on to a caller's handler while the products run; the
// heap and the products must come through a few hundred signals.
TEST_F(InterruptTest, SignalsTakenDuringProductsLeaveTheHeapWhole) {
  EXPECT_EXIT(std::exit(products_come_through_signals() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

// Whether 300 float32 products on a second application thread, on two OpenMP threads of its own
// pool, all give the first's value while a CPU-time profiling timer (SIGPROF, delivered to the
// thread that runs) fires every 500 us, and over 50 of its signals were taken.
bool products_of_another_thread_come_through_signals() {
  static std::atomic<int> taken{0};
  struct sigaction profiler = {};
  profiler.sa_handler = [](int) { ++taken; };
  sigemptyset(&profiler.sa_mask);
  profiler.sa_flags = SA_RESTART | SA_ONSTACK;  // as CPython's handlers
  sigaction(SIGPROF, &profiler, nullptr);
  set_num_threads(2);
  const Tensor a = randn({512, 512}, DType::f32), b = randn({512, 512}, DType::f32);
  const Tensor expected = matmul(a, b);  // the main thread's pool gets its stacks
  bool same = true;
  itimerval every = {};
  every.it_interval.tv_usec = every.it_value.tv_usec = 500;
  setitimer(ITIMER_PROF, &every, nullptr);
  std::thread worker([&] {
    for (int product = 0; product < 300 && same; ++product) {
      same = max(abs(matmul(a, b) - expected)).item<double>() == 0.0;
    }
  });
  worker.join();
  const itimerval off = {};
  setitimer(ITIMER_PROF, &off, nullptr);
  return same && taken > 50;
}

// libgomp keeps a pool of workers for each application thread: those of a second thread (a
// Python thread's) had no signal stacks once the main thread's had them.
TEST_F(InterruptTest, SignalsTakenByAnotherThreadsWorkersLeaveTheHeapWhole) {
  EXPECT_EXIT(std::exit(products_of_another_thread_come_through_signals() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

TEST_F(InterruptTest, ASignalOutsideTrainingEndsTheProcessAtOnce) {
  EXPECT_EXIT(
      {
        install_interrupt_handlers();
        std::raise(SIGTERM);
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

}  // namespace
}  // namespace eddy::solvers
