#pragma once
// "--name value" options for the examples. Every option must be read before check_all_used(),
// so a mistyped name on a smoke test's command line fails loudly instead of running the default;
// with --help (or -h), check_all_used() lists the options read, with their defaults, and exits.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "eddy/core/error.h"

namespace examples {

class Args {
 public:
  Args(int argc, char** argv) : program_(argv[0]) {
    for (int i = 1; i < argc; ++i) help_ = help_ || std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h";
    if (help_) return;
    for (int i = 1; i < argc; i += 2) {
      const std::string name = argv[i];
      EDDY_CHECK(name.rfind("--", 0) == 0 && i + 1 < argc, "expected --name value pairs, got '", name, "'");
      EDDY_CHECK(values_.emplace(name.substr(2), argv[i + 1]).second, name, " is given twice");
    }
  }

  // The whole value must be a number ("5%" is refused, not read as 5).
  double number(const std::string& name, double fallback) {
    std::ostringstream shown;
    shown << fallback;
    usage_.push_back("  --" + name + " (default " + shown.str() + ")");
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    const std::string text = it->second;
    values_.erase(it);
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    EDDY_CHECK(used == text.size() && used > 0 && std::isfinite(value), "--", name, " must be a finite number, got '",
               text, "'");
    return value;
  }
  int64_t integer(const std::string& name, int64_t fallback) {
    const double value = number(name, static_cast<double>(fallback));
    EDDY_CHECK(value == std::floor(value) && std::abs(value) < 9.0e15, "--", name, " must be a whole number, got ",
               value);
    return static_cast<int64_t>(value);
  }
  // A whole number of at least `minimum` (a grid size, a count, a seed).
  int64_t at_least(const std::string& name, int64_t fallback, int64_t minimum) {
    const int64_t value = integer(name, fallback);
    EDDY_CHECK(value >= minimum, "--", name, " must be at least ", minimum, ", got ", value);
    return value;
  }
  // A number of at least 0 (a noise level).
  double non_negative(const std::string& name, double fallback) {
    const double value = number(name, fallback);
    EDDY_CHECK(value >= 0, "--", name, " must be at least 0, got ", value);
    return value;
  }
  // A positive number (a time step, a viscosity, an error's size).
  double positive(const std::string& name, double fallback) {
    const double value = number(name, fallback);
    EDDY_CHECK(value > 0, "--", name, " must be positive, got ", value);
    return value;
  }

  // How many steps of `dt` reach `final_time`: a whole number, or the run would end elsewhere.
  static int64_t steps_to(double final_time, double dt) {
    const double ratio = final_time / dt;
    const double steps = std::round(ratio);
    EDDY_CHECK(steps >= 1 && std::abs(ratio - steps) <= 1e-9 * steps, "--final-time ", final_time,
               " must be a whole number of steps of --dt ", dt, " (it is ", ratio, " steps)");
    return static_cast<int64_t>(steps);
  }

  void check_all_used() const {
    if (help_) {
      std::printf("usage: %s%s\n", program_.c_str(), usage_.empty() ? " (no options)" : " [--name value ...]");
      for (const std::string& line : usage_) std::printf("%s\n", line.c_str());
      std::exit(0);
    }
    EDDY_CHECK(values_.empty(), "unknown option --", values_.begin()->first, " (--help lists the options)");
  }

 private:
  std::string program_;
  bool help_ = false;
  std::map<std::string, std::string> values_;
  std::vector<std::string> usage_;
};

}  // namespace examples
