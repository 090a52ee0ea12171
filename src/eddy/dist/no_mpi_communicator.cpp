// A build without MPI (EDDY_WITH_MPI off): every run is single-process.

#include "eddy/dist/mpi_communicator.h"

namespace eddy::dist {

bool built_with_mpi() { return false; }

std::unique_ptr<Communicator> make_mpi_world_communicator() {
  throw Error("this eddy was built without MPI (EDDY_WITH_MPI is off); install OpenMPI and rebuild "
              "(docs/distributed.md)");
}

}  // namespace eddy::dist
