#include "eddy/core/rng.h"

namespace eddy {

Generator& default_generator() {
  thread_local Generator generator(0);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().reseed(seed); }

}  // namespace eddy
