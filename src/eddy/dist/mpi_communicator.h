#pragma once
// Internal to src/eddy/dist: the MPI world communicator, defined only in builds with MPI.

#include <memory>

#include "eddy/dist/communicator.h"

namespace eddy::dist {

// Initialises MPI (MPI_Init_thread, FUNNELED: only the thread that made it calls MPI) and
// registers MPI_Finalize to run at exit. Throws in a build without MPI.
std::unique_ptr<Communicator> make_mpi_world_communicator();

}  // namespace eddy::dist
