#pragma once
// The `key.path=value ...` positional overrides of the commands that read a config file. Their
// form is checked as the command line is read, so that a malformed one (`model.width` without a
// value) is a usage error, exit status 2, as docs/config.md says; the keys and values themselves
// are checked against the file by io::Config.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace eddy::cli {

inline CLI::Option* add_overrides_option(CLI::App* command, std::vector<std::string>& overrides,
                                         const std::string& description) {
  const CLI::Validator key_equals_value(
      [](std::string& text) {
        const size_t equals = text.find('=');
        return equals == std::string::npos || equals == 0 ? "expected key.path=value, got '" + text + "'"
                                                          : std::string();
      },
      "KEY=VALUE");
  return command->add_option("overrides", overrides, description)->check(key_equals_value);
}

}  // namespace eddy::cli
