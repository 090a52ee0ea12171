#include "eddy/nn/quantized.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>

#if (defined(__AVX2__) && defined(__FMA__)) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "eddy/core/autograd.h"
#include "eddy/core/tracing.h"
#include "eddy/ops/ops.h"

namespace eddy::nn {
namespace {

constexpr int64_t kInt4Run = 32;         // values per 16-byte run of int4 nibbles
constexpr int64_t kBlockRows = 64;       // output rows dequantised at a time for several input rows
constexpr int64_t kParallelWeights = 1 << 16;  // smaller matrices run on one thread

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t row_bytes(int bits, int64_t columns, int64_t group) {
  return bits == 8 ? ceil_div(columns, 4) * 4 : ceil_div(columns, group) * group / 2;
}

int int4_value(const uint8_t* row, int64_t column) {
  const int64_t run = column / kInt4Run, within = column % kInt4Run;
  const uint8_t byte = row[run * 16 + within % 16];
  return (within < 16 ? byte & 0x0F : byte >> 4) - 8;
}

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
// and `groups` scales apart. (With AVX-512 VNNI, the integer kernel below replaces these.)
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

// int4 products multiply activations rounded to int8: each run of 32 columns of a row of x
// becomes q * s with s = max |x| / 127 over the run and q = x / s to nearest (llama.cpp rounds the
// activations of its 4-bit weights the same way, its Q8_0 blocks). With AVX-512 VNNI a run's
// products are then integer dot products, 64 weights per instruction with no shuffle, where
// turning each nibble into a float had bound the kernel on its permutes. Every path rounds, so a
// prompt, a decoded token and every CPU give the same values to float rounding.
int8_t round_to_run(float x, float run_scale) {
  return run_scale > 0 ? static_cast<int8_t>(std::lrint(x / run_scale)) : 0;
}

float run_scale_of(const float* x, int64_t count) {
  float extent = 0;
  for (int64_t i = 0; i < count; ++i) extent = std::max(extent, std::abs(x[i]));
  return extent / 127.0f;
}

// `columns` values of x as the floats they are rounded to.
void round_activations(const float* x, int64_t columns, float* rounded) {
  for (int64_t start = 0; start < columns; start += kInt4Run) {
    const int64_t count = std::min(kInt4Run, columns - start);
    const float scale = run_scale_of(x + start, count);
    for (int64_t i = start; i < start + count; ++i) rounded[i] = static_cast<float>(round_to_run(x[i], scale)) * scale;
  }
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
// x rounded and laid out for the int4 rows' 64-byte chunks. A chunk is 4 runs (128 columns); the
// low nibbles of its bytes hold the first 16 values of each run and the high nibbles the last 16,
// so `low_partners` and `high_partners` hold the matching 64 values of x, and int32 lane j of a
// product sums 8 values of run j / 4. The rest is per lane too: the scale of x's run, the offset
// that takes the nibbles' + 8 back out (-8 times the sum of the lane's 8 values of x), and which of
// the up to 4 weight groups that start at `first_group` the lane's run belongs to.
struct Int8Activations {
  int64_t chunks = 0;
  std::vector<int8_t> low_partners, high_partners;  // 64 per chunk
  std::vector<int32_t> offsets, group_lanes;         // 16 per chunk
  std::vector<float> lane_scales;                    // 16 per chunk
  std::vector<int64_t> first_group;                  // 1 per chunk
  std::vector<__mmask8> group_masks;                 // the groups from first_group that exist
  __mmask64 last_chunk_bytes = 0;                    // the bytes of a row in its last chunk
};

Int8Activations int8_activations(const float* x, int64_t columns, int64_t group, int64_t row_stride) {
  constexpr int64_t kChunkColumns = 128, kLanes = 16;
  Int8Activations a;
  const int64_t padded = row_stride * 2, groups = ceil_div(columns, group);
  a.chunks = ceil_div(padded, kChunkColumns);
  a.low_partners.assign(static_cast<size_t>(a.chunks * 64), 0);
  a.high_partners.assign(static_cast<size_t>(a.chunks * 64), 0);
  a.offsets.assign(static_cast<size_t>(a.chunks * kLanes), 0);
  a.group_lanes.assign(static_cast<size_t>(a.chunks * kLanes), 0);
  a.lane_scales.assign(static_cast<size_t>(a.chunks * kLanes), 0.0f);
  for (int64_t start = 0; start < columns; start += kInt4Run) {
    const int64_t run = start / kInt4Run, count = std::min(kInt4Run, columns - start);
    const float scale = run_scale_of(x + start, count);
    const int64_t chunk = run / 4, slot = run % 4;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<int8_t>& partners = i < 16 ? a.low_partners : a.high_partners;
      partners[static_cast<size_t>(chunk * 64 + slot * 16 + i % 16)] = round_to_run(x[start + i], scale);
    }
    for (int64_t lane = slot * 4; lane < slot * 4 + 4; ++lane) a.lane_scales[chunk * kLanes + lane] = scale;
  }
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
  const int64_t last_bytes = row_stride - (a.chunks - 1) * 64;
  a.last_chunk_bytes = last_bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << last_bytes) - 1;
  return a;
}

// out[r] = row r of int4 weights . x for `Rows` rows `stride` bytes and `groups` scales apart.
template <int Rows>
void dot_int4(const uint8_t* weights, int64_t stride, const Int8Activations& x, const float* scales, int64_t groups,
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
      sums[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAllLanes, products), _mm512_mul_ps(weight_scales, lane_scales),
                                sums[r]);
    }
  }
  for (int r = 0; r < Rows; ++r) out[r] = horizontal_sum(sums[r]);
}
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
using Int4Activations = Int8Activations;
#else
struct Int4Activations {
  std::vector<float> rounded;
};
#endif

// One row of x as the int4 kernel reads it.
Int4Activations int4_activations(const float* x, const QuantizedMatrix& m, int64_t stride) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  return int8_activations(x, m.columns, m.group, stride);
#else
  Int4Activations activations{std::vector<float>(static_cast<size_t>(m.columns))};
  round_activations(x, m.columns, activations.rounded.data());
  return activations;
#endif
}

// y = W x for one row x: `Rows` output rows from `first`. An int4 matrix reads x as `int4_x`.
template <int Rows>
void quantized_rows(const QuantizedMatrix& m, const uint8_t* bytes, int64_t stride, const float* scales,
                    int64_t groups, int64_t first, const float* x, const Int4Activations& int4_x, float* y) {
  const uint8_t* rows = bytes + first * stride;
  if (m.bits == 8) {
    dot_int8<Rows>(reinterpret_cast<const int8_t*>(rows), stride, x, m.columns, scales + first, y + first);
  } else {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
    dot_int4<Rows>(rows, stride, int4_x, scales + first * groups, groups, y + first);
#else
    dot_int4<Rows>(rows, stride, int4_x.rounded.data(), m.columns, m.group, scales + first * groups, groups,
                   y + first);
#endif
  }
}

// Rows [first, end) of the matrix as floats into `into` [end - first, columns].
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

void check_options(int bits, int64_t group) {
  EDDY_CHECK(bits == 8 || bits == 4, "quantize: bits must be 8 or 4, got ", bits);
  EDDY_CHECK(bits == 8 || (group >= 32 && group <= 128 && group % kInt4Run == 0),
             "quantize: the int4 group must be 32, 64, 96 or 128 columns, got ", group);
}

}  // namespace

QuantizedMatrix quantize_matrix(const Tensor& weight_out_in, int bits, int64_t group) {
  check_options(bits, group);
  EDDY_CHECK(weight_out_in.dim() == 2 && is_floating(weight_out_in.dtype()),
             "quantize: expected a float matrix [out, in], got ", weight_out_in.dtype(), " ", weight_out_in.shape());
  QuantizedMatrix m;
  m.bits = bits;
  m.rows = weight_out_in.shape()[0];
  m.columns = weight_out_in.shape()[1];
  m.group = bits == 8 ? m.columns : group;
  const int64_t groups = ceil_div(m.columns, m.group), stride = row_bytes(bits, m.columns, m.group);
  const std::vector<float> w = weight_out_in.to_vector<float>();
  std::vector<uint8_t> bytes(static_cast<size_t>(m.rows * stride), 0);
  std::vector<float> scales(static_cast<size_t>(m.rows * groups));
  const int largest = bits == 8 ? 127 : 7;
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = g * m.group, end = std::min(m.columns, begin + m.group);
      float extent = 0;
      for (int64_t c = begin; c < end; ++c) extent = std::max(extent, std::abs(w[r * m.columns + c]));
      const float scale = extent / static_cast<float>(largest);
      scales[r * groups + g] = scale;
      uint8_t* row = bytes.data() + r * stride;
      for (int64_t c = begin; c < end; ++c) {
        const float ratio = scale > 0 ? w[r * m.columns + c] / scale : 0.0f;
        const int q = std::clamp(static_cast<int>(std::lround(ratio)), -largest, largest);
        if (bits == 8) {
          row[c] = static_cast<uint8_t>(static_cast<int8_t>(q));
        } else {
          const int64_t within = c % kInt4Run;
          uint8_t& byte = row[(c / kInt4Run) * 16 + within % 16];
          byte |= static_cast<uint8_t>((q + 8) << (within < 16 ? 0 : 4));
        }
      }
    }
  }
  m.packed = Tensor::empty({m.rows, stride / 4}, DType::i32);
  std::memcpy(m.packed.raw_data(), bytes.data(), bytes.size());
  m.scales = Tensor::empty({m.rows, groups}, DType::f32);
  std::copy(scales.begin(), scales.end(), m.scales.data<float>());
  return m;
}

Tensor dequantize(const QuantizedMatrix& matrix) {
  Tensor out = Tensor::empty({matrix.rows, matrix.columns}, DType::f32);
  dequantize_rows(matrix, 0, matrix.rows, out.data<float>());
  return out;
}

Tensor quantized_matmul(const Tensor& x, const QuantizedMatrix& m, const Tensor& bias) {
  EDDY_CHECK(x.dtype() == DType::f32 && x.dim() >= 1 && x.shape().back() == m.columns,
             "quantized_matmul: expected float32 [..., ", m.columns, "], got ", x.dtype(), " ", x.shape());
  EDDY_CHECK(!bias.defined() || (bias.dtype() == DType::f32 && bias.shape() == Shape{m.rows}),
             "quantized_matmul: the bias must be float32 [", m.rows, "], got ", bias.dtype(), " ", bias.shape());
  EDDY_CHECK(active_trace_recorder() == nullptr && !x.is_abstract(),
             "quantized_matmul: a quantised layer cannot be captured (it is for eager inference)");
  EDDY_CHECK(!(GradMode::enabled() && x.requires_grad()),
             "quantized_matmul: a quantised layer has no derivative; run inference under NoGradGuard");
  const Tensor input = contiguous(x);
  const int64_t n = input.numel() / m.columns;
  Shape shape = x.shape();
  shape.back() = m.rows;
  Tensor y = Tensor::empty(shape, DType::f32);
  const float* in = input.data<float>();
  float* out = y.data<float>();
  const auto* bytes = reinterpret_cast<const uint8_t*>(m.packed.data<int32_t>());
  const float* scales = m.scales.data<float>();
  const int64_t stride = row_bytes(m.bits, m.columns, m.group), groups = m.scales.shape()[1];
  const bool parallel = m.rows * m.columns >= kParallelWeights;
  if (n == 1) {
    const Int4Activations int4_x = m.bits == 4 ? int4_activations(in, m, stride) : Int4Activations{};
    const int64_t full_blocks = m.rows / kRowsAtOnce;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t b = 0; b < full_blocks; ++b) {
      quantized_rows<kRowsAtOnce>(m, bytes, stride, scales, groups, b * kRowsAtOnce, in, int4_x, out);
    }
    for (int64_t r = full_blocks * kRowsAtOnce; r < m.rows; ++r) {
      quantized_rows<1>(m, bytes, stride, scales, groups, r, in, int4_x, out);
    }
  } else {
    Tensor rows_of_x = reshape(input, {n, m.columns});
    if (m.bits == 4) {
      rows_of_x = Tensor::empty({n, m.columns}, DType::f32);
      float* rounded = rows_of_x.data<float>();
      for (int64_t i = 0; i < n; ++i) round_activations(in + i * m.columns, m.columns, rounded + i * m.columns);
    }
    const int64_t blocks = ceil_div(m.rows, kBlockRows);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = b * kBlockRows, end = std::min(m.rows, first + kBlockRows);
      Tensor block = Tensor::empty({end - first, m.columns}, DType::f32);
      dequantize_rows(m, first, end, block.data<float>());
      const Tensor part = contiguous(matmul(rows_of_x, transpose(block)));
      const float* from = part.data<float>();
      for (int64_t i = 0; i < n; ++i) std::copy_n(from + i * (end - first), end - first, out + i * m.rows + first);
    }
  }
  // Added here rather than as an op after: in decoding, an eager add costs more than this loop.
  if (bias.defined()) {
    const Tensor dense_bias = contiguous(bias);
    const float* b = dense_bias.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t r = 0; r < m.rows; ++r) out[i * m.rows + r] += b[r];
    }
  }
  return y;
}

std::vector<std::pair<std::string, std::shared_ptr<Linear>>> block_projections(CausalLanguageModel& model) {
  std::vector<std::pair<std::string, std::shared_ptr<Linear>>> found;
  if (auto* gpt2 = dynamic_cast<Gpt2Model*>(&model)) {
    for (size_t i = 0; i < gpt2->h.size(); ++i) {
      const std::string prefix = "transformer.h." + std::to_string(i) + ".";
      const Gpt2Block& block = *gpt2->h[i];
      found.emplace_back(prefix + "attn.c_attn", block.attn->c_attn);
      found.emplace_back(prefix + "attn.c_proj", block.attn->c_proj);
      found.emplace_back(prefix + "mlp.c_fc", block.mlp->c_fc);
      found.emplace_back(prefix + "mlp.c_proj", block.mlp->c_proj);
    }
  } else if (auto* llama = dynamic_cast<LlamaModel*>(&model)) {
    for (size_t i = 0; i < llama->layers.size(); ++i) {
      const std::string prefix = "model.layers." + std::to_string(i) + ".";
      const LlamaBlock& block = *llama->layers[i];
      found.emplace_back(prefix + "self_attn.q_proj", block.self_attn->q_proj);
      found.emplace_back(prefix + "self_attn.k_proj", block.self_attn->k_proj);
      found.emplace_back(prefix + "self_attn.v_proj", block.self_attn->v_proj);
      found.emplace_back(prefix + "self_attn.o_proj", block.self_attn->o_proj);
      found.emplace_back(prefix + "mlp.gate_proj", block.mlp->gate_proj);
      found.emplace_back(prefix + "mlp.up_proj", block.mlp->up_proj);
      found.emplace_back(prefix + "mlp.down_proj", block.mlp->down_proj);
    }
  } else {
    throw Error("quantize: only GPT-2 and Llama models can be quantised");
  }
  return found;
}

namespace {
// A weight between [out, in] and `layout`, either way: a transpose is its own inverse.
Tensor between_out_in_and(WeightLayout layout, const Tensor& weight) {
  return layout == WeightLayout::in_out ? transpose(weight) : weight;
}

// Sets a float weight to the values `matrix` stands for, in the weight's own layout.
void write_dequantized(Tensor& weight, const QuantizedMatrix& matrix, WeightLayout layout) {
  EDDY_CHECK(weight.dtype() == DType::f32, "quantize: the model must be float32, got ", weight.dtype());
  const Tensor values = dequantize(matrix);
  NoGradGuard no_grad;
  weight.copy_(between_out_in_and(layout, values));
}

Tensor out_in_weight(const Linear& layer) { return contiguous(between_out_in_and(layer.layout(), layer.weight)); }

// The [vocab, hidden] parameter the logits multiply.
Tensor output_head(const CausalLanguageModel& model) {
  const std::string name = model.output_head_name();
  for (const auto& [key, parameter] : model.named_parameters()) {
    if (key == name) return parameter;
  }
  throw Error(cat("quantize: the model has no parameter \"", name, "\" for its output head"));
}

// Takes "<weight_name>.packed" and "<weight_name>.scales" for a [rows, columns] matrix out of
// `state` and puts the float values they stand for under `weight_name`, in `layout`.
QuantizedMatrix take_quantized(StateDict& state, const std::string& weight_name, int64_t rows, int64_t columns,
                               WeightLayout layout, const QuantizationOptions& options) {
  QuantizedMatrix m;
  m.bits = options.bits;
  m.rows = rows;
  m.columns = columns;
  m.group = options.bits == 8 ? m.columns : options.group;
  const Shape packed_shape{m.rows, row_bytes(m.bits, m.columns, m.group) / 4};
  const Shape scales_shape{m.rows, ceil_div(m.columns, m.group)};
  for (const auto& [suffix, shape, dtype] : {std::tuple{".packed", packed_shape, DType::i32},
                                             std::tuple{".scales", scales_shape, DType::f32}}) {
    const std::string key = weight_name + suffix;
    const auto found = state.find(key);
    EDDY_CHECK(found != state.end(), "load_quantized_state_dict: missing key \"", key, "\"");
    EDDY_CHECK(found->second.shape() == shape && found->second.dtype() == dtype, "load_quantized_state_dict: \"",
               key, "\" is ", found->second.dtype(), " ", found->second.shape(), " but int", options.bits,
               " weights of this model need ", dtype, " ", shape);
    (std::string(suffix) == ".packed" ? m.packed : m.scales) = contiguous(found->second);
    state.erase(found);
  }
  state.emplace(weight_name, between_out_in_and(layout, dequantize(m)));
  return m;
}
}  // namespace

void quantize_model(CausalLanguageModel& model, const QuantizationOptions& options) {
  check_options(options.bits, options.group);
  for (auto& [name, layer] : block_projections(model)) {
    QuantizedMatrix matrix = quantize_matrix(out_in_weight(*layer).detach(), options.bits, options.group);
    write_dequantized(layer->weight, matrix, layer->layout());
    layer->use_quantized_weight(std::make_shared<const QuantizedMatrix>(std::move(matrix)));
  }
  Tensor head = output_head(model);
  QuantizedMatrix matrix = quantize_matrix(head.detach(), options.bits, options.group);
  write_dequantized(head, matrix, WeightLayout::out_in);
  model.use_quantized_head(std::make_shared<const QuantizedMatrix>(std::move(matrix)));
}

StateDict quantized_state_dict(CausalLanguageModel& model) {
  StateDict state = model.state_dict();
  const auto replace = [&](const std::string& weight_name, const QuantizedMatrix* matrix) {
    EDDY_CHECK(matrix != nullptr, "quantized_state_dict: \"", weight_name, "\" is not quantised (call quantize_model)");
    state.erase(weight_name);
    state.emplace(weight_name + ".packed", matrix->packed);
    state.emplace(weight_name + ".scales", matrix->scales);
  };
  for (auto& [name, layer] : block_projections(model)) replace(name + ".weight", layer->quantized_weight());
  replace(model.output_head_name(), model.quantized_head());
  return state;
}

void load_quantized_state_dict(CausalLanguageModel& model, const StateDict& state, const QuantizationOptions& options) {
  check_options(options.bits, options.group);
  StateDict floats = state;
  std::vector<std::pair<Linear*, QuantizedMatrix>> matrices;
  for (auto& [name, layer] : block_projections(model)) {
    const int64_t rows = layer->weight.shape()[layer->layout() == WeightLayout::in_out ? 1 : 0];
    matrices.emplace_back(layer.get(), take_quantized(floats, name + ".weight", rows, layer->in_features(),
                                                      layer->layout(), options));
  }
  // Files written before the head was quantised hold it in float32, and it stays so.
  const std::string head_name = model.output_head_name();
  std::optional<QuantizedMatrix> head;
  if (floats.contains(head_name + ".packed")) {
    head = take_quantized(floats, head_name, model.vocab_size(), output_head(model).shape()[1], WeightLayout::out_in,
                          options);
  }
  model.load_state_dict(floats);
  for (auto& [layer, m] : matrices) layer->use_quantized_weight(std::make_shared<const QuantizedMatrix>(std::move(m)));
  if (head) model.use_quantized_head(std::make_shared<const QuantizedMatrix>(std::move(*head)));
}

}  // namespace eddy::nn
