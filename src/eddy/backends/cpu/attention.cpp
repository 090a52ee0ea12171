// Causal attention in blocks (Dao et al. 2022, "FlashAttention"; the backward pass in the form of
// Dao 2023, "FlashAttention-2"): the scores of a block of queries against a block of keys live in
// a 64 x 64 tile, the softmax is taken online (a running maximum and denominator per row), and
// the backward pass recomputes each tile from the saved log-sum-exp. Tiles wholly above the
// diagonal are skipped, which halves the products of a causal mask.
//
// Work is split over (batch entry, key/value head): the query heads of a group share their keys'
// and values' gradient sums, which each unit adds up in a fixed order, so results do not depend on
// the thread count. Each thread calls one-thread OpenBLAS on the tiles (linalg.cpp says why).

#include "eddy/backends/cpu/eigen_core.h"
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "eddy/backends/cpu/blas_layout.h"
#include "eddy/backends/cpu/cpu_backend.h"
#include "eddy/backends/cpu/loops.h"

namespace eddy::cpu_kernels {
namespace {

constexpr int64_t kTile = 64;  // queries and keys per tile (faster than 128 and 256: docs/benchmarks.md)

// c = alpha op(a) op(b) + beta c, row-major, op(a) [m, k] and op(b) [k, n].
template <typename T>
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const CBLAS_TRANSPOSE ta = transpose_a ? CblasTrans : CblasNoTrans, tb = transpose_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

struct Dims {
  int64_t batch, heads, kv_heads, time, keys, dim;
  int64_t group() const { return heads / kv_heads; }
  // Query row t sees keys [0, visible_keys(t)).
  int64_t visible_keys(int64_t t) const { return keys - time + t + 1; }
};

Dims dims_of(const Tensor& q, const Tensor& k) {
  return {q.shape()[0], q.shape()[1], k.shape()[1], q.shape()[2], k.shape()[2], q.shape()[3]};
}

// How BLAS reads head (b, h)'s [T, D] rows of a [B, H, T, D] view.
MatrixLayout rows_layout(const Tensor& t) {
  return layout_of(t.shape()[2], t.shape()[3], t.strides()[2], t.strides()[3]);
}

// q, k or v as the tiles' GEMMs read it: head (b, h)'s rows start at head(b, h) and lie `stride`
// apart. Read in place where BLAS takes the rows untransposed (matmul's rule: heads split from a
// [B, T, H, D] projection are), else from a dense copy.
template <typename T>
struct Rows {
  Tensor values;  // the view itself, or its dense copy
  const T* first;
  int64_t batch_stride, head_stride, stride;
  Rows(CpuBackend& backend, const Tensor& t) : values(t) {
    if (const MatrixLayout layout = rows_layout(t); !layout.usable || layout.transpose != CblasNoTrans) {
      values = Tensor::empty(t.shape(), t.dtype(), t.device());
      backend.copy(t, values);
    }
    first = values.data<T>();
    batch_stride = values.strides()[0];
    head_stride = values.strides()[1];
    stride = rows_layout(values).leading;
  }
  const T* head(int64_t b, int64_t h) const { return first + b * batch_stride + h * head_stride; }
};

// A run of a tile's row, for Eigen's vectorised exp. Its exp stops at the smallest normal number
// (about 1e-38 in float32) instead of going to 0 (ops' exp fixes that up, exp_full_range in
// elementwise.cpp); here the argument is at most 0, so such an entry weighs under 1e-37 of the
// row's largest, which rounds away in every sum it enters.
template <typename T>
using ArrayView = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

// Tiles of scores at Eigen's largest alignment, so every row of a tile (kTile elements) starts on
// it. Eigen peels a Map's unaligned first elements off its vector loop (scalar exp, another order
// of the sum), so on malloc's 16-byte alignment a row's result followed where the heap happened to
// put the tile: the same attention, called twice, differed in the last bits.
template <typename T>
using Tile = std::vector<T, Eigen::aligned_allocator<T>>;

// One head: q [T, D], k and v [S, D]; packed [T, D + 1] (output, then the log-sum-exp).
template <typename T>
void forward_head(const Dims& d, const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v, int64_t ldv, T scale,
                  T* packed, Tile<T>& tile, std::vector<T>& output, std::vector<T>& row_max,
                  std::vector<T>& row_sum) {
  const int64_t D = d.dim;
  for (int64_t first = 0; first < d.time; first += kTile) {
    const int64_t rows = std::min(kTile, d.time - first), key_end = d.visible_keys(first + rows - 1);
    std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<T>::infinity());
    std::fill(row_sum.begin(), row_sum.end(), T(0));
    std::fill(output.begin(), output.begin() + rows * D, T(0));
    for (int64_t key = 0; key < key_end; key += kTile) {
      const int64_t cols = std::min(kTile, key_end - key);
      gemm<T>(false, true, rows, cols, D, scale, q + first * ldq, ldq, k + key * ldk, ldk, T(0), tile.data(), kTile);
      for (int64_t r = 0; r < rows; ++r) {
        T* scores = tile.data() + r * kTile;
        const int64_t visible = std::clamp<int64_t>(d.visible_keys(first + r) - key, 0, cols);
        T largest = row_max[r];
        for (int64_t c = 0; c < visible; ++c) largest = std::max(largest, scores[c]);
        // A row with no visible key in this tile keeps its state: exp(-inf - -inf) would be NaN.
        const T rescale = visible > 0 ? std::exp(row_max[r] - largest) : T(1);
        ArrayView<T> weights(scores, visible);
        weights = (weights - largest).exp();
        const T added = weights.sum();
        std::fill(scores + visible, scores + cols, T(0));
        row_sum[r] = row_sum[r] * rescale + added;
        row_max[r] = largest;
        T* row = output.data() + r * D;
        for (int64_t c = 0; c < D; ++c) row[c] *= rescale;
      }
      gemm<T>(false, false, rows, D, cols, T(1), tile.data(), kTile, v + key * ldv, ldv, T(1), output.data(), D);
    }
    for (int64_t r = 0; r < rows; ++r) {
      T* out = packed + (first + r) * (D + 1);
      const T inverse = T(1) / row_sum[r];
      for (int64_t c = 0; c < D; ++c) out[c] = output[r * D + c] * inverse;
      out[D] = row_max[r] + std::log(row_sum[r]);
    }
  }
}

template <typename T>
void forward(CpuBackend& backend, const Tensor& q, const Tensor& k, const Tensor& v, double scale,
             const Tensor& packed) {
  const Dims d = dims_of(q, k);
  const Rows<T> qs(backend, q), ks(backend, k), vs(backend, v);
  T* out = packed.data<T>();
  const int64_t units = d.batch * d.heads;
  for_each_block(units, block_count(units, 1), [&](int64_t, int64_t first, int64_t end) {
    Tile<T> tile(kTile * kTile);
    std::vector<T> output(kTile * d.dim), row_max(kTile), row_sum(kTile);
    for (int64_t unit = first; unit < end; ++unit) {
      const int64_t b = unit / d.heads, h = unit % d.heads, kv = h / d.group();
      forward_head<T>(d, qs.head(b, h), qs.stride, ks.head(b, kv), ks.stride, vs.head(b, kv), vs.stride,
                      static_cast<T>(scale), out + unit * d.time * (d.dim + 1), tile, output, row_max, row_sum);
    }
  });
}

// One query head's share of the gradients: dq [T, D] written, dk and dv [S, D] added to.
template <typename T>
void backward_head(const Dims& d, const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v, int64_t ldv, T scale,
                   const T* packed, const T* d_packed, T* dq, T* dk, T* dv, Tile<T>& weights,
                   Tile<T>& d_scores, std::vector<T>& row_dot) {
  const int64_t D = d.dim;
  // dS = P (dP - rowsum(dO * O)) + P d(lse): the log-sum-exp's cotangent enters as a shift.
  for (int64_t t = 0; t < d.time; ++t) {
    const T* out = packed + t * (D + 1);
    const T* d_out = d_packed + t * (D + 1);
    T dot = 0;
    for (int64_t c = 0; c < D; ++c) dot += d_out[c] * out[c];
    row_dot[t] = dot - d_out[D];
  }
  std::fill(dq, dq + d.time * D, T(0));
  for (int64_t key = 0; key < d.keys; key += kTile) {
    const int64_t cols = std::min(kTile, d.keys - key);
    // The first query that sees this tile's first key, rounded down to its tile.
    const int64_t first_query = std::max<int64_t>(0, key - (d.keys - d.time)) / kTile * kTile;
    for (int64_t first = first_query; first < d.time; first += kTile) {
      const int64_t rows = std::min(kTile, d.time - first);
      gemm<T>(false, true, rows, cols, D, scale, q + first * ldq, ldq, k + key * ldk, ldk, T(0), weights.data(), kTile);
      for (int64_t r = 0; r < rows; ++r) {
        T* row = weights.data() + r * kTile;
        const int64_t visible = std::clamp<int64_t>(d.visible_keys(first + r) - key, 0, cols);
        const T log_sum = packed[(first + r) * (D + 1) + D];
        ArrayView<T> probabilities(row, visible);
        probabilities = (probabilities - log_sum).exp();
        std::fill(row + visible, row + cols, T(0));
      }
      const T* d_out = d_packed + first * (D + 1);
      gemm<T>(true, false, cols, D, rows, T(1), weights.data(), kTile, d_out, D + 1, T(1), dv + key * D, D);
      gemm<T>(false, true, rows, cols, D, T(1), d_out, D + 1, v + key * ldv, ldv, T(0), d_scores.data(), kTile);
      for (int64_t r = 0; r < rows; ++r) {
        const T* p = weights.data() + r * kTile;
        T* ds = d_scores.data() + r * kTile;
        const T shift = row_dot[first + r];
        for (int64_t c = 0; c < cols; ++c) ds[c] = p[c] * (ds[c] - shift) * scale;
      }
      gemm<T>(false, false, rows, D, cols, T(1), d_scores.data(), kTile, k + key * ldk, ldk, T(1), dq + first * D, D);
      gemm<T>(true, false, cols, D, rows, T(1), d_scores.data(), kTile, q + first * ldq, ldq, T(1), dk + key * D, D);
    }
  }
}

template <typename T>
void backward(CpuBackend& backend, const Tensor& q, const Tensor& k, const Tensor& v, double scale,
              const Tensor& packed, const Tensor& d_packed, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const Dims d = dims_of(q, k);
  const Rows<T> qs(backend, q), ks(backend, k), vs(backend, v);
  const T *ps = packed.data<T>(), *dps = d_packed.data<T>();
  T *dqs = dq.data<T>(), *dks = dk.data<T>(), *dvs = dv.data<T>();
  const int64_t units = d.batch * d.kv_heads, query_size = d.time * d.dim, key_size = d.keys * d.dim;
  const int64_t packed_size = d.time * (d.dim + 1);
  for_each_block(units, block_count(units, 1), [&](int64_t, int64_t first, int64_t end) {
    Tile<T> weights(kTile * kTile), d_scores(kTile * kTile);
    std::vector<T> row_dot(d.time);
    for (int64_t unit = first; unit < end; ++unit) {
      std::fill(dks + unit * key_size, dks + (unit + 1) * key_size, T(0));
      std::fill(dvs + unit * key_size, dvs + (unit + 1) * key_size, T(0));
      const int64_t b = unit / d.kv_heads, g = unit % d.kv_heads;
      for (int64_t j = 0; j < d.group(); ++j) {
        const int64_t h = g * d.group() + j, head = b * d.heads + h;
        backward_head<T>(d, qs.head(b, h), qs.stride, ks.head(b, g), ks.stride, vs.head(b, g), vs.stride,
                         static_cast<T>(scale), ps + head * packed_size, dps + head * packed_size,
                         dqs + head * query_size, dks + unit * key_size, dvs + unit * key_size, weights, d_scores,
                         row_dot);
      }
    }
  });
}

}  // namespace

void CpuBackend::causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                  const Tensor& packed) {
  if (q.dtype() == DType::f32) {
    forward<float>(*this, q, k, v, scale, packed);
  } else {
    forward<double>(*this, q, k, v, scale, packed);
  }
}

void CpuBackend::causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                           const Tensor& packed, const Tensor& d_packed, const Tensor& dq,
                                           const Tensor& dk, const Tensor& dv) {
  if (q.dtype() == DType::f32) {
    backward<float>(*this, q, k, v, scale, packed, d_packed, dq, dk, dv);
  } else {
    backward<double>(*this, q, k, v, scale, packed, d_packed, dq, dk, dv);
  }
}

}  // namespace eddy::cpu_kernels
