#pragma once
// Config sections that every training command reads the same way.

#include "eddy/io/config.h"
#include "eddy/optim/schedule.h"

namespace eddy::solvers {

// A `schedule:` section: type (constant | exponential | step | cosine) and the keys that type
// uses (gamma and every; warmup and floor), `every` counted in the caller's steps.
optim::ScheduleSpec read_schedule(const io::ConfigNode& section, int64_t default_every);

}  // namespace eddy::solvers
