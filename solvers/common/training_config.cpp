#include "solvers/common/training_config.h"

namespace eddy::solvers {

optim::ScheduleSpec read_schedule(const io::ConfigNode& section, int64_t default_every) {
  optim::ScheduleSpec spec;
  spec.type = section.choice("type",
                             {{"constant", optim::ScheduleType::constant},
                              {"exponential", optim::ScheduleType::exponential},
                              {"step", optim::ScheduleType::step},
                              {"cosine", optim::ScheduleType::cosine}},
                             optim::ScheduleType::constant);
  if (spec.type == optim::ScheduleType::exponential || spec.type == optim::ScheduleType::step) {
    spec.gamma = section.number("gamma", 0.1);
    spec.every = section.integer("every", default_every);
    if (!(spec.gamma > 0)) section.at("gamma").fail("must be positive");
    if (spec.every < 1) section.at("every").fail("must be at least 1");
  } else if (spec.type == optim::ScheduleType::cosine) {
    spec.warmup = section.integer("warmup", 0);
    spec.floor = section.number("floor", 0.0);
    if (spec.warmup < 0) section.at("warmup").fail("must be non-negative");
    if (spec.floor < 0) section.at("floor").fail("must be non-negative");
  }
  return spec;
}

}  // namespace eddy::solvers
