#pragma once
// "--name value" options for the examples. Every option must be read before check_all_used(),
// so a mistyped name on a smoke test's command line fails loudly instead of running the default.

#include <cstdint>
#include <map>
#include <string>

#include "eddy/core/error.h"

namespace examples {

class Args {
 public:
  Args(int argc, char** argv) {
    for (int i = 1; i < argc; i += 2) {
      const std::string name = argv[i];
      EDDY_CHECK(name.rfind("--", 0) == 0 && i + 1 < argc, "expected --name value pairs, got '", name, "'");
      values_[name.substr(2)] = argv[i + 1];
    }
  }

  double number(const std::string& name, double fallback) {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    const double value = std::stod(it->second);
    values_.erase(it);
    return value;
  }
  int64_t integer(const std::string& name, int64_t fallback) {
    return static_cast<int64_t>(number(name, static_cast<double>(fallback)));
  }

  void check_all_used() const {
    EDDY_CHECK(values_.empty(), "unknown option --", values_.begin()->first);
  }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace examples
