#pragma once
// Integers read from JSON that a person or a damaged file wrote. nlohmann::json converts a number
// it holds as a float (1e30, or an integer literal too long for 64 bits, which it parses as one)
// to an integer type with undefined behaviour; eddy's readers take integers through these
// instead, which accept JSON integers only, in the target type's range, and say where one is not.
// Templates over the JSON type, so that core does not depend on nlohmann.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "eddy/core/error.h"

namespace eddy {

template <typename Integer = int64_t, typename Json>
Integer json_integer(const Json& value, const std::string& where) {
  EDDY_CHECK(value.is_number_integer(), where, ": expected an integer, got ", value.dump());
  const bool fits = value.is_number_unsigned() ? std::in_range<Integer>(value.template get<uint64_t>())
                                               : std::in_range<Integer>(value.template get<int64_t>());
  EDDY_CHECK(fits, where, ": ", value.dump(), " is out of range");
  return value.is_number_unsigned() ? static_cast<Integer>(value.template get<uint64_t>())
                                    : static_cast<Integer>(value.template get<int64_t>());
}

template <typename Integer = int64_t, typename Json>
std::vector<Integer> json_integers(const Json& value, const std::string& where) {
  EDDY_CHECK(value.is_array(), where, ": expected a list of integers, got ", value.dump());
  std::vector<Integer> integers;
  for (size_t i = 0; i < value.size(); ++i) integers.push_back(json_integer<Integer>(value[i], cat(where, "[", i, "]")));
  return integers;
}

}  // namespace eddy
