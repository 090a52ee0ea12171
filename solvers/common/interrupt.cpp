#include "solvers/common/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <ctime>

#include "eddy/ops/ops.h"

namespace eddy::solvers {
namespace {

// Lock-free atomics are what a signal handler may touch (besides volatile sig_atomic_t), and
// unlike the latter they are also safe to read from the thread that trains while another thread
// takes the signal.
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<int> requested{0};
std::atomic<int> accepting{0};  // AcceptInterrupts alive
std::atomic<int64_t> requested_at{0};  // CLOCK_MONOTONIC nanoseconds of the accepted signal

// A second delivery this soon after the first is the same request, not a person interrupting
// again: coreutils' `timeout` sends its signal to the process and then to its process group.
constexpr int64_t kSameRequestNanoseconds = 100'000'000;

int64_t monotonic_nanoseconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

void act_by_default(int signal) {
  struct sigaction action = {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
}

// StopTrainingOnSigint's: how many are alive, and the caller's SIGINT action they replaced.
std::atomic<int> sigint_scopes{0};
struct sigaction callers_sigint = {};

void write_note(const char* note, size_t length) {
  const int saved_errno = errno;  // the interrupted code may be about to read it
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, note, length);
  errno = saved_errno;
}

// A SIGINT that StopTrainingOnSigint does not take for training goes where the caller sent it.
void to_the_caller(int signal) {
  if (callers_sigint.sa_handler == SIG_IGN) return;
  if (callers_sigint.sa_handler == SIG_DFL) {
    act_by_default(signal);
    std::raise(signal);
    return;
  }
  callers_sigint.sa_handler(signal);
}

// Whether `signal` is the training's stop request delivered again within kSameRequestNanoseconds
// (`timeout -s INT` sends it to the process and then to its group), which changes nothing.
bool repeats_the_request(int signal, int64_t now) {
  if (accepting.load() == 0 || requested.load() != signal) return false;
  // 0: the first delivery is being handled by another thread at this moment.
  const int64_t first = requested_at.load();
  return first == 0 || now - first < kSameRequestNanoseconds;
}

// Only async-signal-safe calls: atomics, sigaction, raise and write.
void on_signal(int signal) {
  const int64_t now = monotonic_nanoseconds();
  if (sigint_scopes.load() != 0) {
    int none = 0;
    if (accepting.load() != 0 && requested.compare_exchange_strong(none, signal)) {
      requested_at.store(now);
      static constexpr char note[] = "\neddy: stopping at the end of this step to write the checkpoint and results\n";
      write_note(note, sizeof note - 1);
    } else {
      // Python's KeyboardInterrupt for a repeated delivery ended the call that was stopping.
      if (repeats_the_request(signal, now)) return;
      // Before training (reading the data, training a tokenizer) the request stays too, so that
      // the loop refuses to start and the call returns to the caller, who acts on the signal
      // then: Python raised KeyboardInterrupt only after every step had run. A second signal
      // during training leaves the first request as it was.
      if (accepting.load() == 0) {
        int unrequested = 0;
        if (requested.compare_exchange_strong(unrequested, signal)) requested_at.store(now);
      }
      to_the_caller(signal);
    }
    return;
  }
  if (repeats_the_request(signal, now)) return;
  // One exchange, as two signals can be handled at once by two threads.
  int none = 0;
  if (accepting.load() == 0 || !requested.compare_exchange_strong(none, signal)) {
    // The signal is blocked while its handler runs, so the raised one ends the process as soon
    // as this returns.
    act_by_default(signal);
    std::raise(signal);
    return;
  }
  requested_at.store(now);
  static constexpr char note[] =
      "\neddy: stopping at the end of this step to write the checkpoint and results; "
      "interrupt again to quit at once\n";
  write_note(note, sizeof note - 1);
}

}  // namespace

void install_interrupt_handlers() {
  for (int signal : {SIGINT, SIGTERM}) {
    struct sigaction previous = {};
    sigaction(signal, nullptr, &previous);
    if (previous.sa_handler == SIG_IGN) continue;
    struct sigaction action = {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    // Reads and writes in progress (data files, the progress line) carry on rather than fail
    // with EINTR: the request is noticed at the end of the step anyway. On the thread's signal
    // stack, which the CPU backend gives its threads: not where oneDNN's GEMM points the stack
    // pointer (give_threads_signal_stacks, backends/backend.h).
    action.sa_flags = SA_RESTART | SA_ONSTACK;
    sigaction(signal, &action, nullptr);
  }
}

int interrupt_signal(dist::Communicator& comm) {
  if (comm.size() == 1) return requested.load();
  const Tensor signal = tensor(std::vector<int64_t>{requested.load()}, {1}, cpu());
  comm.allreduce(signal, signal, dist::ReduceOp::max);
  return static_cast<int>(signal.item<int64_t>());
}

std::string training_ended(int signal) {
  if (signal == 0) return "finished ";
  return cat("stopped by ", signal == SIGINT ? "SIGINT" : "SIGTERM", " after ");
}

StopTrainingOnSigint::StopTrainingOnSigint() {
  if (sigint_scopes++ != 0) return;  // a call on another thread holds the handler already
  requested = 0;
  requested_at = 0;
  // A program that ignores SIGINT (or a background job of a script, started so) keeps ignoring
  // it, as install_interrupt_handlers leaves it; the training stopped on it.
  sigaction(SIGINT, nullptr, &callers_sigint);
  if (callers_sigint.sa_handler == SIG_IGN) return;
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_ONSTACK;  // as install_interrupt_handlers' (above)
  sigaction(SIGINT, &action, nullptr);
}

// The caller's handler is back before the count reaches 0: a SIGINT in between that found
// neither would end the process (on_signal outside training).
StopTrainingOnSigint::~StopTrainingOnSigint() {
  if (sigint_scopes.load() == 1) {
    sigaction(SIGINT, &callers_sigint, nullptr);
    requested = 0;
    requested_at = 0;
  }
  --sigint_scopes;
}

AcceptInterrupts::AcceptInterrupts() { ++accepting; }

AcceptInterrupts::~AcceptInterrupts() { --accepting; }

}  // namespace eddy::solvers
