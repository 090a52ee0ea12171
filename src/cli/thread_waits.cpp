#include "thread_waits.h"

#include <unistd.h>

#include <cstdlib>

namespace eddy::cli {

void use_short_thread_waits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  setenv("GOMP_SPINCOUNT", kSpinCount, 1);
  execv("/proc/self/exe", argv);
  // Only reached when the exec failed (no /proc): the default policy is slower on a busy machine
  // but gives the same results, so go on with it.
}

}  // namespace eddy::cli
