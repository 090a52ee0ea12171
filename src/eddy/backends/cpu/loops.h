#pragma once
// The strided loop every CPU elementwise kernel runs on: it merges dimensions that are laid out
// back to back, then hands the innermost run (pointers, byte strides, length) to a body that
// can take a vectorised path when every stride is the element size.

#include <algorithm>
#include <array>
#include <cstdint>
#include <omp.h>
#include <utility>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::cpu_kernels {

// Work below this many elements runs on one thread: spawning costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

// Inside a parallel region: the calling thread's block [begin, end) of `total` items, the blocks
// contiguous, in thread order, and as equal as rounding up allows (empty for trailing threads).
inline std::pair<int64_t, int64_t> thread_block(int64_t total) {
  const int threads = omp_get_num_threads(), id = omp_get_thread_num();
  const int64_t chunk = (total + threads - 1) / threads;
  const int64_t begin = std::min(total, id * chunk);
  return {begin, std::min(total, begin + chunk)};
}

// The sum of `size` values over `total` items shared out in blocks (thread_block) over up to
// `threads` threads: block_sum(first, end, into) adds the values of items [first, end) into the
// zeroed `into`, and the blocks' sums are added in thread order, so a result does not change from
// run to run at a given thread count.
template <typename T, typename BlockSum>
std::vector<T> sum_over_thread_blocks(int64_t total, int threads, int64_t size, BlockSum&& block_sum) {
  std::vector<T> partials(static_cast<size_t>(threads * size), T(0));
  int started = 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    if (omp_get_thread_num() == 0) started = omp_get_num_threads();
    const auto [first, end] = thread_block(total);
    if (first < end) block_sum(first, end, partials.data() + omp_get_thread_num() * size);
  }
  std::vector<T> sum(static_cast<size_t>(size), T(0));
  for (int t = 0; t < started; ++t) {
    for (int64_t i = 0; i < size; ++i) sum[static_cast<size_t>(i)] += partials[static_cast<size_t>(t * size + i)];
  }
  return sum;
}

template <size_t N>
struct StridedRun {
  std::array<char*, N> ptr;
  std::array<int64_t, N> stride;  // bytes
  int64_t length;
};

// Operands all have `shape`; strides are in elements; element sizes in bytes.
template <size_t N, typename Body>
void strided_loop(const Shape& shape, std::array<char*, N> base, std::array<Shape, N> strides,
                  std::array<int64_t, N> element_size, Body&& body) {
  // Merge dimensions innermost-first; drop size-1 dimensions.
  Shape dims;
  std::array<Shape, N> byte_strides;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    bool mergeable = !dims.empty();
    for (size_t k = 0; k < N && mergeable; ++k) {
      mergeable = strides[k][i] * element_size[k] == byte_strides[k].back() * dims.back();
    }
    if (mergeable) {
      dims.back() *= shape[i];
    } else {
      dims.push_back(shape[i]);
      for (size_t k = 0; k < N; ++k) byte_strides[k].push_back(strides[k][i] * element_size[k]);
    }
  }
  int64_t total = numel(shape);
  if (total == 0) return;
  if (dims.empty()) {  // a single element
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
    for (size_t k = 0; k < N; ++k) run.stride[k] = byte_strides[k][0];
    Shape counter(dims.size(), 0);
    int64_t rest = begin;
    for (size_t d = 1; d < dims.size(); ++d) {
      counter[d] = rest % dims[d];
      rest /= dims[d];
    }
    for (int64_t o = begin; o < end; ++o) {
      for (size_t k = 0; k < N; ++k) {
        char* p = base[k];
        for (size_t d = 1; d < dims.size(); ++d) p += counter[d] * byte_strides[k][d];
        run.ptr[k] = p;
      }
      body(run);
      for (size_t d = 1; d < dims.size(); ++d) {
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
    // One long run: split it into equal pieces, one per thread.
#pragma omp parallel
    {
      const auto [begin, end] = thread_block(inner);
      if (begin < end) {
        StridedRun<N> run;
        run.length = end - begin;
        for (size_t k = 0; k < N; ++k) {
          run.stride[k] = byte_strides[k][0];
          run.ptr[k] = base[k] + begin * byte_strides[k][0];
        }
        body(run);
      }
    }
    return;
  }
#pragma omp parallel
  {
    const auto [begin, end] = thread_block(outer);
    if (begin < end) run_range(begin, end);
  }
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

// Calls body(first_row, end_row) over `rows` rows of `row_length` elements, split into one
// contiguous block of rows per thread when the work is large enough.
template <typename Body>
void parallel_rows(int64_t rows, int64_t row_length, Body&& body) {
  if (rows * row_length < kParallelGrain || omp_get_max_threads() == 1) {
    body(int64_t{0}, rows);
    return;
  }
#pragma omp parallel
  {
    const auto [begin, end] = thread_block(rows);
    if (begin < end) body(begin, end);
  }
}

inline char* byte_ptr(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

}  // namespace eddy::cpu_kernels
