#pragma once
// Expects two safetensors checkpoints to hold the same tensors, bit for bit: how the stand-in
// device tests show that a run on another device computed exactly what the CPU run did.

#include <gtest/gtest.h>

#include <string>

#include "eddy/core/backend.h"
#include "eddy/io/safetensors.h"

namespace eddy {

inline void expect_equal_checkpoints(const std::string& path, const std::string& expected_path) {
  const auto tensors = io::load_safetensors(path).tensors;
  const auto expected = io::load_safetensors(expected_path).tensors;
  ASSERT_EQ(tensors.size(), expected.size()) << path;
  for (const auto& [name, value] : expected) {
    ASSERT_TRUE(tensors.count(name)) << path << " lacks " << name;
    EXPECT_EQ(element_bytes(tensors.at(name)), element_bytes(value)) << name;
  }
}

}  // namespace eddy
