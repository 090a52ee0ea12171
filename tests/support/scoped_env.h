#pragma once
// Sets an environment variable for one scope and unsets it after, so that a failing test cannot
// leak it into the next. A null value leaves it unset.

#include <cstdlib>
#include <string>

namespace eddy {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (value) setenv(name, value, 1);
  }
  ~ScopedEnv() { unsetenv(name_.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
};

}  // namespace eddy
