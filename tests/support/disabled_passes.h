#pragma once
// Sets EDDY_COMPILER_DISABLE for one scope, so that a failing test cannot leak it into the next.

#include <cstdlib>

namespace eddy {

class DisabledPasses {
 public:
  explicit DisabledPasses(const char* list) { setenv("EDDY_COMPILER_DISABLE", list, 1); }
  ~DisabledPasses() { unsetenv("EDDY_COMPILER_DISABLE"); }
  DisabledPasses(const DisabledPasses&) = delete;
  DisabledPasses& operator=(const DisabledPasses&) = delete;
};

}  // namespace eddy
