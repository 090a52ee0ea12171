// Reductions over any set of axes. The input is brought to a layout where the reduced
// elements are either contiguous rows or a leading block of columns; both are vectorised.

#include "eddy/backends/cpu/eigen_core.h"
#include <algorithm>
#include <cmath>
#include <complex>
#include <type_traits>
#include <vector>

#include "eddy/backends/cpu/cpu_backend.h"
#include "eddy/backends/cpu/half.h"
#include "eddy/backends/cpu/kernel_util.h"
#include "eddy/backends/cpu/loops.h"

namespace eddy::cpu_kernels {
namespace {

template <typename T>
using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

// Single-precision sums are carried in double between runs of kSumRun values: a whole row summed
// in the vector accumulators' float lanes lost 2.7e-3 of the sum of 10^7 values of 0.1 (997297.6
// for 1000000; NumPy's pairwise sum 1000000.1). Within a run the lanes' error stays near float's.
template <typename T>
struct SumAccumulator {
  using type = T;
};
template <>
struct SumAccumulator<float> {
  using type = double;
};
template <>
struct SumAccumulator<c64> {
  using type = std::complex<double>;
};
inline constexpr int64_t kSumRun = 1024;

// The sum of a row: runs of kSumRun values summed vectorised, their sums added in the accumulator
// type; a long row is cut into blocks on the threads, added in block order, so the result is the
// same at every thread count.
template <typename T>
T sum_row(const T* data, int64_t length) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    // Integers wrap on overflow, as NumPy's do: summed unsigned, where C++ defines the wrap.
    using Unsigned = std::make_unsigned_t<T>;
    return static_cast<T>(sum_row(reinterpret_cast<const Unsigned*>(data), length));
  }
  using Acc = typename SumAccumulator<T>::type;
  auto sum_runs = [data](int64_t first, int64_t end) {
    Acc total = Acc(0);
    for (int64_t i = first; i < end; i += kSumRun) {
      total += Acc(ConstRow<T>(data + i, std::min(kSumRun, end - i)).sum());
    }
    return total;
  };
  if (length < kParallelGrain) return T(sum_runs(0, length));
  const std::vector<Acc> sum = sum_over_blocks<Acc>(
      length, block_count(length, kBlockGrain), 1, [&](int64_t first, int64_t end, Acc* into) { *into = sum_runs(first, end); });
  return T(sum[0]);
}

template <typename T>
T reduce_row(ReduceKernel kind, const T* data, int64_t length) {
  ConstRow<T> row(data, length);
  if (length == 0) return kind == ReduceKernel::prod ? T(1) : T(0);
  switch (kind) {
    case ReduceKernel::sum: return sum_row(data, length);
    case ReduceKernel::prod: return row.prod();
    // A NaN anywhere makes the result NaN, as in NumPy and PyTorch (Eigen's default kept the
    // other values' extremum unless the NaN came first, hiding it from checks like max(abs(u))).
    case ReduceKernel::max:
      if constexpr (!is_complex_v<T>) return row.template maxCoeff<Eigen::PropagateNaN>();
      break;
    case ReduceKernel::min:
      if constexpr (!is_complex_v<T>) return row.template minCoeff<Eigen::PropagateNaN>();
      break;
  }
  unsupported("reduce max/min", dtype_of<T>());
}

// out[i] = reduce(data[i * length .. (i + 1) * length)).
template <typename T>
void reduce_rows(ReduceKernel kind, const T* data, int64_t rows, int64_t length, T* out) {
  parallel_rows(rows, length, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = reduce_row(kind, data + i * length, length);
  });
}

// acc[j] = sum_i data[i * width + j] over `count` >= 1 rows, four rows per pass over acc: adding
// one row at a time was bound by the accumulator's store-to-load latency at a PINN layer's bias
// gradient (10000 rows of 20).
template <typename T>
void sum_column_block(const T* data, int64_t count, int64_t width, T* acc) {
  std::copy(data, data + width, acc);
  int64_t i = 1;
  for (; i + 4 <= count; i += 4) {
    const T* r = data + i * width;
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) acc[j] += (r[j] + r[j + width]) + (r[j + 2 * width] + r[j + 3 * width]);
  }
  for (; i < count; ++i) {
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) acc[j] += data[i * width + j];
  }
}

// out[j] = reduce_i(data[i * width + j]) over `count` rows of `width` elements. A large sum is cut
// into blocks of rows whose sums are added in block order (sum_over_blocks), so a result is the
// same at every thread count.
template <typename T>
void reduce_columns(ReduceKernel kind, const T* data, int64_t count, int64_t width, T* out) {
  Row<T> acc(out, width);
  if (width == 0) return;  // nothing kept: no row to sum into (and no division by the width below)
  if (count == 0) {
    acc.setConstant(kind == ReduceKernel::prod ? T(1) : T(0));
    return;
  }
  if (kind == ReduceKernel::sum) {
    using Acc = typename SumAccumulator<T>::type;
    const int64_t blocks = count * width >= kParallelGrain ? block_count(count, kBlockGrain / width) : 1;
    const std::vector<Acc> sum =
        sum_over_blocks<Acc>(count, blocks, width, [&](int64_t first, int64_t end, Acc* into) {
          if constexpr (std::is_same_v<Acc, T>) {
            sum_column_block(data + first * width, end - first, width, into);
          } else {
            // Runs of rows summed in T, each run's sums added in the wider Acc, as sum_row does.
            const int64_t run_rows = std::max<int64_t>(16, kSumRun / width);
            std::vector<T> run(static_cast<size_t>(width));
            for (int64_t i = first; i < end; i += run_rows) {
              sum_column_block(data + i * width, std::min(run_rows, end - i), width, run.data());
              for (int64_t j = 0; j < width; ++j) into[j] += Acc(run[static_cast<size_t>(j)]);
            }
          }
        });
    for (int64_t j = 0; j < width; ++j) acc[j] = T(sum[static_cast<size_t>(j)]);
    return;
  }
  acc = ConstRow<T>(data, width);
  for (int64_t i = 1; i < count; ++i) {
    ConstRow<T> row(data + i * width, width);
    if (kind == ReduceKernel::prod) {
      acc *= row;
    } else if constexpr (!is_complex_v<T>) {
      if (kind == ReduceKernel::max) {
        acc = acc.binaryExpr(row, [](T a, T b) { return a > b || a != a ? a : b; });
      } else {
        acc = acc.binaryExpr(row, [](T a, T b) { return a < b || a != a ? a : b; });
      }
    }
  }
}

// Rows of `length`: out = (row - mean) / sqrt(mean((row - mean)^2) + eps), or row / sqrt(mean(
// row^2) + eps) without centring, in the composed form's order of operations and precision.
template <typename T>
void normalize_rows(const T* data, int64_t rows, int64_t length, T eps, bool centred, T* out) {
  parallel_rows(rows, length, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ConstRow<T> row(data + i * length, length);
      Row<T> normalised(out + i * length, length);
      const T mean = centred ? row.sum() / T(length) : T(0);
      normalised = row - mean;
      const T mean_square = normalised.square().sum() / T(length);
      normalised /= std::sqrt(mean_square + eps);
    }
  });
}

}  // namespace

void CpuBackend::normalize_last_axis(const Tensor& x, double eps, bool centred, const Tensor& out) {
  const Tensor rows = x.is_contiguous() ? x : Tensor::empty(x.shape(), x.dtype(), x.device());
  if (!x.is_contiguous()) copy(x, rows);
  const int64_t length = x.shape().back();  // the primitive refuses rank 0
  const int64_t count = length == 0 ? 0 : x.numel() / length;
  if (x.dtype() == DType::f32) {
    normalize_rows(rows.data<float>(), count, length, float(eps), centred, out.data<float>());
  } else {
    normalize_rows(rows.data<double>(), count, length, eps, centred, out.data<double>());
  }
}

void CpuBackend::reduce(ReduceKernel kind, const Tensor& in, const std::vector<int64_t>& axes,
                        const Tensor& out) {
  if (computed_in_float32({in}, out, [&](const auto& x, const Tensor& o) { reduce(kind, x[0], axes, o); })) return;
  const int64_t rank = in.dim();
  std::vector<bool> reduced(rank, false);
  for (int64_t axis : axes) reduced[axis] = true;
  int64_t reduced_count = 1;
  for (int64_t axis : axes) reduced_count *= in.shape()[axis];
  const int64_t kept_count = out.numel();

  auto is_block = [&](int64_t begin, int64_t end) {
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[d] != (d >= begin && d < end) && in.shape()[d] != 1) return false;
    }
    return true;
  };
  const int64_t first_reduced = rank - static_cast<int64_t>(axes.size());
  Tensor source = in;
  bool rows_layout = true;
  if (in.is_contiguous() && is_block(first_reduced, rank)) {
    rows_layout = true;
  } else if (in.is_contiguous() && is_block(0, static_cast<int64_t>(axes.size()))) {
    rows_layout = false;
  } else {
    // Move the reduced axes last and make the data dense.
    Shape shape, strides;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced[d]) { shape.push_back(in.shape()[d]); strides.push_back(in.strides()[d]); }
    }
    for (int64_t d : axes) { shape.push_back(in.shape()[d]); strides.push_back(in.strides()[d]); }
    Tensor permuted = make_view(in, shape, strides, in.offset());
    source = Tensor::empty(shape, in.dtype(), in.device());
    copy(permuted, source);
  }
  EDDY_DISPATCH_NUMERIC(in.dtype(), T, "reduce", {
    const T* data = source.data<T>();
    T* o = out.data<T>();
    if (rows_layout) {
      reduce_rows(kind, data, kept_count, reduced_count, o);
    } else {
      reduce_columns(kind, data, reduced_count, kept_count, o);
    }
  });
}

}  // namespace eddy::cpu_kernels
