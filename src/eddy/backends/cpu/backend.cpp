// The CPU backend's registration (into core's registry, core/backend.h) and thread control.

#include <cblas.h>
#include <omp.h>

#include <signal.h>

#include <atomic>
#include <memory>

#include "eddy/backends/backend.h"
#include "eddy/backends/cpu/cpu_backend.h"

namespace eddy {
namespace {
// Registered while the program starts, as the primitives are: the backends library is linked
// whole (src/CMakeLists.txt), so this runs in every program that links eddy.
const bool cpu_backend_registered = [] {
  static cpu_kernels::CpuBackend cpu_backend;
  register_backend(DeviceType::cpu, &cpu_backend);
  return true;
}();
}  // namespace

void set_num_threads(int threads) {
  EDDY_CHECK(threads >= 1, "set_num_threads: need at least 1 thread, got ", threads);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

namespace {
std::atomic<int64_t> thread_dependent_runs{0};
}  // namespace

void note_thread_dependent_kernel() { thread_dependent_runs.fetch_add(1, std::memory_order_relaxed); }

int64_t thread_dependent_kernel_runs() { return thread_dependent_runs.load(std::memory_order_relaxed); }

namespace {

// A thread's signal stack while the thread lives; one it had already (Python's faulthandler gives
// one) stays.
class SignalStack {
 public:
  SignalStack() {
    stack_t current = {};
    if (sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;
    memory_ = std::make_unique<char[]>(kBytes);
    stack_t stack = {};
    stack.ss_sp = memory_.get();
    stack.ss_size = kBytes;
    if (sigaltstack(&stack, nullptr) != 0) memory_.reset();
  }
  ~SignalStack() {
    if (!memory_) return;
    stack_t off = {};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  }
  SignalStack(const SignalStack&) = delete;
  SignalStack& operator=(const SignalStack&) = delete;

 private:
  // The frame of a signal taken in AVX-512 code is about 3 KB; handlers need little more.
  static constexpr size_t kBytes = 64 * 1024;
  std::unique_ptr<char[]> memory_;
};

void give_this_thread_a_signal_stack() { thread_local SignalStack stack; }

// The most OpenMP threads of this thread's team given stacks so far: libgomp keeps a pool of
// workers for each application thread that opens parallel regions (a Python thread's products ran
// on workers the main thread's call had not reached), and a team grows when the thread count does.
thread_local int team_with_stacks = 0;

}  // namespace

void give_threads_signal_stacks() {
  give_this_thread_a_signal_stack();
  const int threads = omp_get_max_threads();
  if (omp_in_parallel() || threads <= team_with_stacks) return;
#pragma omp parallel
  give_this_thread_a_signal_stack();
  team_with_stacks = threads;
}

}  // namespace eddy
