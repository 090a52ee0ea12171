// The thread tuner (solvers/common/thread_tuner.h) against steps whose time depends on the thread
// count by construction: sleeps far longer than the scheduling noise of a busy machine.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eddy/backends/backend.h"
#include "solvers/common/cpu_load.h"
#include "solvers/common/thread_tuner.h"

namespace eddy::solvers {
namespace {

// The tests time sleeps, not this machine's load, which other tests running beside them change.
std::optional<int> unknown_free_cores() { return std::nullopt; }

class ThreadTunerTest : public testing::Test {
 protected:
  void SetUp() override {
    threads_before_ = num_threads();
    set_num_threads(2);
  }
  void TearDown() override {
    unsetenv("EDDY_ADAPT_THREADS");
    set_num_threads(threads_before_);
  }

  // Steps that sleep `two_threads_ms` on two threads and `one_thread_ms` on one; the notes the
  // tuner gave, joined.
  static std::string run_steps(ThreadTuner& tuner, int steps, int two_threads_ms, int one_thread_ms) {
    std::string notes;
    for (int s = 0; s < steps; ++s) {
      tuner.begin_step();
      std::this_thread::sleep_for(std::chrono::milliseconds(num_threads() == 2 ? two_threads_ms : one_thread_ms));
      notes += tuner.end_step();
    }
    return notes;
  }

  int threads_before_ = 1;
};

TEST_F(ThreadTunerTest, MovesToOneThreadWhenItsStepsAreFaster) {
  ThreadTuner tuner(unknown_free_cores);
  const std::string notes = run_steps(tuner, 30, 12, 2);
  EXPECT_EQ(tuner.threads(), 1);
  EXPECT_EQ(num_threads(), 1);
  EXPECT_NE(notes.find("threads: 2 -> 1"), std::string::npos) << notes;
}

TEST_F(ThreadTunerTest, KeepsTwoThreadsWhenTheyAreFaster) {
  {
    ThreadTuner tuner(unknown_free_cores);
    const std::string notes = run_steps(tuner, 30, 2, 12);
    EXPECT_EQ(tuner.threads(), 2);
    EXPECT_EQ(num_threads(), 2);
    EXPECT_EQ(notes, "");
  }
  EXPECT_EQ(num_threads(), 2);
}

TEST_F(ThreadTunerTest, MovesToOneThreadWhenTwoAreNotClearlyFaster) {
  // Equal steps: the second thread does not pay for itself, so it goes (60 ms, so that the
  // 3% a larger count must gain is well above the sleeps' jitter; at 20 ms a make test beside two
  // notebook runs once kept two threads).
  ThreadTuner tuner(unknown_free_cores);
  const std::string notes = run_steps(tuner, 30, 60, 60);
  EXPECT_EQ(tuner.threads(), 1);
  EXPECT_NE(notes.find("threads: 2 -> 1"), std::string::npos) << notes;
}

// The thread count each of `steps` steps ran at, one digit per step, when a step sleeps
// `two_threads_ms` on two threads and `one_thread_ms` on one.
std::string counts_of_steps(ThreadTuner& tuner, int steps, int two_threads_ms, int one_thread_ms) {
  std::string counts;
  for (int s = 0; s < steps; ++s) {
    tuner.begin_step();
    counts += std::to_string(num_threads());
    std::this_thread::sleep_for(std::chrono::milliseconds(num_threads() == 2 ? two_threads_ms : one_thread_ms));
    tuner.end_step();
  }
  return counts;
}

TEST_F(ThreadTunerTest, TheCountsOfAProbeTakeTurnsStepByStep) {
  // So that a slow stretch of a shared machine lands on every count alike. Close times (80 and
  // 92 ms: a probe ends early when one count's median is 25% faster, so the jitter of the sleeps
  // must stay under about 10 ms; at 20 and 23 ms a sanitizer build beside other tests once ended
  // it early, and at 40 and 46 a make test beside two other programs): the probe takes its seven
  // steps at each count, and two threads stay.
  ThreadTuner tuner(unknown_free_cores);
  // Ten warm-up steps and the one before the probe at the given count, then 1, 2, 1, 2, ...
  // seven of each, then the winner.
  EXPECT_EQ(counts_of_steps(tuner, 30, 80, 92), "22222222222" "12121212121212" "22222");
}

TEST_F(ThreadTunerTest, AProbeEndsEarlyAndProbesThinOutWhileTheCountHolds) {
  // One thread far faster: each probe stops after three steps at each count. The move to one
  // thread is checked 25 steps later, and the wait doubles while probes keep one thread (25, 50,
  // 100, 200, 400 steps from the end of one probe to the next). Sleeps of 12 and 4 ms: at 3 and 1,
  // the sanitizer build beside another test once ran its first probe's one-thread steps as slow.
  ThreadTuner tuner(unknown_free_cores);
  const std::string counts = counts_of_steps(tuner, 900, 12, 4);
  EXPECT_EQ(counts.substr(0, 17), "22222222222" "121212");
  std::vector<size_t> two_thread_steps;
  for (size_t s = 17; s < counts.size(); ++s) {
    if (counts[s] == '2') two_thread_steps.push_back(s);
  }
  EXPECT_EQ(two_thread_steps, (std::vector<size_t>{43, 45, 47, 99, 101, 103, 205, 207, 209, 411, 413, 415, 817, 819,
                                                   821}));
}

TEST_F(ThreadTunerTest, ANarrowlyDecidedChangeIsCheckedSoon) {
  // One thread the narrow winner (40 ms against 46 on two, wide enough in milliseconds for the
  // sleeps' jitter, as above): the full probe, seven steps at each count, moves to one thread, and
  // the next probe comes 25 steps later.
  ThreadTuner tuner(unknown_free_cores);
  const std::string counts = counts_of_steps(tuner, 75, 46, 40);
  EXPECT_EQ(counts.substr(0, 25), "22222222222" "12121212121212");
  EXPECT_EQ(counts.substr(25, 25), std::string(25, '1'));
  EXPECT_EQ(counts.substr(50), "12121212121212" "11111111111");
}

TEST_F(ThreadTunerTest, LeavesRoomForOtherProgramsWithoutTimingAndComesBack) {
  // Two threads are faster here (1 ms against 3), but another program holds a core: one thread
  // from the first probe's time on, with no step at two threads, until the core is free again.
  int free = 1;
  ThreadTuner tuner([&] { return std::optional<int>(free); });
  std::string counts, notes;
  for (int s = 0; s < 230; ++s) {
    if (s == 100) free = 2;
    tuner.begin_step();
    counts += std::to_string(num_threads());
    std::this_thread::sleep_for(std::chrono::milliseconds(num_threads() == 2 ? 1 : 3));
    notes += tuner.end_step();
  }
  // Load checks at steps 11, 36 and 86 keep one thread; the one at 186 finds the core free, and
  // the move back to two threads is checked 25 steps later.
  EXPECT_EQ(counts.substr(0, 11), std::string(11, '2'));
  EXPECT_EQ(counts.substr(11, 175), std::string(175, '1'));
  EXPECT_EQ(counts.substr(186), "121212" + std::string(25, '2') + "121212" + std::string(7, '2'));
  EXPECT_NE(notes.find("threads: 2 -> 1 (other programs leave 1 core free)"), std::string::npos) << notes;
  EXPECT_NE(notes.find("threads: 1 -> 2"), std::string::npos) << notes;
}

TEST(OtherProgramsLoad, GivesTheFreeCoresOfThisMachine) {
  OtherProgramsLoad load;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::optional<int> free = load.free_cores();
#ifdef __linux__
  ASSERT_TRUE(free.has_value());
  EXPECT_GE(*free, 0);
  EXPECT_LE(*free, static_cast<int>(std::thread::hardware_concurrency()));
#else
  EXPECT_FALSE(free.has_value());
#endif
}

TEST_F(ThreadTunerTest, GivesBackTheThreadCountItStartedWith) {
  {
    ThreadTuner tuner(unknown_free_cores);
    run_steps(tuner, 30, 12, 2);
    ASSERT_EQ(num_threads(), 1);
  }
  EXPECT_EQ(num_threads(), 2);
}

TEST_F(ThreadTunerTest, NeverChangesTheCountOfStepsWhoseResultsDependOnIt) {
  ThreadTuner tuner(unknown_free_cores);
  for (int s = 0; s < 30; ++s) {
    tuner.begin_step();
    note_thread_dependent_kernel();  // as a large GEMM on OpenBLAS's threads does
    std::this_thread::sleep_for(std::chrono::milliseconds(num_threads() == 2 ? 12 : 2));
    EXPECT_EQ(tuner.end_step(), "");
    ASSERT_EQ(num_threads(), 2) << "after step " << s;
  }
}

TEST_F(ThreadTunerTest, LeftAloneWhenAdaptingIsTurnedOff) {
  setenv("EDDY_ADAPT_THREADS", "0", 1);
  ThreadTuner tuner(unknown_free_cores);
  EXPECT_EQ(run_steps(tuner, 30, 12, 2), "");
  EXPECT_EQ(num_threads(), 2);
}

}  // namespace
}  // namespace eddy::solvers
