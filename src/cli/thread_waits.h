#pragma once
// How the `eddy` command's OpenMP threads wait between parallel regions.

namespace eddy::cli {

// Runs this program again, in place (execv of /proc/self/exe), with OMP_WAIT_POLICY=passive,
// unless the user chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT set). libgomp reads the
// policy once, as it is loaded, so it cannot be set later from main.
//
// Why: with the default policy an idle thread spins for a while before it sleeps. On a machine
// where another program holds a core, the spinning thread takes that core's time slices from the
// thread the others wait for, and a two-thread Burgers solve ran at half the speed of one thread
// (bench/busy_machine.py; docs/benchmarks.md, "A busy machine"). Sleeping costs a few percent on
// a quiet machine, for the wake-up at each parallel region.
void use_passive_thread_waits(char** argv);

}  // namespace eddy::cli
