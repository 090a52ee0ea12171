#pragma once
// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11). Element i of a draw is
// a pure function of (seed, offset + i), so results do not depend on thread count or device.

#include <array>
#include <cstdint>

namespace eddy {

inline std::array<uint32_t, 4> philox4x32(uint64_t counter, uint64_t key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t{kMul0} * c0, p1 = uint64_t{kMul1} * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
}

// A seed and a running offset; each draw of n numbers consumes n counters.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  // Reserves `count` counters and returns the first.
  uint64_t advance(uint64_t count) {
    uint64_t start = offset_;
    offset_ += count;
    return start;
  }
  void reseed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t offset() const { return offset_; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The generator used when none is passed (per thread, seeded with 0 until manual_seed).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace eddy
