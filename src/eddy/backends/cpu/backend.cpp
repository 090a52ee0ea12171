// The CPU backend's registration (into core's registry, core/backend.h) and thread control.

#include <cblas.h>
#include <omp.h>

#include <atomic>

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

}  // namespace eddy
