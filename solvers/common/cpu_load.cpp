#include "solvers/common/cpu_load.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

namespace eddy::solvers {

OtherProgramsLoad::OtherProgramsLoad() : cores_(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))), last_(read()) {}

OtherProgramsLoad::Reading OtherProgramsLoad::read() {
  Reading reading;
  std::ifstream stat("/proc/stat");
  std::string label;
  int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(stat >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || label != "cpu") {
    return reading;
  }
  reading.busy = user + nice + system + irq + softirq + steal;
  reading.total = reading.busy + idle + iowait;
  // /proc/self/stat: "pid (name) state ..."; the name may hold spaces, so fields count from the
  // last ')'. Fields 14 to 17 are this process's user and system time and those of its children
  // that ended (the system compiler building kernels is this run's work, not another program's).
  std::ifstream self("/proc/self/stat");
  const std::string line((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
  const size_t name_end = line.rfind(')');
  if (name_end == std::string::npos) return reading;
  std::istringstream fields(line.substr(name_end + 1));
  std::string skipped;
  for (int field = 3; field <= 13; ++field) fields >> skipped;
  int64_t utime = 0, stime = 0, children_utime = 0, children_stime = 0;
  if (!(fields >> utime >> stime >> children_utime >> children_stime)) return reading;
  reading.own = utime + stime + children_utime + children_stime;
  reading.valid = true;
  return reading;
}

std::optional<int> OtherProgramsLoad::free_cores() {
  const Reading now = read();
  const Reading before = last_;
  last_ = now;
  if (!now.valid || !before.valid || cores_ < 1 || now.total <= before.total) return std::nullopt;
  const double elapsed = static_cast<double>(now.total - before.total) / cores_;  // ticks of one core
  const double others = static_cast<double>((now.busy - before.busy) - (now.own - before.own)) / elapsed;
  return std::clamp(cores_ - static_cast<int>(std::lround(std::max(others, 0.0))), 0, cores_);
}

}  // namespace eddy::solvers
