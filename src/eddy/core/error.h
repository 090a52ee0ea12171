#pragma once
// eddy::Error is the one exception type for bad user input: wrong shapes, dtypes, devices,
// axes, indices, configs and files. Nothing in eddy aborts on user input.

#include <cstdint>
#include <iosfwd>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace eddy {

// Shapes print as [2, 3]; declared here so that messages built by cat() can include them.
std::ostream& operator<<(std::ostream& out, const std::vector<int64_t>& shape);

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates any streamable values into one string; used to build error messages.
template <typename... Parts>
std::string cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

}  // namespace eddy

// Throws eddy::Error with the concatenated message when the condition fails.
#define EDDY_CHECK(condition, ...)                       \
  do {                                                   \
    if (!(condition)) throw ::eddy::Error(::eddy::cat(__VA_ARGS__)); \
  } while (0)
