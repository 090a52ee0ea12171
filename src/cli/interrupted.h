#pragma once
// How the training commands (`eddy solve`, `eddy train`, `eddy lm train`) end when Ctrl-C or
// SIGTERM stopped them early (solvers/common/interrupt.h).

#include <string>

namespace eddy::cli {

// This command line with --resume added where it is missing, quoted for a POSIX shell, and under
// several ranks after `mpirun -np N`.
std::string resume_command(int argc, char** argv);

// Says where the checkpoint is and the command that goes on from it; returns the exit status,
// 128 + the signal number (130 for SIGINT, 143 for SIGTERM), what a shell reports for a process
// ended by that signal.
int report_interrupted(int signal, const std::string& run_dir, const std::string& resume_command);

}  // namespace eddy::cli
