#pragma once
// Ctrl-C (SIGINT) and SIGTERM during training: a clean stop instead of a lost run.
//
// The `eddy` command installs the handlers; the library installs none, so a program or a Python
// session that links eddy keeps its own handling of these signals (the Python module hands SIGINT
// to training for the length of a call, StopTrainingOnSigint). With them installed, a first
// signal that arrives while a training loop exists (TrainingLoop) asks it to stop at the end of
// the current step, where the solver writes its checkpoint and results as at a normal end; a
// second signal, or one that arrives outside training, ends the process at once, killed by that
// signal, as without the handlers.

#include <string>

#include "eddy/core/error.h"
#include "eddy/dist/communicator.h"

namespace eddy::solvers {

// Installs the handlers for SIGINT and SIGTERM, except for a signal this process was started
// ignoring (SIGINT in a background job of a script), which stays ignored.
void install_interrupt_handlers();

// The signal (SIGINT or SIGTERM) that asked any rank of `comm` to stop training (the larger
// number when two did), or 0: the same on every rank, so that they all stop at the same step. One
// all-reduce where `comm` has several ranks, none with one. Once asked, a process stays asked: it
// is meant to wind up and exit.
int interrupt_signal(dist::Communicator& comm);

// How a trainer's closing message starts: "finished " when `signal` is 0, else "stopped by
// SIGINT after " (or SIGTERM), followed by the steps or epochs done.
std::string training_ended(int signal);

// For a caller with SIGINT handling of its own (the Python module), in place of
// install_interrupt_handlers: while one exists, a SIGINT during training asks the loop to stop at
// the end of its step, where the run's checkpoint and results are written, and the call returns
// as after a normal end; a SIGINT outside training, or a second one, goes to the caller's handler
// (Python raises KeyboardInterrupt once the call returns), and one before training also ends the
// call when its loop would start (InterruptedBeforeTraining), so that the call returns soon. At
// the end the caller's handler is back and the request forgotten, so that the next run starts
// afresh.
class StopTrainingOnSigint {
 public:
  StopTrainingOnSigint();
  ~StopTrainingOnSigint();
  StopTrainingOnSigint(const StopTrainingOnSigint&) = delete;
  StopTrainingOnSigint& operator=(const StopTrainingOnSigint&) = delete;
};

// Thrown by TrainingLoop::start when a stop was asked for before training began (a SIGINT under
// StopTrainingOnSigint while the data was prepared): the run folder is left as it was, where
// taking it removes an earlier run's results. The Python module raises KeyboardInterrupt for it.
class InterruptedBeforeTraining : public Error {
 public:
  explicit InterruptedBeforeTraining(int signal)
      : Error(cat("interrupted by signal ", signal, " before training began; the run folder is unchanged")) {}
};

// While one exists, a first signal is a request to stop (above); TrainingLoop holds one.
class AcceptInterrupts {
 public:
  AcceptInterrupts();
  ~AcceptInterrupts();
  AcceptInterrupts(const AcceptInterrupts&) = delete;
  AcceptInterrupts& operator=(const AcceptInterrupts&) = delete;
};

}  // namespace eddy::solvers
