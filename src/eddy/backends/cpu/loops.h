#pragma once
// The strided loop every CPU elementwise kernel runs on: it merges dimensions that are laid out
// back to back, then hands the innermost run (pointers, byte strides, length) to a body that
// can take a vectorised path when every stride is the element size.

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <omp.h>
#include <utility>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::cpu_kernels {

// Work below this many elements runs on one thread: spawning costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

// Parallel work is cut into blocks whose number follows from the work's size alone, never from the
// thread count, and each thread takes the next free block (schedule(dynamic)). A thread on a core
// that another program shares then takes fewer blocks instead of holding up the others
// (docs/benchmarks.md, "A busy machine"), and sums of per-block sums, added in block order, are
// the same at every thread count. A block holds at least kBlockGrain elements; there are at most
// kMaxBlocks, so the per-block partial sums stay small.
inline constexpr int64_t kBlockGrain = kParallelGrain / 4;
inline constexpr int64_t kMaxBlocks = 64;

// The number of blocks for `total` items when a block should hold at least `grain` of them.
inline int64_t block_count(int64_t total, int64_t grain) {
  return std::clamp<int64_t>(total / std::max<int64_t>(grain, 1), 1, kMaxBlocks);
}

// Block `block` of `blocks` over `total` items: contiguous, in order, sizes differing by at most one.
inline std::pair<int64_t, int64_t> block_range(int64_t total, int64_t blocks, int64_t block) {
  return {total * block / blocks, total * (block + 1) / blocks};
}

// Calls body(block, begin, end) for each of `blocks` blocks over `total` items, on the OpenMP
// threads, each taking the next block when it is free.
template <typename Body>
void for_each_block(int64_t total, int64_t blocks, Body&& body) {
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1 && omp_get_max_threads() > 1)
  for (int64_t block = 0; block < blocks; ++block) {
    const auto [begin, end] = block_range(total, blocks, block);
    if (begin < end) body(block, begin, end);
  }
}

// Inside a parallel region: the calling thread's block [begin, end) of `total` items, the blocks
// contiguous, in thread order, and as equal as rounding up allows (empty for trailing threads).
// For work whose every thread must take part (FFTW plans made for that many threads); other work
// goes through for_each_block.
inline std::pair<int64_t, int64_t> thread_block(int64_t total) {
  const int threads = omp_get_num_threads(), id = omp_get_thread_num();
  const int64_t chunk = (total + threads - 1) / threads;
  const int64_t begin = std::min(total, id * chunk);
  return {begin, std::min(total, begin + chunk)};
}

// The sum of `size` values over `total` items cut into `blocks` blocks (for_each_block):
// block_sum(first, end, into) adds the values of items [first, end) into the zeroed `into`, and
// the blocks' sums are added in block order, so a result is the same at every thread count.
template <typename T, typename BlockSum>
std::vector<T> sum_over_blocks(int64_t total, int64_t blocks, int64_t size, BlockSum&& block_sum) {
  std::vector<T> partials(static_cast<size_t>(blocks * size), T(0));
  for_each_block(total, blocks, [&](int64_t block, int64_t first, int64_t end) {
    block_sum(first, end, partials.data() + block * size);
  });
  std::vector<T> sum(static_cast<size_t>(size), T(0));
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t i = 0; i < size; ++i) sum[static_cast<size_t>(i)] += partials[static_cast<size_t>(b * size + i)];
  }
  return sum;
}

template <size_t N>
struct StridedRun {
  std::array<char*, N> ptr;
  std::array<int64_t, N> stride;  // bytes
  int64_t length;
};

// Room for `size` integers on the stack when they fit in kInline, else on the heap: the loop
// below runs once per eager elementwise op, where a heap allocation costs as much as a short run.
template <size_t kInline>
class IndexScratch {
 public:
  explicit IndexScratch(size_t size)
      : data_(size <= kInline ? inline_.data() : (heap_ = std::make_unique<int64_t[]>(size)).get()) {}
  int64_t* data() { return data_; }

 private:
  std::array<int64_t, kInline> inline_;
  std::unique_ptr<int64_t[]> heap_;
  int64_t* data_;
};

// Operands all have `shape`; strides are in elements; element sizes in bytes.
template <size_t N, typename Body>
void strided_loop(const Shape& shape, std::array<char*, N> base,
                  std::array<std::reference_wrapper<const Shape>, N> strides, std::array<int64_t, N> element_size,
                  Body&& body) {
  constexpr size_t kInlineRank = 8;
  // Merge dimensions innermost-first; drop size-1 dimensions. dims[d] is a merged extent and
  // byte_strides[k * rank + d] operand k's byte stride along it.
  const size_t rank = shape.size();
  IndexScratch<kInlineRank * (N + 1)> scratch(rank * (N + 1));
  int64_t* dims = scratch.data();
  int64_t* byte_strides = dims + rank;
  size_t merged = 0;
  for (size_t i = rank; i-- > 0;) {
    if (shape[i] == 1) continue;
    bool mergeable = merged > 0;
    for (size_t k = 0; k < N && mergeable; ++k) {
      mergeable = strides[k].get()[i] * element_size[k] == byte_strides[k * rank + merged - 1] * dims[merged - 1];
    }
    if (mergeable) {
      dims[merged - 1] *= shape[i];
    } else {
      dims[merged] = shape[i];
      for (size_t k = 0; k < N; ++k) byte_strides[k * rank + merged] = strides[k].get()[i] * element_size[k];
      ++merged;
    }
  }
  int64_t total = numel(shape);
  if (total == 0) return;
  if (merged == 0) {  // a single element
    StridedRun<N> run{base, {}, 1};
    for (size_t k = 0; k < N; ++k) run.stride[k] = element_size[k];
    body(run);
    return;
  }
  // dims[0] is the innermost dimension now.
  const int64_t inner = dims[0];
  const int64_t outer = total / inner;
  auto run_range = [&](int64_t begin, int64_t end) {
    // Each outer index maps to a multi-index over dims[1..]; walk it with a counter.
    StridedRun<N> run;
    run.length = inner;
    for (size_t k = 0; k < N; ++k) run.stride[k] = byte_strides[k * rank];
    IndexScratch<kInlineRank> counter_scratch(merged);
    int64_t* counter = counter_scratch.data();
    int64_t rest = begin;
    for (size_t d = 1; d < merged; ++d) {
      counter[d] = rest % dims[d];
      rest /= dims[d];
    }
    for (int64_t o = begin; o < end; ++o) {
      for (size_t k = 0; k < N; ++k) {
        char* p = base[k];
        for (size_t d = 1; d < merged; ++d) p += counter[d] * byte_strides[k * rank + d];
        run.ptr[k] = p;
      }
      body(run);
      for (size_t d = 1; d < merged; ++d) {
        if (++counter[d] < dims[d]) break;
        counter[d] = 0;
      }
    }
  };
  if (total < kParallelGrain || omp_get_max_threads() == 1) {
    run_range(0, outer);
    return;
  }
  if (outer == 1) {
    // One long run: cut it into blocks of the run.
    for_each_block(inner, block_count(inner, kBlockGrain), [&](int64_t, int64_t begin, int64_t end) {
      StridedRun<N> run;
      run.length = end - begin;
      for (size_t k = 0; k < N; ++k) {
        run.stride[k] = byte_strides[k * rank];
        run.ptr[k] = base[k] + begin * byte_strides[k * rank];
      }
      body(run);
    });
    return;
  }
  for_each_block(outer, block_count(outer, kBlockGrain / inner),
                 [&](int64_t, int64_t begin, int64_t end) { run_range(begin, end); });
}

// The length w of the row an operand repeats when its strides (in elements, over `shape`) are a
// dense row of w > 1 elements on the trailing axes and 0 on at least one leading axis: a bias row
// added to a batch. 0 for any other layout.
inline int64_t repeated_row_length(const Shape& shape, const Shape& strides) {
  int64_t row_length = 1, d = static_cast<int64_t>(shape.size()) - 1;
  for (; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (strides[d] != row_length) break;
    row_length *= shape[d];
  }
  bool repeated = false;
  for (; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (strides[d] != 0) return 0;
    repeated = true;
  }
  return repeated && row_length > 1 ? row_length : 0;
}

// Calls body(first_row, end_row) over `rows` rows of `row_length` elements, in blocks of rows
// (for_each_block) when the work is large enough.
template <typename Body>
void parallel_rows(int64_t rows, int64_t row_length, Body&& body) {
  if (rows * row_length < kParallelGrain || omp_get_max_threads() == 1) {
    body(int64_t{0}, rows);
    return;
  }
  for_each_block(rows, block_count(rows, kBlockGrain / row_length),
                 [&](int64_t, int64_t begin, int64_t end) { body(begin, end); });
}

inline char* byte_ptr(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

}  // namespace eddy::cpu_kernels
