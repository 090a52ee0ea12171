#include "solvers/pinn/taylor_mlp_pass.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#include <utility>

#include "eddy/core/error.h"
#include "eddy/core/gelu_constants.h"
#include "eddy/ops/ops.h"

// glibc's vector variants (libmvec) for the activations' `omp simd` loops, declared here as the
// compiler's generated kernels declare them (compiler/codegen.cpp): <cmath>'s declarations carry
// no `declare simd` without -ffast-math.
extern "C" {
#pragma omp declare simd notinbranch
float tanhf(float) noexcept;
#pragma omp declare simd notinbranch
double tanh(double) noexcept;
#pragma omp declare simd notinbranch
float sinf(float) noexcept;
#pragma omp declare simd notinbranch
double sin(double) noexcept;
#pragma omp declare simd notinbranch
float cosf(float) noexcept;
#pragma omp declare simd notinbranch
double cos(double) noexcept;
#pragma omp declare simd notinbranch
float expf(float) noexcept;
#pragma omp declare simd notinbranch
double exp(double) noexcept;
}

namespace eddy::pinn {
namespace {

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#else
constexpr int kVectorBytes = 32;
#endif

// Register tiles in GCC's vector extensions: a strip of the chunk's points is four vectors.
template <typename T>
struct Simd {
  typedef T Vector __attribute__((vector_size(kVectorBytes)));
  // A vector at any element's address, aliasing like the element type (as immintrin.h declares
  // __m512_u). Stores through it keep register tiles in registers; memcpy made GCC build each tile
  // on the stack and copy it out in halves.
  typedef T Unaligned __attribute__((vector_size(kVectorBytes), aligned(alignof(T)), may_alias));
  static constexpr int64_t lanes = kVectorBytes / static_cast<int64_t>(sizeof(T));
  static constexpr int kStripVectors = 4;
  static constexpr int64_t strip = kStripVectors * lanes;
};

template <typename V, typename T>
V load(const T* from) {
  return *reinterpret_cast<const typename Simd<T>::Unaligned*>(from);
}

template <typename T, typename V>
void store(T* to, const V& v) {
  *reinterpret_cast<typename Simd<T>::Unaligned*>(to) = v;
}

// The sum of a vector's lanes by halving: the low half plus the high half until one lane is
// left, the sequence of AVX-512's reductions, at any vector width.
template <typename T, size_t N>
T halving_sum(const T __attribute__((vector_size(N * sizeof(T)))) & v) {
  if constexpr (N == 1) {
    return v[0];
  } else {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return halving_sum<T, N / 2>(__builtin_shufflevector(v, v, I...) + __builtin_shufflevector(v, v, (I + N / 2)...));
    }(std::make_index_sequence<N / 2>{});
  }
}

template <typename T>
double lane_sum(const typename Simd<T>::Vector& v) {
  return halving_sum<T, static_cast<size_t>(Simd<T>::lanes)>(v);
}

// out[r][j] = bias[r] + sum_k a[r * lda + k] x[k][j] for R rows and every point j of the chunk.
template <typename T, int R>
void product_rows(const T* a, int64_t lda, int64_t K, const T* x, int64_t P, const T* bias, T* out) {
  using S = Simd<T>;
  using V = typename S::Vector;
  for (int64_t j = 0; j < P; j += S::strip) {
    V acc[R][S::kStripVectors];
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < S::kStripVectors; ++v) acc[r][v] = V{} + (bias ? bias[r] : T(0));
    }
    for (int64_t k = 0; k < K; ++k) {
      V row[S::kStripVectors];
      for (int v = 0; v < S::kStripVectors; ++v) row[v] = load<V>(x + k * P + j + v * S::lanes);
      for (int r = 0; r < R; ++r) {
        const T weight = a[r * lda + k];
        for (int v = 0; v < S::kStripVectors; ++v) acc[r][v] += weight * row[v];
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < S::kStripVectors; ++v) store(out + r * P + j + v * S::lanes, acc[r][v]);
    }
  }
}

// tile(first, size) for tiles that cover [0, n) in as few tiles of at most `widest` as can, and
// as even as can be (32 in tiles of at most 6: 6, 6, 5, 5, 5, 5), so no tile is much narrower than
// the others: a narrow tile's accumulators leave the core's multipliers idle.
template <typename F>
void even_tiles(int64_t n, int64_t widest, F&& tile) {
  const int64_t count = (n + widest - 1) / widest;
  int64_t first = 0;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t size = n / count + (t < n % count ? 1 : 0);
    tile(first, size);
    first += size;
  }
}

// f.template operator()<N>() for the tile size N = size, from 1 to Widest.
template <int Widest, int N = 1, typename F>
void with_size(int64_t size, F&& f) {
  if (size == N) return f.template operator()<N>();
  if constexpr (N < Widest) {
    with_size<Widest, N + 1>(size, f);
  } else {
    throw Error(cat("taylor_mlp_pass: no register tile of ", size, " rows"));
  }
}

// out [M][P] = a [M][K] (rows lda apart) @ x [K][P], plus bias[m] on row m when given, in tiles of
// at most 6 rows (6: 24 accumulators, 4 operand vectors and a broadcast, 29 of 32 registers).
template <typename T>
void product(const T* a, int64_t lda, int64_t M, int64_t K, const T* x, int64_t P, const T* bias, T* out) {
  even_tiles(M, 6, [&](int64_t m, int64_t rows) {
    with_size<6>(rows, [&]<int R>() {
      product_rows<T, R>(a + m * lda, lda, K, x, P, bias ? bias + m : nullptr, out + m * P);
    });
  });
}

// dw[k][m] += sum over streams s and points j of x_s[k][j] g_s[m][j], for KR rows from k0 and MR
// columns from m0 (rows ldw apart): each entry summed in vector lanes over the whole chunk, the
// lanes added once.
template <typename T, int KR, int MR>
void gradient_tile(const std::vector<const T*>& x, const std::vector<const T*>& g, int64_t P, int64_t k0, int64_t m0,
                   double* dw, int64_t ldw) {
  using S = Simd<T>;
  using V = typename S::Vector;
  V acc[KR][MR] = {};
  for (size_t s = 0; s < x.size(); ++s) {
    for (int64_t j = 0; j < P; j += S::lanes) {
      V xv[KR];
      for (int r = 0; r < KR; ++r) xv[r] = load<V>(x[s] + (k0 + r) * P + j);
      for (int c = 0; c < MR; ++c) {
        const V gv = load<V>(g[s] + (m0 + c) * P + j);
        for (int r = 0; r < KR; ++r) acc[r][c] += xv[r] * gv;
      }
    }
  }
  for (int r = 0; r < KR; ++r) {
    for (int c = 0; c < MR; ++c) dw[(k0 + r) * ldw + m0 + c] += lane_sum<T>(acc[r][c]);
  }
}

// dw [K][M] += sum_s x_s [K][P] @ g_s [M][P]^T: a layer's weight gradient from its input streams
// and its pre-activation streams' cotangents, in tiles of at most 5 x 5 accumulators: the 5
// vectors of x held and one of g loaded at a time (31 of AVX-512's 32 registers), 10 loads for 25
// multiply-adds.
template <typename T>
void weight_gradient(const std::vector<const T*>& x, const std::vector<const T*>& g, int64_t K, int64_t M, int64_t P,
                     double* dw) {
  even_tiles(K, 5, [&](int64_t k, int64_t rows) {
    even_tiles(M, 5, [&](int64_t m, int64_t columns) {
      with_size<5>(rows, [&]<int KR>() {
        with_size<5>(columns, [&]<int MR>() { gradient_tile<T, KR, MR>(x, g, P, k, m, dw, M); });
      });
    });
  });
}

// db[m] += sum_j g[m][j].
template <typename T>
void bias_gradient(const T* g, int64_t M, int64_t P, double* db) {
  using V = typename Simd<T>::Vector;
  for (int64_t m = 0; m < M; ++m) {
    V acc = {};
    for (int64_t j = 0; j < P; j += Simd<T>::lanes) acc += load<V>(g + m * P + j);
    db[m] += lane_sum<T>(acc);
  }
}

// A hidden layer's arrays that Taylor mode's rules through its activation read: the output value
// h, the pre-activation tangents z (firsts, then seconds), the activation's derivative s1 where
// it does not follow from h (all but tanh), and where the higher derivatives need the
// pre-activation itself, which h overwrites (GELU, SiLU), the second and third derivatives s2 and
// s3: what activate() stores.
template <typename T>
struct ActivationArrays {
  const T* h;
  std::vector<const T*> tangents;
  const T* s1 = nullptr;
  const T* s2 = nullptr;
  const T* s3 = nullptr;
};

// The activations' first, second and third derivatives at a vector of elements e, whose h (and
// for the higher ones s1) are given: tanh's from h alone (reading s1 cost more than 1 - h^2:
// float32 Burgers 9.1 -> 8.7 ms per step, float64 18.6 -> 17.0), sin's from h and s1.
struct TanhRules {
  template <typename T, typename V>
  static V first(const ActivationArrays<T>&, int64_t, const V& h) { return T(1) - h * h; }
  template <typename T, typename V>
  static V second(const ActivationArrays<T>&, int64_t, const V& h, const V& s1) { return T(-2) * h * s1; }
  template <typename T, typename V>
  static V third(const ActivationArrays<T>&, int64_t, const V& h, const V& s1) {
    return T(-2) * s1 * s1 + T(4) * h * h * s1;
  }
};
struct SineRules {  // h = sin z, s1 = cos z
  template <typename T, typename V>
  static V first(const ActivationArrays<T>& a, int64_t e, const V&) { return load<V>(a.s1 + e); }
  template <typename T, typename V>
  static V second(const ActivationArrays<T>&, int64_t, const V& h, const V&) { return -h; }
  template <typename T, typename V>
  static V third(const ActivationArrays<T>&, int64_t, const V&, const V& s1) { return -s1; }
};
// GELU's and SiLU's, as activate() stored them.
struct StoredRules {
  template <typename T, typename V>
  static V first(const ActivationArrays<T>& a, int64_t e, const V&) { return load<V>(a.s1 + e); }
  template <typename T, typename V>
  static V second(const ActivationArrays<T>& a, int64_t e, const V&, const V&) { return load<V>(a.s2 + e); }
  template <typename T, typename V>
  static V third(const ActivationArrays<T>& a, int64_t e, const V&, const V&) { return load<V>(a.s3 + e); }
};

// How many of the activation's derivatives activate() stores per hidden layer for the rules: none
// for tanh (they follow from its value), the first for sin, the first three for GELU and SiLU.
int stored_derivatives(nn::ActivationKind activation) {
  switch (activation) {
    case nn::ActivationKind::tanh: return 0;
    case nn::ActivationKind::sin: return 1;
    default: return 3;
  }
}

// Forward: h_i = s1 z_i and h_ii = s1 z_ii + s2 z_i^2, into the output streams from stream 1 on.
// One pass over the layer, a vector of elements at a time (n a multiple of the lanes).
template <typename Rules, typename T>
void rules_forward(int64_t n, const ActivationArrays<T>& a, const std::vector<int>& second,
                   const std::vector<T*>& out) {
  using V = typename Simd<T>::Vector;
  const size_t inputs = a.tangents.size() - second.size();
  for (int64_t e = 0; e < n; e += Simd<T>::lanes) {
    const V h = load<V>(a.h + e), s1 = Rules::template first<T>(a, e, h);
    const V s2 = Rules::template second<T>(a, e, h, s1);
    for (size_t i = 0; i < inputs; ++i) store(out[1 + i] + e, s1 * load<V>(a.tangents[i] + e));
    for (size_t k = 0; k < second.size(); ++k) {
      const V zi = load<V>(a.tangents[static_cast<size_t>(second[k])] + e);
      store(out[1 + inputs + k] + e, s1 * load<V>(a.tangents[inputs + k] + e) + s2 * zi * zi);
    }
  }
}

// Back: from the cotangents g of the output streams to gz of the pre-activation streams, the
// transposes of the forward rules, in one pass.
template <typename Rules, typename T>
void rules_backward(int64_t n, const ActivationArrays<T>& a, const std::vector<int>& second,
                    const std::vector<const T*>& g, const std::vector<T*>& gz) {
  using V = typename Simd<T>::Vector;
  const size_t inputs = a.tangents.size() - second.size();
  for (int64_t e = 0; e < n; e += Simd<T>::lanes) {
    const V h = load<V>(a.h + e), s1 = Rules::template first<T>(a, e, h);
    const V s2 = Rules::template second<T>(a, e, h, s1);
    V value = load<V>(g[0] + e) * s1;
    for (size_t i = 0; i < inputs; ++i) {
      const V gi = load<V>(g[1 + i] + e);
      value += gi * s2 * load<V>(a.tangents[i] + e);
      store(gz[1 + i] + e, gi * s1);
    }
    if (!second.empty()) {
      const V s3 = Rules::template third<T>(a, e, h, s1);
      for (size_t k = 0; k < second.size(); ++k) {
        const size_t i = static_cast<size_t>(second[k]);
        const V gii = load<V>(g[1 + inputs + k] + e);
        const V zi = load<V>(a.tangents[i] + e);
        value += gii * (s2 * load<V>(a.tangents[inputs + k] + e) + s3 * zi * zi);
        store(gz[1 + i] + e, load<V>(gz[1 + i] + e) + T(2) * gii * s2 * zi);
        store(gz[1 + inputs + k] + e, gii * s1);
      }
    }
    store(gz[0] + e, value);
  }
}

// h = activation(z) in place over n elements, and the derivatives the rules read (ActivationArrays):
// s1 for all but tanh, s2 and s3 for GELU and SiLU.
template <typename T>
void activate(nn::ActivationKind activation, int64_t n, T* __restrict h, T* __restrict s1, T* __restrict s2,
              T* __restrict s3) {
  constexpr bool single = std::is_same_v<T, float>;
  switch (activation) {
    case nn::ActivationKind::tanh:
      if constexpr (single) {
        // Eigen's float tanh (a clamped rational function, within 3.2 ulp of tanh, as the eager
        // tanh kernel computes it) costs a third of glibc's vector tanhf: 3.9 against 11.2 ns per
        // 16 elements here, and tanhf was 4.7% of a float32 Burgers step.
        // GCC 12 takes the _mm512_undefined_ps() inside AVX-512's min and max intrinsics for a
        // read of an uninitialised value (a false positive others report too, google/highway#710).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
        Eigen::Map<Eigen::ArrayXf> values(h, n);
        values = values.tanh();
#pragma GCC diagnostic pop
      } else {
#pragma omp simd
        for (int64_t e = 0; e < n; ++e) h[e] = ::tanh(h[e]);
      }
      break;
    case nn::ActivationKind::sin:
#pragma omp simd
      for (int64_t e = 0; e < n; ++e) {
        const T z = h[e];
        s1[e] = single ? ::cosf(static_cast<float>(z)) : ::cos(static_cast<double>(z));
        h[e] = single ? ::sinf(static_cast<float>(z)) : ::sin(static_cast<double>(z));
      }
      break;
    case nn::ActivationKind::gelu: {
      // The tanh form of the gelu primitive (ops/math_functions.def): h = z (1 + t) / 2 with
      // t = tanh(u), u = c (z + a z^3); its derivatives in u' = c (1 + 3 a z^2), u'' = 6 a c z and
      // u''' = 6 a c, with t' = q u' and q = 1 - t^2: h'' = q w, w = u' + z (u'' - 2 t u'^2) / 2.
      const T c = T(kGeluScale), a = T(kGeluCubic);
#pragma omp simd
      for (int64_t e = 0; e < n; ++e) {
        const T z = h[e];
        const T t = single ? ::tanhf(static_cast<float>(c * (z + a * z * z * z)))
                           : ::tanh(static_cast<double>(c * (z + a * z * z * z)));
        const T q = T(1) - t * t;
        const T du = c * (T(1) + T(3) * a * z * z), d2u = T(6) * a * c * z, d3u = T(6) * a * c;
        const T curvature = d2u - T(2) * t * du * du;
        const T w = du + T(0.5) * z * curvature;
        const T dw = d2u + T(0.5) * curvature + T(0.5) * z * (d3u - T(2) * q * du * du * du - T(4) * t * du * d2u);
        h[e] = T(0.5) * z * (T(1) + t);
        s1[e] = T(0.5) * (T(1) + t) + T(0.5) * z * q * du;
        s2[e] = q * w;
        s3[e] = q * (dw - T(2) * t * du * w);
      }
      break;
    }
    case nn::ActivationKind::silu:
      // h = z sigma(z): with p = sigma (1 - sigma), h' = sigma + z p, h'' = p (2 + z (1 - 2 sigma)),
      // h''' = p (3 (1 - 2 sigma) + z (1 - 6 sigma + 6 sigma^2)).
#pragma omp simd
      for (int64_t e = 0; e < n; ++e) {
        const T z = h[e];
        const T sigma = T(1) / (T(1) + (single ? ::expf(static_cast<float>(-z)) : ::exp(static_cast<double>(-z))));
        const T p = sigma * (T(1) - sigma), odd = T(1) - T(2) * sigma;
        h[e] = z * sigma;
        s1[e] = sigma + z * p;
        s2[e] = p * (T(2) + z * odd);
        s3[e] = p * (T(3) * odd + z * (T(1) - T(6) * sigma + T(6) * sigma * sigma));
      }
      break;
    default:
      throw Error(cat("taylor_mlp_pass: no Taylor rules for the ", nn::activation_name(activation), " activation"));
  }
}

// f(i) for i in [0, n), in one allocation.
template <typename P, typename F>
std::vector<P> pointers(int64_t n, F&& f) {
  std::vector<P> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(f(i));
  return out;
}

// The network's shape and the pass's sizes.
struct Layout {
  int64_t inputs = 0, outputs = 0, layers = 0;  // layers: hidden ones plus the output layer
  std::vector<int64_t> widths;                   // inputs, each hidden width, outputs
  std::vector<int> second;
  int stored_derivatives = 0;  // of the activation, per hidden layer: 0, 1 or 3
  int64_t streams() const { return 1 + inputs + static_cast<int64_t>(second.size()); }
  int64_t chunk = 0;  // points per chunk, a multiple of the strip
};

// One thread's buffers for a chunk, in one block that the thread keeps from call to call: the
// points' coordinates; the network's input streams; per hidden layer its output streams, its
// pre-activation tangents and the activation's derivatives that activate() stores; the network's
// output streams and their cotangents; and two sets of cotangent streams that layers alternate
// between going back.
// Every value is written before it is read, so the block is never cleared.
// The lists of pointers into it that the kernels take are the same for every chunk, so they are
// built here, once a call: made per chunk and layer, they were about 3,000 of the 12,854 mallocs
// of a float32 Burgers step.
template <typename T>
class Workspace {
 public:
  explicit Workspace(const Layout& layout) : layout_(layout), offsets_(offsets_of(layout)) {
    // On the widest vector boundary the build uses (EIGEN_MAX_ALIGN_BYTES: 64 with AVX-512), as
    // every array and row of the block starts a whole number of strips in, so no vector load or
    // store spans two cache lines. From a plain vector, 16 bytes past a page boundary when glibc
    // maps it, the float32 Burgers pass took 9.8 ms against 7.6 (bench/pinn_pass.cpp, one thread).
    // Builds without AVX (the sanitizer's) align to 16 bytes, which costs speed only: the kernels'
    // loads and stores take any address.
    static thread_local std::vector<T, Eigen::aligned_allocator<T>> block;
    const size_t size = static_cast<size_t>(offsets_.rows * layout.chunk);
    if (block.size() < size) block.resize(size);
    data_ = block.data();
    build_lists();
  }

  // Elements per point of the chunk, over all the buffers.
  static int64_t per_point(const Layout& layout) { return offsets_of(layout).rows; }

  T* coordinates() { return at(offsets_.coordinates); }
  T* input(int64_t stream) { return at(offsets_.inputs + stream * layout_.inputs); }
  // Hidden layer l's output stream, pre-activation tangent (firsts, then seconds) and the
  // activation's first, second and third derivatives at its pre-activation (null where the layout
  // does not keep them).
  T* output(int64_t l, int64_t stream) {
    return at(offsets_.layers[static_cast<size_t>(l)] + stream * layout_.widths[static_cast<size_t>(l + 1)]);
  }
  T* pre_tangent(int64_t l, int64_t tangent) { return output(l, layout_.streams() + tangent); }
  T* derivative(int64_t l) { return stored(l, 1); }
  T* second_derivative(int64_t l) { return stored(l, 2); }
  T* third_derivative(int64_t l) { return stored(l, 3); }
  T* network_output(int64_t stream) { return at(offsets_.outputs + stream * layout_.outputs); }
  T* network_cotangent(int64_t stream) { return network_output(layout_.streams() + stream); }
  T* cotangent(int set, int64_t stream) {
    return at(offsets_.cotangents + (set * layout_.streams() + stream) * offsets_.widest);
  }

  // Per stream: layer l's inputs (the network's input streams, or hidden layer l - 1's outputs),
  // hidden layer l's outputs, the network's output cotangents, and cotangent set 0 or 1.
  const std::vector<const T*>& layer_inputs(int64_t l) const { return layer_inputs_[static_cast<size_t>(l)]; }
  const std::vector<T*>& layer_outputs(int64_t l) const { return layer_outputs_[static_cast<size_t>(l)]; }
  const std::vector<const T*>& network_cotangents() const { return network_cotangents_; }
  const std::vector<T*>& cotangents(int set) const { return cotangents_[static_cast<size_t>(set)]; }
  const std::vector<const T*>& cotangents_to_read(int set) const {
    return cotangents_to_read_[static_cast<size_t>(set)];
  }
  // What the Taylor rules through hidden layer l's activation read.
  const ActivationArrays<T>& activation_arrays(int64_t l) const { return arrays_[static_cast<size_t>(l)]; }
  // The head's view of the chunk, with the chunk's first point and count left to the caller.
  HeadChunk& head_view() { return head_view_; }

 private:
  // Where each buffer starts, and their total, in rows of a chunk's points.
  struct Offsets {
    int64_t coordinates = 0, inputs = 0, outputs = 0, cotangents = 0, widest = 0, rows = 0;
    std::vector<int64_t> layers;
  };

  static Offsets offsets_of(const Layout& layout) {
    Offsets o;
    auto region = [&](int64_t arrays, int64_t width) {
      const int64_t offset = o.rows;
      o.rows += arrays * width;
      return offset;
    };
    const int64_t streams = layout.streams();
    o.coordinates = region(1, layout.inputs);
    o.inputs = region(streams, layout.inputs);
    for (int64_t l = 0; l + 1 < layout.layers; ++l) {
      const int64_t arrays = 2 * streams - 1 + layout.stored_derivatives;
      o.layers.push_back(region(arrays, layout.widths[static_cast<size_t>(l + 1)]));
    }
    o.outputs = region(2 * streams, layout.outputs);
    for (int64_t width : layout.widths) o.widest = std::max(o.widest, width);
    o.cotangents = region(2 * streams, o.widest);
    return o;
  }

  void build_lists() {
    const int64_t streams = layout_.streams();
    const int64_t tangents = layout_.inputs + static_cast<int64_t>(layout_.second.size());
    for (int64_t l = 0; l < layout_.layers; ++l) {
      layer_inputs_.push_back(pointers<const T*>(streams, [&](int64_t s) -> const T* {
        return l == 0 ? input(s) : output(l - 1, s);
      }));
    }
    for (int64_t l = 0; l + 1 < layout_.layers; ++l) {
      layer_outputs_.push_back(pointers<T*>(streams, [&](int64_t s) { return output(l, s); }));
      arrays_.push_back({output(l, 0), pointers<const T*>(tangents, [&](int64_t t) { return pre_tangent(l, t); }),
                         derivative(l), second_derivative(l), third_derivative(l)});
    }
    network_cotangents_ = pointers<const T*>(streams, [&](int64_t s) { return network_cotangent(s); });
    for (int set = 0; set < 2; ++set) {
      cotangents_.push_back(pointers<T*>(streams, [&](int64_t s) { return cotangent(set, s); }));
      cotangents_to_read_.emplace_back(cotangents_.back().begin(), cotangents_.back().end());
    }
    head_view_.capacity = layout_.chunk;
    for (int64_t i = 0; i < layout_.inputs; ++i) head_view_.coordinates.push_back(coordinates() + i * layout_.chunk);
    for (int64_t s = 0; s < streams; ++s) {
      for (int64_t c = 0; c < layout_.outputs; ++c) {
        head_view_.streams.push_back(network_output(s) + c * layout_.chunk);
        head_view_.cotangents.push_back(network_cotangent(s) + c * layout_.chunk);
      }
    }
  }

  T* at(int64_t rows) { return data_ + rows * layout_.chunk; }
  // Hidden layer l's stored derivative of order k, after its streams and tangents; null where the
  // layout does not keep it.
  T* stored(int64_t l, int k) {
    return k <= layout_.stored_derivatives ? output(l, 2 * layout_.streams() - 2 + k) : nullptr;
  }

  const Layout& layout_;
  const Offsets offsets_;
  T* data_ = nullptr;
  std::vector<std::vector<const T*>> layer_inputs_, cotangents_to_read_;
  std::vector<std::vector<T*>> layer_outputs_, cotangents_;
  std::vector<const T*> network_cotangents_;
  std::vector<ActivationArrays<T>> arrays_;
  HeadChunk head_view_;
};

// A group's sums: the loss and the gradients, in double.
struct Sums {
  double loss = 0;
  std::vector<std::vector<double>> weights, biases;
};

template <typename T>
class Pass {
 public:
  Pass(const nn::PlainMlp& mlp, const Layout& layout) : mlp_(mlp), layout_(layout) {
    for (int64_t l = 0; l < layout.layers; ++l) {
      const int64_t in = layout.widths[static_cast<size_t>(l)], out = layout.widths[static_cast<size_t>(l) + 1];
      const std::vector<T> w = mlp.weights[static_cast<size_t>(l)].template to_vector<T>();  // [in][out]
      std::vector<T> transposed(w.size());
      for (int64_t k = 0; k < in; ++k) {
        for (int64_t m = 0; m < out; ++m) transposed[static_cast<size_t>(m * in + k)] = w[static_cast<size_t>(k * out + m)];
      }
      weights_.push_back(w);
      transposed_.push_back(std::move(transposed));
      biases_.push_back(mlp.biases[static_cast<size_t>(l)].template to_vector<T>());
    }
    for (int64_t i = 0; i < layout.inputs; ++i) {
      scale_.push_back(static_cast<T>(mlp.input_scale[static_cast<size_t>(i)]));
      shift_.push_back(static_cast<T>(mlp.input_shift[static_cast<size_t>(i)]));
    }
  }

  Sums empty_sums() const {
    Sums sums;
    for (int64_t l = 0; l < layout_.layers; ++l) {
      sums.weights.emplace_back(weights_[static_cast<size_t>(l)].size(), 0.0);
      sums.biases.emplace_back(biases_[static_cast<size_t>(l)].size(), 0.0);
    }
    return sums;
  }

  // Points [first, first + count) of `points` [N, inputs], forward and back, into `sums`.
  void chunk(const T* points, int64_t first, int64_t count, const ChunkHead& head, Workspace<T>& work,
             Sums& sums) const {
    const int64_t P = layout_.chunk, D = layout_.inputs;
    // The input streams: normalised coordinates, the unit tangents scaled by the normalisation,
    // and zero second derivatives. Padding repeats the first point, so every value stays finite.
    for (int64_t i = 0; i < D; ++i) {
      const T scale = scale_[static_cast<size_t>(i)], shift = shift_[static_cast<size_t>(i)];
      T* raw = work.coordinates() + i * P;
      T* normalised = work.input(0) + i * P;
      for (int64_t j = 0; j < P; ++j) {
        raw[j] = points[(first + (j < count ? j : 0)) * D + i];
        normalised[j] = scale * raw[j] + shift;
      }
      for (int64_t d = 0; d < D; ++d) std::fill_n(work.input(1 + d) + i * P, P, i == d ? scale : T(0));
    }
    std::fill_n(work.input(1 + D), seconds() * D * P, T(0));
    forward(work);
    HeadChunk& view = work.head_view();
    view.first = first;
    view.count = count;
    sums.loss += head(view);
    backward(work, sums);
  }

 private:
  int64_t width(int64_t l) const { return layout_.widths[static_cast<size_t>(l)]; }
  int64_t seconds() const { return static_cast<int64_t>(layout_.second.size()); }

  void forward(Workspace<T>& work) const {
    const int64_t P = layout_.chunk, D = layout_.inputs;
    for (int64_t l = 0; l + 1 < layout_.layers; ++l) {
      const int64_t in = width(l), out = width(l + 1), n = out * P;
      const T* a = transposed_[static_cast<size_t>(l)].data();
      const std::vector<const T*>& x = work.layer_inputs(l);
      product(a, in, out, in, x[0], P, biases_[static_cast<size_t>(l)].data(), work.output(l, 0));
      for (int64_t t = 0; t < D + seconds(); ++t) {
        product(a, in, out, in, x[static_cast<size_t>(1 + t)], P, static_cast<const T*>(nullptr),
                work.pre_tangent(l, t));
      }
      activate(mlp_.activation, n, work.output(l, 0), work.derivative(l), work.second_derivative(l),
               work.third_derivative(l));
      with_rules([&]<typename Rules>() {
        rules_forward<Rules>(n, work.activation_arrays(l), layout_.second, work.layer_outputs(l));
      });
    }
    const int64_t last = layout_.layers - 1;
    const T* a = transposed_[static_cast<size_t>(last)].data();
    for (int64_t s = 0; s < layout_.streams(); ++s) {
      product(a, width(last), layout_.outputs, width(last), work.layer_inputs(last)[static_cast<size_t>(s)], P,
              s == 0 ? biases_[static_cast<size_t>(last)].data() : nullptr, work.network_output(s));
    }
  }

  // Layer l's weight and bias gradients from its input streams and the cotangents `g` of its
  // pre-activation streams (for the output layer, of its outputs).
  void add_gradients(const Workspace<T>& work, int64_t l, const std::vector<const T*>& g, Sums& sums) const {
    weight_gradient(work.layer_inputs(l), g, width(l), width(l + 1), layout_.chunk,
                    sums.weights[static_cast<size_t>(l)].data());
    bias_gradient(g[0], width(l + 1), layout_.chunk, sums.biases[static_cast<size_t>(l)].data());
  }

  // Cotangents of layer l's input streams: W [in][out] @ g_s [out][P].
  void cotangents_of_input(int64_t l, const std::vector<const T*>& g, Workspace<T>& work, int into) const {
    const int64_t in = width(l), out = width(l + 1);
    for (int64_t s = 0; s < layout_.streams(); ++s) {
      product(weights_[static_cast<size_t>(l)].data(), out, in, out, g[static_cast<size_t>(s)], layout_.chunk,
              static_cast<const T*>(nullptr), work.cotangent(into, s));
    }
  }

  void backward(Workspace<T>& work, Sums& sums) const {
    with_rules([&]<typename Rules>() { backward_with<Rules>(work, sums); });
  }

  // f.template operator()<Rules>() with the rules of the network's activation.
  template <typename F>
  void with_rules(F&& f) const {
    switch (mlp_.activation) {
      case nn::ActivationKind::tanh: return f.template operator()<TanhRules>();
      case nn::ActivationKind::sin: return f.template operator()<SineRules>();
      default: return f.template operator()<StoredRules>();
    }
  }

  template <typename Rules>
  void backward_with(Workspace<T>& work, Sums& sums) const {
    const int64_t last = layout_.layers - 1;
    const std::vector<const T*>& g = work.network_cotangents();
    add_gradients(work, last, g, sums);
    int into = 0;
    if (last > 0) cotangents_of_input(last, g, work, into);
    for (int64_t l = last - 1; l >= 0; --l) {
      // From the cotangents of hidden layer l's output streams (set `from`) to those of its
      // pre-activation streams (set `into`).
      const int from = into;
      into = 1 - into;
      rules_backward<Rules>(width(l + 1) * layout_.chunk, work.activation_arrays(l), layout_.second,
                            work.cotangents_to_read(from), work.cotangents(into));
      const std::vector<const T*>& gz = work.cotangents_to_read(into);
      add_gradients(work, l, gz, sums);
      if (l > 0) {
        // Written into the set `from` held, which nothing reads any more.
        cotangents_of_input(l, gz, work, from);
        into = from;
      }
    }
  }

  const nn::PlainMlp& mlp_;
  const Layout& layout_;
  std::vector<std::vector<T>> weights_, transposed_, biases_;  // weights [in][out], transposed [out][in]
  std::vector<T> scale_, shift_;
};

// Points per chunk: as many as keep one chunk's buffers within about 1 MB (half the L2 cache of
// a core here), in whole strips, from one strip to 256 points.
int64_t chunk_points(const Layout& layout, int64_t strip, int64_t bytes_per_point) {
  const int64_t points = (int64_t{1} << 20) / bytes_per_point / strip * strip;
  return std::clamp(points, strip, std::max(strip, 256 / strip * strip));
}

// Groups of chunks summed apart and then in order: their number depends on the point count
// only, so the sums do not depend on the thread count.
constexpr int64_t kGroups = 16;

template <typename T>
TaylorMlpResult run(const nn::PlainMlp& mlp, const Tensor& points, const Layout& layout, const ChunkHead& head) {
  const Pass<T> pass(mlp, layout);
  const Tensor dense = contiguous(points);
  const T* data = dense.data<T>();
  const int64_t N = points.size(0);
  const int64_t chunks = (N + layout.chunk - 1) / layout.chunk;
  const int64_t groups = std::min(kGroups, std::max<int64_t>(chunks, 1));
  std::vector<Sums> sums(static_cast<size_t>(groups), pass.empty_sums());
#pragma omp parallel if (groups > 1 && omp_get_max_threads() > 1)
  {
    Workspace<T> work(layout);
#pragma omp for schedule(dynamic, 1)
    for (int64_t group = 0; group < groups; ++group) {
      for (int64_t c = chunks * group / groups; c < chunks * (group + 1) / groups; ++c) {
        const int64_t first = c * layout.chunk;
        pass.chunk(data, first, std::min(layout.chunk, N - first), head, work, sums[static_cast<size_t>(group)]);
      }
    }
  }
  // The groups in order.
  auto total = [&](std::vector<std::vector<double>> Sums::*member, size_t l) {
    std::vector<double> entries((sums[0].*member)[l].size(), 0.0);
    for (const Sums& part : sums) {
      for (size_t e = 0; e < entries.size(); ++e) entries[e] += (part.*member)[l][e];
    }
    return entries;
  };
  TaylorMlpResult result;
  for (const Sums& part : sums) result.loss += part.loss;
  for (size_t l = 0; l < mlp.weights.size(); ++l) {
    result.weights.push_back(cast(tensor(total(&Sums::weights, l), mlp.weights[l].shape()), points.dtype()));
    result.biases.push_back(cast(tensor(total(&Sums::biases, l), mlp.biases[l].shape()), points.dtype()));
  }
  return result;
}

// The network's sizes from its weights, checked, and the chunk the pass takes for them.
Layout layout_of(const nn::PlainMlp& mlp, const std::vector<int>& second) {
  EDDY_CHECK(taylor_mlp_supports(mlp.activation), "taylor_mlp_pass: no Taylor rules for the ",
             nn::activation_name(mlp.activation), " activation (tanh, sin, gelu and silu have them)");
  EDDY_CHECK(!mlp.weights.empty() && mlp.weights.size() == mlp.biases.size(), "taylor_mlp_pass: ", mlp.weights.size(),
             " weights and ", mlp.biases.size(), " biases");
  const DType dtype = mlp.weights[0].dtype();
  EDDY_CHECK(dtype == DType::f32 || dtype == DType::f64, "taylor_mlp_pass: the weights are ", dtype,
             ", not float32 or float64");
  Layout layout;
  layout.inputs = mlp.weights[0].dim() == 2 ? mlp.weights[0].size(0) : 0;
  layout.layers = static_cast<int64_t>(mlp.weights.size());
  layout.widths.push_back(layout.inputs);
  for (size_t l = 0; l < mlp.weights.size(); ++l) {
    const Tensor& w = mlp.weights[l];
    const Tensor& b = mlp.biases[l];
    EDDY_CHECK(w.dim() == 2 && w.size(0) == layout.widths.back() && w.dtype() == dtype && b.defined() &&
                   b.shape() == Shape{w.size(1)} && b.dtype() == dtype,
               "taylor_mlp_pass: layer ", l, " has a weight of shape ", w.shape(), " and a bias of shape ",
               b.defined() ? cat(b.shape()) : std::string("none"), " after ", layout.widths.back(), " features");
    layout.widths.push_back(w.size(1));
  }
  layout.outputs = layout.widths.back();
  EDDY_CHECK(static_cast<int64_t>(mlp.input_scale.size()) == layout.inputs &&
                 mlp.input_shift.size() == mlp.input_scale.size(),
             "taylor_mlp_pass: input normalisation for ", mlp.input_scale.size(), " inputs, the network has ",
             layout.inputs);
  for (int i : second) {
    EDDY_CHECK(i >= 0 && i < layout.inputs, "taylor_mlp_pass: second derivative in input ", i, " of ",
               layout.inputs);
  }
  layout.second = second;
  layout.stored_derivatives = stored_derivatives(mlp.activation);
  layout.chunk = dtype == DType::f32 ? chunk_points(layout, Simd<float>::strip,
                                                    Workspace<float>::per_point(layout) * int64_t{sizeof(float)})
                                     : chunk_points(layout, Simd<double>::strip,
                                                    Workspace<double>::per_point(layout) * int64_t{sizeof(double)});
  return layout;
}

}  // namespace

bool taylor_mlp_supports(nn::ActivationKind activation) {
  return activation == nn::ActivationKind::tanh || activation == nn::ActivationKind::sin ||
         activation == nn::ActivationKind::gelu || activation == nn::ActivationKind::silu;
}

int64_t taylor_mlp_streams(const nn::PlainMlp& mlp, const std::vector<int>& second) {
  return layout_of(mlp, second).streams();
}

int64_t taylor_mlp_chunk(const nn::PlainMlp& mlp, const std::vector<int>& second) {
  return layout_of(mlp, second).chunk;
}

TaylorMlpResult taylor_mlp_pass(const nn::PlainMlp& mlp, const Tensor& points, const std::vector<int>& second,
                                const ChunkHead& head) {
  const Layout layout = layout_of(mlp, second);
  EDDY_CHECK(points.dim() == 2 && points.size(1) == layout.inputs && points.dtype() == mlp.weights[0].dtype() &&
                 points.device() == cpu(),
             "taylor_mlp_pass: points must be [N, ", layout.inputs, "] ", mlp.weights[0].dtype(),
             " on the CPU, got ", points.shape(), " ", points.dtype(), " on ", points.device());
  return points.dtype() == DType::f32 ? run<float>(mlp, points, layout, head) : run<double>(mlp, points, layout, head);
}

}  // namespace eddy::pinn
