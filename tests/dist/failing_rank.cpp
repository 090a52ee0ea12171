// A job whose last rank fails on purpose while the others wait for it in a collective, handled
// the way the `eddy` command handles errors (dist::abort_job). Without the abort, the waiting
// ranks would hang; tests/dist/expect_job_failure.sh checks the job ends, non-zero, with the
// failing rank's message.

#include "eddy/dist/collectives.h"
#include "eddy/ops/ops.h"

int main() {
  using namespace eddy;
  dist::Communicator& world = dist::default_communicator();
  try {
    if (world.rank() == world.size() - 1) throw Error(cat("deliberate failure on rank ", world.rank()));
    dist::all_reduce(ones({4}));  // blocks: the last rank never joins
    return 0;
  } catch (const std::exception& e) {
    dist::abort_job(e.what(), 3);
  }
}
