#pragma once
// How the `eddy` command's OpenMP threads wait between parallel regions.

namespace eddy::cli {

// The rounds of libgomp's wait loop a waiting OpenMP thread spins before it sleeps (26 us of
// `pause` on the AMD EPYC this was measured on, against about 300,000 rounds by default).
inline constexpr const char* kSpinCount = "1000";

// Runs this program again, in place (execv of /proc/self/exe), with GOMP_SPINCOUNT=kSpinCount,
// unless the user chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT set). libgomp reads the
// policy once, as it is loaded, so it cannot be set later from main.
//
// Why: libgomp's default lets an idle thread spin for about 300,000 rounds before it sleeps. On a
// machine where another program holds a core, the spinning thread takes that core's time slices
// from the thread the others wait for, and a two-thread Burgers solve ran at half the speed of one
// thread (bench/busy_machine.py; docs/benchmarks.md, "A busy machine"). Sleeping at once
// (OMP_WAIT_POLICY=passive) avoided that, but a thread woken by the kernel at every parallel
// region made two-thread steps of small PINN layers 1.5x slower on a quiet machine (15.3 against
// 10.4 ms, Burgers). A thousand spins cover the gap between a step's back-to-back regions and
// sleep soon after: the quiet machine's speed, and on a busy one the training loop's thread
// tuner moves to one thread when two are slower (solvers/common/thread_tuner.h).
void use_short_thread_waits(char** argv);

}  // namespace eddy::cli
