#pragma once
// Helpers for tests that run as a plain process and under mpirun: the job's communicator, sums over
// its ranks, and a temporary folder every rank of the job shares.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "eddy/dist/communicator.h"
#include "eddy/eddy.h"

namespace eddy {

inline dist::Communicator& world() { return dist::default_communicator(); }

// The sum over the job's ranks of a per-rank number.
inline double global_sum(double local) {
  Tensor value = tensor(std::vector<double>{local});
  world().allreduce(value, value, dist::ReduceOp::sum);
  return value.item<double>();
}

// A folder named after `prefix`, rank 0's process id and the running test: rank 0 creates it
// before any rank goes on, and removes it once every rank is done with it.
class JobDirectory {
 public:
  explicit JobDirectory(const std::string& prefix) {
    Tensor id = tensor(std::vector<int64_t>{::getpid()});
    world().broadcast(id, 0);
    path_ = std::filesystem::temp_directory_path() /
            cat(prefix, id.item<int64_t>(), "_", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    if (world().rank() == 0) std::filesystem::create_directories(path_);
    world().barrier();
  }
  ~JobDirectory() {
    world().barrier();
    if (world().rank() == 0) std::filesystem::remove_all(path_);
  }
  JobDirectory(const JobDirectory&) = delete;
  JobDirectory& operator=(const JobDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace eddy
