// Philox random numbers (reproducible across seeds, draws and thread counts), the caching
// CPU allocator's bookkeeping, and the C library heap kept between steps.

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "eddy/core/memory.h"
#include "eddy/eddy.h"
#include "support/expect_error.h"

namespace eddy {
namespace {

// Restores the thread count a test changed, even when an assertion fails part way.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : previous_(num_threads()) {}
  ~ThreadCountGuard() { set_num_threads(previous_); }
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int previous_;
};

// ---- Philox ----

TEST(Philox, MatchesRandom123KnownAnswer) {
  // Random123 tests/kat_vectors, "philox4x32 10" with an all-zero counter and key.
  const std::array<uint32_t, 4> expected{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
  EXPECT_EQ(philox4x32(0, 0), expected);
}

TEST(Philox, SameSeedSameNumbers) {
  Generator first(1234), second(1234);
  EXPECT_EQ(rand({1000}, DType::f64, &first).to_vector<double>(),
            rand({1000}, DType::f64, &second).to_vector<double>());
  EXPECT_EQ(randn({1000}, DType::f32, &first).to_vector<float>(),
            randn({1000}, DType::f32, &second).to_vector<float>());
}

TEST(Philox, DifferentSeedsDiffer) {
  Generator first(1), second(2);
  std::vector<double> a = rand({1000}, DType::f64, &first).to_vector<double>();
  std::vector<double> b = rand({1000}, DType::f64, &second).to_vector<double>();
  int equal = 0;
  for (size_t i = 0; i < a.size(); ++i) equal += a[i] == b[i];
  EXPECT_EQ(equal, 0);
}

TEST(Philox, ConsecutiveDrawsDiffer) {
  Generator generator(99);
  std::vector<float> a = randn({500}, DType::f32, &generator).to_vector<float>();
  std::vector<float> b = randn({500}, DType::f32, &generator).to_vector<float>();
  EXPECT_NE(a, b);
  EXPECT_EQ(generator.offset(), 1000u);
}

TEST(Philox, DrawsSplitLikeOneLongDraw) {
  // Element i depends only on (seed, offset + i), so two draws of 300 and 700 reproduce the
  // two halves of one draw of 1000.
  Generator split(5), whole(5);
  std::vector<double> head = rand({300}, DType::f64, &split).to_vector<double>();
  std::vector<double> tail = rand({7, 100}, DType::f64, &split).to_vector<double>();
  std::vector<double> all = rand({1000}, DType::f64, &whole).to_vector<double>();
  head.insert(head.end(), tail.begin(), tail.end());
  EXPECT_EQ(head, all);
}

TEST(Philox, IndependentOfThreadCount) {
  ThreadCountGuard restore;
  constexpr int64_t kCount = 200000;  // well above the kernels' parallel threshold
  set_num_threads(1);
  Generator serial(2024);
  std::vector<float> uniform_serial = rand({kCount}, DType::f32, &serial).to_vector<float>();
  std::vector<double> normal_serial = randn({kCount}, DType::f64, &serial).to_vector<double>();
  set_num_threads(2);
  Generator parallel(2024);
  std::vector<float> uniform_parallel = rand({kCount}, DType::f32, &parallel).to_vector<float>();
  std::vector<double> normal_parallel = randn({kCount}, DType::f64, &parallel).to_vector<double>();
  EXPECT_EQ(uniform_serial, uniform_parallel);
  EXPECT_EQ(normal_serial, normal_parallel);
}

TEST(Philox, DefaultGeneratorFollowsManualSeed) {
  manual_seed(77);
  std::vector<double> first = rand({64}, DType::f64).to_vector<double>();
  manual_seed(77);
  EXPECT_EQ(rand({64}, DType::f64).to_vector<double>(), first);
  Generator explicit_generator(77);
  EXPECT_EQ(rand({64}, DType::f64, &explicit_generator).to_vector<double>(), first);
}

TEST(Philox, UniformLiesInUnitInterval) {
  Generator generator(3);
  for (DType dtype : {DType::f32, DType::f64}) {
    std::vector<double> values = rand({100000}, dtype, &generator).to_vector<double>();
    auto [lowest, highest] = std::minmax_element(values.begin(), values.end());
    EXPECT_GE(*lowest, 0.0);
    EXPECT_LT(*highest, 1.0);
    double mean = 0;
    for (double v : values) mean += v;
    mean /= static_cast<double>(values.size());
    // The standard error of the mean is sqrt(1/12 / 1e5) ~ 0.0009.
    EXPECT_NEAR(mean, 0.5, 0.005) << dtype;
  }
}

TEST(Philox, NormalMoments) {
  Generator generator(11);
  for (DType dtype : {DType::f32, DType::f64}) {
    std::vector<double> values = randn({100000}, dtype, &generator).to_vector<double>();
    double mean = 0;
    for (double v : values) mean += v;
    mean /= static_cast<double>(values.size());
    double variance = 0;
    for (double v : values) variance += (v - mean) * (v - mean);
    variance /= static_cast<double>(values.size() - 1);
    // Standard errors: 0.0032 for the mean, 0.0045 for the variance; these bounds are ~6 sigma.
    EXPECT_LT(std::abs(mean), 0.02) << dtype;
    EXPECT_LT(std::abs(variance - 1.0), 0.03) << dtype;
    for (double v : values) ASSERT_TRUE(std::isfinite(v));
  }
}

// ---- caching allocator ----

// Byte counts no other test in this binary allocates, so their free lists are ours alone.
constexpr int64_t kOddElements = 3001;  // 12004 bytes of float32, a 16 KiB block

TEST(CachingAllocator, ReusesFreedBlocks) {
  Allocator& allocator = cpu_allocator();
  { Tensor warm = Tensor::empty({kOddElements}); }  // leaves a block of this size cached
  AllocatorStats before = allocator.stats();
  { Tensor again = Tensor::empty({kOddElements}); }
  AllocatorStats after = allocator.stats();
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.system_allocations, before.system_allocations);
}

TEST(CachingAllocator, EmptyCacheReturnsBlocksToTheSystem) {
  Allocator& allocator = cpu_allocator();
  { Tensor warm = Tensor::empty({kOddElements}); }
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().bytes_cached, 0);
  AllocatorStats before = allocator.stats();
  { Tensor fresh = Tensor::empty({kOddElements}); }
  AllocatorStats after = allocator.stats();
  EXPECT_EQ(after.system_allocations, before.system_allocations + 1);
  EXPECT_EQ(after.cache_hits, before.cache_hits);
}

TEST(CachingAllocator, BytesInUseReturnsAfterTensorsDie) {
  Allocator& allocator = cpu_allocator();
  const int64_t before = allocator.stats().bytes_in_use;
  {
    Tensor a = ones({1000}, DType::f64);
    Tensor b = a + a;
    Tensor view = slice(b, 0, 10, 20);
    b = Tensor();
    const int64_t during = allocator.stats().bytes_in_use;
    // a and b (kept alive by the view) hold at least 8000 bytes each.
    EXPECT_GE(during - before, 16000);
  }
  EXPECT_EQ(allocator.stats().bytes_in_use, before);
}

TEST(CachingAllocator, TracksPeak) {
  Allocator& allocator = cpu_allocator();
  allocator.reset_peak();
  const AllocatorStats start = allocator.stats();
  EXPECT_EQ(start.peak_bytes_in_use, start.bytes_in_use);
  constexpr int64_t kBytes = 3 << 20;
  {
    Tensor big = Tensor::empty({kBytes}, DType::b8);
    EXPECT_GE(allocator.stats().bytes_in_use, start.bytes_in_use + kBytes);
  }
  const AllocatorStats end = allocator.stats();
  EXPECT_EQ(end.bytes_in_use, start.bytes_in_use);
  EXPECT_GE(end.peak_bytes_in_use, start.bytes_in_use + kBytes);
  allocator.reset_peak();
  EXPECT_EQ(allocator.stats().peak_bytes_in_use, end.bytes_in_use);
}

TEST(CachingAllocator, EmptyTensorsAllocateNothing) {
  Allocator& allocator = cpu_allocator();
  const AllocatorStats before = allocator.stats();
  { Tensor nothing = Tensor::empty({0, 5}); }
  const AllocatorStats after = allocator.stats();
  EXPECT_EQ(after.system_allocations, before.system_allocations);
  EXPECT_EQ(after.cache_hits, before.cache_hits);
}


// The caching logic over a memory source of a fixed size, as a GPU's is: a request that does
// not fit empties the cache and tries again before the source's own error.
class LimitedMemory final : public MemorySource {
 public:
  explicit LimitedMemory(size_t limit) : limit_(limit) {}
  void* get(size_t bytes) override {
    if (used_ + bytes > limit_) return nullptr;
    used_ += bytes;
    blocks_.push_back(std::vector<char>(bytes));
    sizes_.push_back(bytes);
    return blocks_.back().data();
  }
  void put(void* ptr) noexcept override {
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (blocks_[i].data() == ptr) {
        used_ -= sizes_[i];
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
        sizes_.erase(sizes_.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
    }
  }
  [[noreturn]] void exhausted(size_t bytes, const AllocatorStats& stats) override {
    throw Error(cat("exhausted asking for ", bytes, " with ", stats.bytes_in_use, " in use"));
  }

 private:
  size_t limit_, used_ = 0;
  std::vector<std::vector<char>> blocks_;
  std::vector<size_t> sizes_;
};

TEST(CachingAllocator, AFullSourceGetsItsCacheBackBeforeGivingUp) {
  std::unique_ptr<Allocator> allocator = make_caching_allocator(std::make_unique<LimitedMemory>(4096));
  void* small = allocator->allocate(1000);  // a 1 KiB block
  allocator->deallocate(small, 1000);
  EXPECT_EQ(allocator->stats().bytes_cached, 1024);
  void* large = allocator->allocate(4000);  // 4 KiB fits only once the cached block is returned
  const AllocatorStats stats = allocator->stats();
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(stats.bytes_in_use, 4096);
  EXPECT_EQ(stats.system_allocations, 2);
  expect_error([&] { allocator->allocate(300); }, {"exhausted asking for 512 with 4096 in use"});
  allocator->deallocate(large, 4000);
  EXPECT_EQ(caching_block_size(1), 256u);
  EXPECT_EQ(caching_block_size(3u << 20), 3u << 20);
  EXPECT_EQ(caching_block_size((3u << 20) + 1), 4u << 20);
}

#if defined(__GLIBC__)
int64_t minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A step's worth of short-lived heap blocks (4 MiB in 256 blocks, each written), allocated and
// freed together as a training step's buffers are. Returns a byte of them, so none is elided.
char one_step_of_heap_blocks() {
  std::vector<std::unique_ptr<char[]>> blocks;
  for (int b = 0; b < 256; ++b) {
    blocks.emplace_back(new char[16384]);
    std::fill_n(blocks.back().get(), 16384, static_cast<char>(b));
  }
  char sum = 0;
  for (const auto& block : blocks) sum = static_cast<char>(sum + block[100]);
  return sum;
}

TEST(HeapMemory, FreedBlocksStayWithTheProcessFromStepToStep) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer replaces glibc's malloc, whose thresholds this sets";
#endif
  keep_freed_heap_memory();
  volatile char sink = one_step_of_heap_blocks();  // the first step grows the heap
  const int64_t before = minor_page_faults();
  for (int step = 0; step < 5; ++step) sink = static_cast<char>(sink + one_step_of_heap_blocks());
  // With glibc's defaults the heap shrinks past 128 KiB of free top at each step's end, and each
  // later step faults its 1,024 pages in again.
  EXPECT_LT(minor_page_faults() - before, 100);
}
#endif
}  // namespace
}  // namespace eddy
