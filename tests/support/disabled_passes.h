#pragma once
// Sets EDDY_COMPILER_DISABLE for one scope, so that a failing test cannot leak it into the next.

#include "support/scoped_env.h"

namespace eddy {

class DisabledPasses : ScopedEnv {
 public:
  explicit DisabledPasses(const char* list) : ScopedEnv("EDDY_COMPILER_DISABLE", list) {}
};

}  // namespace eddy
