// A job whose last rank fails on purpose while the others wait for it in a collective:
//  - `failing_rank` throws, and is handled the way the `eddy` command handles errors
//    (dist::abort_job); without the abort, the waiting ranks would hang;
//  - `failing_rank kill` dies at once from SIGKILL, as a rank the system's OOM killer or a
//    failed node takes: nothing of eddy runs, and the launcher must end the job.
// tests/dist/expect_job_failure.sh checks that the job ends promptly, non-zero, with a message
// that names the failing rank.

#include <csignal>
#include <string_view>

#include "eddy/dist/collectives.h"
#include "eddy/ops/ops.h"

int main(int argc, char** argv) {
  using namespace eddy;
  dist::Communicator& world = dist::default_communicator();
  const bool kill = argc > 1 && std::string_view(argv[1]) == "kill";
  try {
    if (world.rank() == world.size() - 1) {
      if (kill) std::raise(SIGKILL);
      throw Error(cat("deliberate failure on rank ", world.rank()));
    }
    dist::all_reduce(ones({4}));  // blocks: the last rank never joins
    return 0;
  } catch (const std::exception& e) {
    dist::abort_job(e.what(), 3);
  }
}
