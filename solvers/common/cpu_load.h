#pragma once
// How many cores other programs keep busy, so that a training run can leave them room
// (thread_tuner.h). Read from Linux's /proc: the machine's busy time (/proc/stat, steal time
// included: a hypervisor's other guests take cores too) less this process's own and its ended
// children's (/proc/self/stat). A child still running counts as another program.
// Elsewhere, or when /proc cannot be read, nothing is known.

#include <cstdint>
#include <optional>

namespace eddy::solvers {

class OtherProgramsLoad {
 public:
  OtherProgramsLoad();  // takes the first reading

  // The cores online that processes other than this one left free since the last call (or since
  // construction): the cores less their average use, rounded; nullopt when unknown.
  std::optional<int> free_cores();

 private:
  struct Reading {
    int64_t busy = 0, total = 0, own = 0;  // clock ticks: the machine's busy and all time, this process's
    bool valid = false;
  };
  static Reading read();

  int cores_;
  Reading last_;
};

}  // namespace eddy::solvers
