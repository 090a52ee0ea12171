#pragma once
// FNV-1a (Fowler, Noll and Vo's hash): names content (a config, a kernel's source, a model's
// weights) in file names and metadata. Unlike std::hash it is the same on every build and machine,
// so what one process writes another can check. Not for security.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace eddy {

constexpr uint64_t kFnvOffsetBasis = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

inline uint64_t fnv1a(std::string_view bytes, uint64_t hash = kFnvOffsetBasis) {
  for (unsigned char c : bytes) hash = (hash ^ c) * kFnvPrime;
  return hash;
}

// The same steps over 8-byte words, then the remaining bytes: an eighth of the multiplications,
// for arrays of hundreds of megabytes.
inline uint64_t fnv1a_words(const void* data, size_t bytes, uint64_t hash = kFnvOffsetBasis) {
  const char* at = static_cast<const char*>(data);
  for (; bytes >= sizeof(uint64_t); bytes -= sizeof(uint64_t), at += sizeof(uint64_t)) {
    uint64_t word;
    std::memcpy(&word, at, sizeof word);
    hash = (hash ^ word) * kFnvPrime;
  }
  return fnv1a(std::string_view(at, bytes), hash);
}

// Sixteen hexadecimal digits.
inline std::string hex_digits(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace eddy
