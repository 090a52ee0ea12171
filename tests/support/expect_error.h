#pragma once
// Test helpers for eddy::Error messages.

#include <gtest/gtest.h>

#include <functional>
#include <source_location>
#include <string>
#include <vector>

#include "eddy/core/error.h"

namespace eddy {

// The message of the eddy::Error `action` throws, or "no error".
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Expects `op` to throw eddy::Error (not another exception) with every fragment in its message.
inline void expect_error(const std::function<void()>& op, const std::vector<std::string>& fragments,
                         std::source_location where = std::source_location::current()) {
  ::testing::ScopedTrace trace(where.file_name(), static_cast<int>(where.line()), "expect_error");
  std::string message;
  EXPECT_THROW(
      {
        try {
          op();
        } catch (const Error& e) {
          message = e.what();
          throw;
        }
      },
      Error);
  for (const std::string& fragment : fragments) {
    EXPECT_NE(message.find(fragment), std::string::npos)
        << "message \"" << message << "\" does not mention \"" << fragment << "\"";
  }
}

}  // namespace eddy
