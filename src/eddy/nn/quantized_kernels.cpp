#include "eddy/nn/quantized_kernels.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#if (defined(__AVX2__) && defined(__FMA__)) || defined(__AVX512F__)
#include <immintrin.h>
#endif

// With AVX-512 VNNI the products are integer dot products; otherwise float multiply-adds.
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define EDDY_INTEGER_PRODUCTS 1
#else
#define EDDY_INTEGER_PRODUCTS 0
#endif

namespace eddy::nn::quantized_kernels {
namespace {

constexpr int64_t kParallelWeights = 1 << 16;  // smaller matrices run on one thread

int int4_value(const uint8_t* row, int64_t column) {
  const int64_t run = column / kInt4Run, within = column % kInt4Run;
  const uint8_t byte = row[run * 16 + within % 16];
  return (within < 16 ? byte & 0x0F : byte >> 4) - 8;
}

#if defined(__AVX512F__)
// With AVX-512 an int4 value becomes a float by a lookup: the 16 floats (n - 8) * scale of one
// group of one row fill a register, and a permute indexed by the nibble picks its value. That
// spends one instruction per 16 values where converting (subtract 8, widen, convert, scale per
// group) spent several: one core's int4 matrix-vector products went from about 14 to 21-23 G
// weights/s (int8's speed) on a 768 x 3072 matrix, and decoding a 6 x 320 GPT-2 from 630 to 1,050
// tokens/s.
__m512 int4_table(float scale) {
  const __m512 values = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  return _mm512_mul_ps(values, _mm512_set1_ps(scale));
}

// A run of 32 int4 values (16 bytes) as floats: values 0..15 from the low nibbles, 16..31 from
// the high ones. The permute reads the low 4 bits of each 32-bit lane, so the byte needs no mask.
// (The zero-masked forms with every lane selected are the plain instructions; GCC 12's plain
// intrinsics start from an undefined register that -Wuninitialized reports, its bug 105593.)
struct RunFloats {
  __m512 first, second;
};
constexpr __mmask16 kAllLanes = 0xFFFF;
RunFloats unpack_int4_run(const uint8_t* run, __m512 table) {
  const __m512i bytes = _mm512_maskz_cvtepu8_epi32(kAllLanes, _mm_loadu_si128(reinterpret_cast<const __m128i*>(run)));
  return {_mm512_maskz_permutexvar_ps(kAllLanes, bytes, table),
          _mm512_maskz_permutexvar_ps(kAllLanes, _mm512_maskz_srli_epi32(kAllLanes, bytes, 4), table)};
}

float horizontal_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return std::accumulate(lanes, lanes + 16, 0.0f);
}
#endif

// Decoding multiplies one row of activations by each weight row. Rows go kRowsAtOnce at a time:
// each load of x then serves every row, and their independent FMA chains hide the FMA latency
// that a single row's two accumulators left exposed (int8 and int4 decoding ran at about 4 GB/s of
// weights on one core, while float32 GEMV streamed 10).
constexpr int64_t kRowsAtOnce = 4;

#if defined(__AVX2__) && defined(__FMA__)
// The rows after the ones being multiplied lie right after them, and are read next. Their rows are
// short streams (12 cache lines for 768 int8 columns), which end before the hardware prefetcher
// has caught on: int8 decoding read weights that did not fit in cache at 6 GB/s where float32
// GEMV reached 23 (20 to 22 with this). So each step over the current rows, which has consumed
// `consumed` bytes of them, requests the cache line as far into the next rows. (int4's float
// kernels are bound by their shuffles before memory and ran no faster with it; its integer kernel
// is not, and decoding a 6 x 320 GPT-2 went from 1,460 to about 1,780 tokens/s.)
void prefetch_next_rows(const void* rows, int64_t rows_bytes, int64_t consumed) {
  __builtin_prefetch(static_cast<const char*>(rows) + rows_bytes + consumed);
}
#endif

// The products multiply activations rounded to int8: each run of 32 columns of a row of x becomes
// q * s with s = max |x| / 127 over the run and q = x / s to nearest (llama.cpp rounds the
// activations of its 4- and 8-bit weights the same way, its Q8_0 blocks). With AVX-512 VNNI a
// run's products are then integer dot products, 64 weights per instruction with no shuffle, where
// turning each nibble into a float had bound the int4 kernel on its permutes. Every path rounds,
// so a prompt, a decoded token and every CPU give the same values to float rounding.
int8_t round_to_run(float x, float run_scale) {
  return run_scale > 0 ? static_cast<int8_t>(std::lrint(x / run_scale)) : 0;
}

// visit(start, count, scale) for each run of x's `columns` values.
template <typename Visit>
void for_each_run(const float* x, int64_t columns, Visit&& visit) {
  for (int64_t start = 0; start < columns; start += kInt4Run) {
    const int64_t count = std::min(kInt4Run, columns - start);
    float extent = 0;
    for (int64_t i = start; i < start + count; ++i) extent = std::max(extent, std::abs(x[i]));
    visit(start, count, extent / 127.0f);
  }
}

#if EDDY_INTEGER_PRODUCTS
// The bytes of a row of `row_stride` bytes that lie in the last of its `chunks` 64-byte chunks.
__mmask64 bytes_in_last_chunk(int64_t row_stride, int64_t chunks) {
  const int64_t bytes = row_stride - (chunks - 1) * 64;
  return bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1;
}

// x rounded and laid out for the int4 rows' 64-byte chunks. A chunk is 4 runs (128 columns); the
// low nibbles of its bytes hold the first 16 values of each run and the high nibbles the last 16,
// so `low_partners` and `high_partners` hold the matching 64 values of x, and int32 lane j of a
// product sums 8 values of run j / 4. The rest is per lane too: the scale of x's run, the offset
// that takes the nibbles' + 8 back out (-8 times the sum of the lane's 8 values of x), and which of
// the up to 4 weight groups that start at `first_group` the lane's run belongs to.
struct Int4Input {
  int64_t chunks = 0;
  std::vector<int8_t> low_partners, high_partners;  // 64 per chunk
  std::vector<int32_t> offsets, group_lanes;         // 16 per chunk
  std::vector<float> lane_scales;                    // 16 per chunk
  std::vector<int64_t> first_group;                  // 1 per chunk
  std::vector<__mmask8> group_masks;                 // the groups from first_group that exist
  __mmask64 last_chunk_bytes = 0;                    // the bytes of a row in its last chunk
};

Int4Input int4_input(const float* x, int64_t columns, int64_t group, int64_t row_stride) {
  constexpr int64_t kChunkColumns = 128, kLanes = 16;
  Int4Input a;
  const int64_t padded = row_stride * 2, groups = ceil_div(columns, group);
  a.chunks = ceil_div(padded, kChunkColumns);
  a.low_partners.assign(static_cast<size_t>(a.chunks * 64), 0);
  a.high_partners.assign(static_cast<size_t>(a.chunks * 64), 0);
  a.offsets.assign(static_cast<size_t>(a.chunks * kLanes), 0);
  a.group_lanes.assign(static_cast<size_t>(a.chunks * kLanes), 0);
  a.lane_scales.assign(static_cast<size_t>(a.chunks * kLanes), 0.0f);
  for_each_run(x, columns, [&](int64_t start, int64_t count, float scale) {
    const int64_t run = start / kInt4Run, chunk = run / 4, slot = run % 4;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<int8_t>& partners = i < 16 ? a.low_partners : a.high_partners;
      partners[static_cast<size_t>(chunk * 64 + slot * 16 + i % 16)] = round_to_run(x[start + i], scale);
    }
    std::fill_n(a.lane_scales.begin() + chunk * kLanes + slot * 4, 4, scale);
  });
  for (int64_t chunk = 0; chunk < a.chunks; ++chunk) {
    const int64_t first = chunk * kChunkColumns / group;
    a.first_group.push_back(first);
    a.group_masks.push_back(static_cast<__mmask8>((1u << std::min<int64_t>(4, groups - first)) - 1));
    for (int64_t lane = 0; lane < kLanes; ++lane) {
      const int64_t at = chunk * kLanes + lane;
      int32_t sum = 0;
      for (int64_t b = 0; b < 4; ++b) sum += a.low_partners[at * 4 + b] + a.high_partners[at * 4 + b];
      a.offsets[at] = -8 * sum;
      a.group_lanes[at] = static_cast<int32_t>((chunk * 4 + lane / 4) * kInt4Run / group - first);
    }
  }
  a.last_chunk_bytes = bytes_in_last_chunk(row_stride, a.chunks);
  return a;
}

// out[r] = row r of int4 weights . x for `Rows` rows `stride` bytes and `groups` scales apart.
template <int Rows>
void dot_int4(const uint8_t* weights, int64_t stride, const Int4Input& x, const float* scales, int64_t groups,
              float* out) {
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  __m512 sums[Rows];
  for (int r = 0; r < Rows; ++r) sums[r] = _mm512_setzero_ps();
  for (int64_t chunk = 0; chunk < x.chunks; ++chunk) {
    const __mmask64 bytes = chunk + 1 < x.chunks ? ~__mmask64{0} : x.last_chunk_bytes;
    const __m512i low_partners = _mm512_loadu_si512(x.low_partners.data() + chunk * 64);
    const __m512i high_partners = _mm512_loadu_si512(x.high_partners.data() + chunk * 64);
    const __m512i offsets = _mm512_loadu_si512(x.offsets.data() + chunk * 16);
    const __m512i group_lanes = _mm512_loadu_si512(x.group_lanes.data() + chunk * 16);
    const __m512 lane_scales = _mm512_loadu_ps(x.lane_scales.data() + chunk * 16);
    const float* chunk_scales = scales + x.first_group[chunk];
    for (int r = 0; r < Rows; ++r) {
      const __m512i packed = _mm512_maskz_loadu_epi8(bytes, weights + r * stride + chunk * 64);
      prefetch_next_rows(weights + r * stride, Rows * stride, chunk * 64);
      __m512i products = _mm512_dpbusd_epi32(offsets, _mm512_and_si512(packed, low_nibbles), low_partners);
      products = _mm512_dpbusd_epi32(products, _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_nibbles),
                                     high_partners);
      const __m128 row_scales = _mm_maskz_loadu_ps(x.group_masks[chunk], chunk_scales + r * groups);
      const __m512 weight_scales =
          _mm512_maskz_permutexvar_ps(kAllLanes, group_lanes, _mm512_zextps128_ps512(row_scales));
      const __m512 run_scales = _mm512_mul_ps(weight_scales, lane_scales);
      sums[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAllLanes, products), run_scales, sums[r]);
    }
  }
  for (int r = 0; r < Rows; ++r) out[r] = horizontal_sum(sums[r]);
}

// x rounded for the int8 rows' 64-byte chunks: the values in column order, and per int32 lane of
// a chunk (4 columns) the scale of its run (lanes 0-7 the chunk's first run, 8-15 its second).
struct Int8Input {
  int64_t chunks = 0;
  std::vector<int8_t> values;      // 64 per chunk
  std::vector<float> lane_scales;  // 16 per chunk
  __mmask64 last_chunk_bytes = 0;  // the bytes of a row in its last chunk
};

Int8Input int8_input(const float* x, int64_t columns, int64_t row_stride) {
  Int8Input a;
  a.chunks = ceil_div(row_stride, 64);
  a.values.assign(static_cast<size_t>(a.chunks * 64), 0);
  a.lane_scales.assign(static_cast<size_t>(a.chunks * 16), 0.0f);
  for_each_run(x, columns, [&](int64_t start, int64_t count, float scale) {
    for (int64_t i = start; i < start + count; ++i) a.values[static_cast<size_t>(i)] = round_to_run(x[i], scale);
    std::fill_n(a.lane_scales.begin() + start / 4, 8, scale);
  });
  a.last_chunk_bytes = bytes_in_last_chunk(row_stride, a.chunks);
  return a;
}

// out[r] = scale[r] * (row r of int8 weights . x) for `Rows` rows `stride` bytes apart. vpdpbusd
// multiplies unsigned bytes by signed ones, so each weight's sign moves onto its x: |w| times
// +-x, the same products.
template <int Rows>
void dot_int8(const int8_t* weights, int64_t stride, const Int8Input& x, const float* scales, float* out) {
  const __m512i zero = _mm512_setzero_si512();
  __m512 sums[Rows];
  for (int r = 0; r < Rows; ++r) sums[r] = _mm512_setzero_ps();
  for (int64_t chunk = 0; chunk < x.chunks; ++chunk) {
    const __mmask64 bytes = chunk + 1 < x.chunks ? ~__mmask64{0} : x.last_chunk_bytes;
    const __m512i values = _mm512_loadu_si512(x.values.data() + chunk * 64);
    const __m512 lane_scales = _mm512_loadu_ps(x.lane_scales.data() + chunk * 16);
    for (int r = 0; r < Rows; ++r) {
      const __m512i w = _mm512_maskz_loadu_epi8(bytes, weights + r * stride + chunk * 64);
      prefetch_next_rows(weights + r * stride, Rows * stride, chunk * 64);
      const __m512i signed_values = _mm512_mask_sub_epi8(values, _mm512_movepi8_mask(w), zero, values);
      const __m512i products = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(w), signed_values);
      sums[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAllLanes, products), lane_scales, sums[r]);
    }
  }
  for (int r = 0; r < Rows; ++r) out[r] = horizontal_sum(sums[r]) * scales[r];
}
#else
#if defined(__AVX2__) && defined(__FMA__)
float horizontal_sum(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(quarter, _mm_movehdup_ps(quarter)));
}

// 8 signed bytes from memory as floats: widening straight from memory spares a shuffle.
__m256 load_int8_as_floats(const int8_t* bytes) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes))));
}
#endif

// out[r] = scale[r] * (row r of int8 weights . x) for `Rows` rows `stride` bytes apart.
template <int Rows>
void dot_int8(const int8_t* weights, int64_t stride, const float* x, int64_t columns, const float* scales,
              float* out) {
  int64_t vectorised = 0;
  float sums[Rows] = {};
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc0[Rows], acc1[Rows];
  for (int r = 0; r < Rows; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  for (; vectorised + 16 <= columns; vectorised += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + vectorised), x1 = _mm256_loadu_ps(x + vectorised + 8);
    prefetch_next_rows(weights, Rows * stride, vectorised * Rows);
    for (int r = 0; r < Rows; ++r) {
      const int8_t* row = weights + r * stride + vectorised;
      acc0[r] = _mm256_fmadd_ps(load_int8_as_floats(row), x0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(load_int8_as_floats(row + 8), x1, acc1[r]);
    }
  }
  for (int r = 0; r < Rows; ++r) sums[r] = horizontal_sum(_mm256_add_ps(acc0[r], acc1[r]));
#endif
  for (int r = 0; r < Rows; ++r) {
    const int8_t* row = weights + r * stride;
    for (int64_t i = vectorised; i < columns; ++i) sums[r] += static_cast<float>(row[i]) * x[i];
    out[r] = sums[r] * scales[r];
  }
}

// The values of row `row` of int4 weights in columns [from, end) . x[from, end), unscaled.
float int4_dot_tail(const uint8_t* row, const float* x, int64_t from, int64_t end) {
  float sum = 0;
  for (int64_t c = from; c < end; ++c) sum += static_cast<float>(int4_value(row, c)) * x[c];
  return sum;
}

// out[r] = row r of int4 weights . x, each group times its scale, for `Rows` rows `stride` bytes
// and `groups` scales apart.
#if defined(__AVX512F__)
template <int Rows>
void dot_int4(const uint8_t* weights, int64_t stride, const float* x, int64_t columns, int64_t group,
              const float* scales, int64_t groups, float* out) {
  float sums[Rows] = {};
  __m512 acc0[Rows], acc1[Rows];
  for (int r = 0; r < Rows; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t start = 0, g = 0; start < columns; start += group, ++g) {
    const int64_t end = std::min(columns, start + group);
    __m512 table[Rows];
    for (int r = 0; r < Rows; ++r) table[r] = int4_table(scales[r * groups + g]);
    int64_t i = start;
    for (; i + kInt4Run <= end; i += kInt4Run) {
      const __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
      for (int r = 0; r < Rows; ++r) {
        const RunFloats w = unpack_int4_run(weights + r * stride + i / 2, table[r]);
        acc0[r] = _mm512_fmadd_ps(w.first, x0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(w.second, x1, acc1[r]);
      }
    }
    for (int r = 0; r < Rows; ++r) sums[r] += int4_dot_tail(weights + r * stride, x, i, end) * scales[r * groups + g];
  }
  for (int r = 0; r < Rows; ++r) out[r] = sums[r] + horizontal_sum(_mm512_add_ps(acc0[r], acc1[r]));
}
#else
template <int Rows>
void dot_int4(const uint8_t* weights, int64_t stride, const float* x, int64_t columns, int64_t group,
              const float* scales, int64_t groups, float* out) {
  float sums[Rows] = {};
#if defined(__AVX2__) && defined(__FMA__)
  const __m128i low_nibbles = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  __m256 total[Rows];
  for (int r = 0; r < Rows; ++r) total[r] = _mm256_setzero_ps();
#endif
  for (int64_t start = 0, g = 0; start < columns; start += group, ++g) {
    const int64_t end = std::min(columns, start + group);
    int64_t i = start;
#if defined(__AVX2__) && defined(__FMA__)
    __m256 acc0[Rows], acc1[Rows];
    for (int r = 0; r < Rows; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    for (; i + kInt4Run <= end; i += kInt4Run) {
      const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
      const __m256 x2 = _mm256_loadu_ps(x + i + 16), x3 = _mm256_loadu_ps(x + i + 24);
      for (int r = 0; r < Rows; ++r) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(weights + r * stride + i / 2));
        const __m128i first = _mm_sub_epi8(_mm_and_si128(bytes, low_nibbles), eight);
        const __m128i second = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibbles), eight);
        acc0[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(first)), x0, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(first, 8))), x1, acc1[r]);
        acc0[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(second)), x2, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(second, 8))), x3, acc1[r]);
      }
    }
    // Scaled per group but summed across lanes once per row.
    for (int r = 0; r < Rows; ++r) {
      total[r] = _mm256_fmadd_ps(_mm256_add_ps(acc0[r], acc1[r]), _mm256_set1_ps(scales[r * groups + g]), total[r]);
    }
#endif
    for (int r = 0; r < Rows; ++r) sums[r] += int4_dot_tail(weights + r * stride, x, i, end) * scales[r * groups + g];
  }
  for (int r = 0; r < Rows; ++r) {
#if defined(__AVX2__) && defined(__FMA__)
    sums[r] += horizontal_sum(total[r]);
#endif
    out[r] = sums[r];
  }
}
#endif
#endif  // EDDY_INTEGER_PRODUCTS

// One row of x as the kernels of a matrix of `bits` read it.
struct KernelInput {
#if EDDY_INTEGER_PRODUCTS
  Int4Input int4;
  Int8Input int8;
#else
  std::vector<float> rounded;
#endif
};

KernelInput kernel_input(const float* x, const QuantizedMatrix& m, int64_t stride) {
  KernelInput input;
#if EDDY_INTEGER_PRODUCTS
  if (m.bits == 4) {
    input.int4 = int4_input(x, m.columns, m.group, stride);
  } else {
    input.int8 = int8_input(x, m.columns, stride);
  }
#else
  input.rounded.resize(static_cast<size_t>(m.columns));
  round_activations(x, m.columns, input.rounded.data());
#endif
  return input;
}

// y = W x for one row x: `Rows` output rows from `first`.
template <int Rows>
void quantized_rows(const QuantizedMatrix& m, const uint8_t* bytes, int64_t stride, const float* scales,
                    int64_t groups, int64_t first, const KernelInput& x, float* y) {
  const uint8_t* rows = bytes + first * stride;
#if EDDY_INTEGER_PRODUCTS
  if (m.bits == 8) {
    dot_int8<Rows>(reinterpret_cast<const int8_t*>(rows), stride, x.int8, scales + first, y + first);
  } else {
    dot_int4<Rows>(rows, stride, x.int4, scales + first * groups, groups, y + first);
  }
#else
  if (m.bits == 8) {
    dot_int8<Rows>(reinterpret_cast<const int8_t*>(rows), stride, x.rounded.data(), m.columns, scales + first,
                   y + first);
  } else {
    dot_int4<Rows>(rows, stride, x.rounded.data(), m.columns, m.group, scales + first * groups, groups, y + first);
  }
#endif
}

}  // namespace

void round_activations(const float* x, int64_t columns, float* rounded) {
  for_each_run(x, columns, [&](int64_t start, int64_t count, float scale) {
    for (int64_t i = start; i < start + count; ++i) rounded[i] = static_cast<float>(round_to_run(x[i], scale)) * scale;
  });
}

void matrix_vector(const QuantizedMatrix& m, const float* x, float* y) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(m.packed.data<int32_t>());
  const float* scales = m.scales.data<float>();
  const int64_t stride = row_bytes(m.bits, m.columns, m.group), groups = m.scales.shape()[1];
  const KernelInput input = kernel_input(x, m, stride);
  const int64_t full_blocks = m.rows / kRowsAtOnce;
#pragma omp parallel for schedule(static) if (m.rows * m.columns >= kParallelWeights)
  for (int64_t b = 0; b < full_blocks; ++b) {
    quantized_rows<kRowsAtOnce>(m, bytes, stride, scales, groups, b * kRowsAtOnce, input, y);
  }
  for (int64_t r = full_blocks * kRowsAtOnce; r < m.rows; ++r) {
    quantized_rows<1>(m, bytes, stride, scales, groups, r, input, y);
  }
}

void dequantize_rows(const QuantizedMatrix& m, int64_t first, int64_t end, float* into) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(m.packed.data<int32_t>());
  const float* scales = m.scales.data<float>();
  const int64_t stride = row_bytes(m.bits, m.columns, m.group), groups = m.scales.shape()[1];
  for (int64_t r = first; r < end; ++r) {
    const uint8_t* row = bytes + r * stride;
    float* out = into + (r - first) * m.columns;
    if (m.bits == 8) {
      const auto* values = reinterpret_cast<const int8_t*>(row);
      for (int64_t c = 0; c < m.columns; ++c) out[c] = static_cast<float>(values[c]) * scales[r];
      continue;
    }
    for (int64_t start = 0, g = 0; start < m.columns; start += m.group, ++g) {
      const int64_t group_end = std::min(m.columns, start + m.group);
      const float scale = scales[r * groups + g];
      int64_t c = start;
#if defined(__AVX512F__)
      const __m512 table = int4_table(scale);
      for (; c + kInt4Run <= group_end; c += kInt4Run) {
        const RunFloats w = unpack_int4_run(row + c / 2, table);
        _mm512_storeu_ps(out + c, w.first);
        _mm512_storeu_ps(out + c + 16, w.second);
      }
#endif
      for (; c < group_end; ++c) out[c] = static_cast<float>(int4_value(row, c)) * scale;
    }
  }
}

}  // namespace eddy::nn::quantized_kernels
