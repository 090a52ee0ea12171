// The CUDA kernels of the eager backend, written once as templates over element types and
// functors; cuda_backend.cpp has NVRTC compile each instantiation it needs (named by a name
// expression such as "eddy::unary<float, float, eddy::Exp>") when first used.
//
// Each functor spells the operation as the CPU backend computes it (backends/cpu/), so that
// results agree: the same NaN choices in maximum/minimum, 0 for an integer division by zero, the
// real part for a complex-to-real cast. NVRTC has no std::complex, hence the small Complex below.

#include "eddy/backends/cuda/kernel_source.h"

namespace eddy::cuda {

const char* const kKernelSource = R"cuda(
namespace eddy {

typedef long long i64;

template <typename T> struct Complex {
  T re, im;
  __device__ Complex() : re(0), im(0) {}
  __device__ Complex(T r) : re(r), im(0) {}
  __device__ Complex(T r, T i) : re(r), im(i) {}
};
typedef Complex<float> c64;
typedef Complex<double> c128;

template <typename T> __device__ Complex<T> operator+(Complex<T> a, Complex<T> b) { return Complex<T>(a.re + b.re, a.im + b.im); }
template <typename T> __device__ Complex<T> operator-(Complex<T> a, Complex<T> b) { return Complex<T>(a.re - b.re, a.im - b.im); }
template <typename T> __device__ Complex<T> operator-(Complex<T> a) { return Complex<T>(-a.re, -a.im); }
template <typename T> __device__ Complex<T> operator*(Complex<T> a, Complex<T> b) {
  return Complex<T>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
// Smith's algorithm, which avoids the overflow of the textbook formula for large operands.
template <typename T> __device__ Complex<T> operator/(Complex<T> a, Complex<T> b) {
  if (fabs(b.re) >= fabs(b.im)) {
    const T r = b.im / b.re, d = b.re + b.im * r;
    return Complex<T>((a.re + a.im * r) / d, (a.im - a.re * r) / d);
  }
  const T r = b.re / b.im, d = b.re * r + b.im;
  return Complex<T>((a.re * r + a.im) / d, (a.im * r - a.re) / d);
}
template <typename T> __device__ bool operator==(Complex<T> a, Complex<T> b) { return a.re == b.re && a.im == b.im; }
template <typename T> __device__ bool operator!=(Complex<T> a, Complex<T> b) { return !(a == b); }

template <typename T> __device__ T abs_of(Complex<T> z) { return hypot(z.re, z.im); }
template <typename T> __device__ T arg_of(Complex<T> z) { return atan2(z.im, z.re); }
template <typename T> __device__ Complex<T> exp_of(Complex<T> z) {
  const T m = exp(z.re);
  return Complex<T>(m * cos(z.im), m * sin(z.im));
}
template <typename T> __device__ Complex<T> log_of(Complex<T> z) { return Complex<T>(log(abs_of(z)), arg_of(z)); }
template <typename T> __device__ Complex<T> sin_of(Complex<T> z) {
  return Complex<T>(sin(z.re) * cosh(z.im), cos(z.re) * sinh(z.im));
}
template <typename T> __device__ Complex<T> cos_of(Complex<T> z) {
  return Complex<T>(cos(z.re) * cosh(z.im), -sin(z.re) * sinh(z.im));
}
// tanh(x + iy) = (sinh 2x + i sin 2y) / (cosh 2x + cos 2y), with its limit +-1 for large |x|.
template <typename T> __device__ Complex<T> tanh_of(Complex<T> z) {
  if (fabs(z.re) > T(20)) return Complex<T>(z.re > 0 ? T(1) : T(-1), T(0));
  const T d = cosh(2 * z.re) + cos(2 * z.im);
  return Complex<T>(sinh(2 * z.re) / d, sin(2 * z.im) / d);
}
// The principal root, as std::sqrt: the real part is non-negative, the imaginary part has y's sign.
template <typename T> __device__ Complex<T> sqrt_of(Complex<T> z) {
  if (z.re == 0 && z.im == 0) return Complex<T>(0, z.im);
  const T t = sqrt((fabs(z.re) + abs_of(z)) / 2);
  if (z.re >= 0) return Complex<T>(t, z.im / (2 * t));
  return Complex<T>(fabs(z.im) / (2 * t), z.im < 0 ? -t : t);
}
// As the CPU's complex_power (backends/cpu/elementwise.cpp): repeated squaring for an integer y
// below 100 in size.
template <typename T> __device__ Complex<T> pow_of(Complex<T> x, Complex<T> y) {
  if (y.re == 0 && y.im == 0) return Complex<T>(1, 0);
  if (y.im == 0 && fabs(y.re) < 100 && y.re == trunc(y.re)) {
    Complex<T> result(1, 0), base = x;
    for (int n = static_cast<int>(fabs(y.re)); n > 0; n >>= 1) {
      if (n & 1) result = result * base;
      base = base * base;
    }
    return y.re < 0 ? Complex<T>(1, 0) / result : result;
  }
  if (x.re == 0 && x.im == 0) return Complex<T>(0, 0);
  return exp_of(y * log_of(x));
}

__device__ float exp_of(float x) { return expf(x); }
__device__ double exp_of(double x) { return exp(x); }
__device__ float log_of(float x) { return logf(x); }
__device__ double log_of(double x) { return log(x); }
__device__ float sin_of(float x) { return sinf(x); }
__device__ double sin_of(double x) { return sin(x); }
__device__ float cos_of(float x) { return cosf(x); }
__device__ double cos_of(double x) { return cos(x); }
__device__ float tanh_of(float x) { return tanhf(x); }
__device__ double tanh_of(double x) { return tanh(x); }
__device__ float sqrt_of(float x) { return sqrtf(x); }
__device__ double sqrt_of(double x) { return sqrt(x); }
__device__ float pow_of(float x, float y) { return powf(x, y); }
__device__ double pow_of(double x, double y) { return pow(x, y); }

// Conversions as the CPU backend's convert<To>(from): a complex value to a real type keeps its
// real part; a real value to a complex type has no imaginary part.
template <typename To> struct Convert {
  template <typename From> __device__ static To from(From v) { return static_cast<To>(v); }
  template <typename P> __device__ static To from(Complex<P> v) { return static_cast<To>(v.re); }
};
template <typename T> struct Convert<Complex<T> > {
  template <typename From> __device__ static Complex<T> from(From v) { return Complex<T>(static_cast<T>(v)); }
  template <typename P> __device__ static Complex<T> from(Complex<P> v) {
    return Complex<T>(static_cast<T>(v.re), static_cast<T>(v.im));
  }
};

// ---- unary functors ----
struct Identity { template <typename T> __device__ T operator()(T x) const { return x; } };
struct Neg { template <typename T> __device__ T operator()(T x) const { return T(-x); } };
struct Exp { template <typename T> __device__ T operator()(T x) const { return exp_of(x); } };
struct Log { template <typename T> __device__ T operator()(T x) const { return log_of(x); } };
struct Sin { template <typename T> __device__ T operator()(T x) const { return sin_of(x); } };
struct Cos { template <typename T> __device__ T operator()(T x) const { return cos_of(x); } };
struct Tanh { template <typename T> __device__ T operator()(T x) const { return tanh_of(x); } };
// GELU's tanh approximation, in the CPU kernel's order of operations, with core/gelu_constants.h's c and a.
struct Gelu {
  template <typename T> __device__ T operator()(T x) const {
    return T(0.5) * x * (T(1) + tanh_of(T(0.7978845608028654) * (x + T(0.044715) * (x * x * x))));
  }
};
struct Sqrt { template <typename T> __device__ T operator()(T x) const { return sqrt_of(x); } };
struct Abs {
  template <typename T> __device__ T operator()(T x) const { return x <= T(0) ? T(T(0) - x) : x; }
  template <typename T> __device__ T operator()(Complex<T> z) const { return abs_of(z); }
};
struct Sign {
  template <typename T> __device__ T operator()(T x) const {
    return x != x ? x : static_cast<T>((T(0) < x) - (x < T(0)));
  }
};
struct Real { template <typename T> __device__ T operator()(Complex<T> z) const { return z.re; } };
struct Imag { template <typename T> __device__ T operator()(Complex<T> z) const { return z.im; } };
struct Angle { template <typename T> __device__ T operator()(Complex<T> z) const { return arg_of(z); } };
struct Conj { template <typename T> __device__ Complex<T> operator()(Complex<T> z) const { return Complex<T>(z.re, -z.im); } };

// ---- binary functors ----
struct Add { template <typename T> __device__ T operator()(T x, T y) const { return T(x + y); } };
struct Sub { template <typename T> __device__ T operator()(T x, T y) const { return T(x - y); } };
struct Mul { template <typename T> __device__ T operator()(T x, T y) const { return T(x * y); } };
struct Div { template <typename T> __device__ T operator()(T x, T y) const { return T(x / y); } };
// Integer division by zero gives 0, as on the CPU (where it would be undefined behaviour).
struct IntDiv { template <typename T> __device__ T operator()(T x, T y) const { return y == T(0) ? T(0) : T(x / y); } };
struct Pow { template <typename T> __device__ T operator()(T x, T y) const { return pow_of(x, y); } };
struct Maximum { template <typename T> __device__ T operator()(T x, T y) const { return x > y || x != x ? x : y; } };
struct Minimum { template <typename T> __device__ T operator()(T x, T y) const { return x < y || x != x ? x : y; } };
struct Eq { template <typename T> __device__ bool operator()(T x, T y) const { return x == y; } };
struct Ne { template <typename T> __device__ bool operator()(T x, T y) const { return x != y; } };
struct Lt { template <typename T> __device__ bool operator()(T x, T y) const { return x < y; } };
struct Le { template <typename T> __device__ bool operator()(T x, T y) const { return x <= y; } };
struct Gt { template <typename T> __device__ bool operator()(T x, T y) const { return x > y; } };
struct Ge { template <typename T> __device__ bool operator()(T x, T y) const { return x >= y; } };
struct MakeComplex { template <typename T> __device__ Complex<T> operator()(T x, T y) const { return Complex<T>(x, y); } };

// Element offsets of N operands over one index space of up to 8 axes (after merging axes that
// are contiguous in every operand, cuda_backend.cpp).
template <int N> struct Layout {
  i64 shape[8];
  i64 strides[N][8];
  int rank;
};

template <int N> __device__ void offsets_of(const Layout<N>& layout, i64 i, i64 (&offset)[N]) {
  if (layout.rank == 1) {  // dense or evenly strided operands: no divisions
    for (int k = 0; k < N; ++k) offset[k] = i * layout.strides[k][0];
    return;
  }
  for (int k = 0; k < N; ++k) offset[k] = 0;
  for (int d = layout.rank - 1; d >= 0; --d) {
    const i64 extent = layout.shape[d];
    const i64 coordinate = i % extent;
    i /= extent;
    for (int k = 0; k < N; ++k) offset[k] += coordinate * layout.strides[k][d];
  }
}

#define EDDY_FOR_EACH_ELEMENT(i, n) \
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)

template <typename In, typename Out, typename Op>
__global__ void unary(const In* in, Out* out, Layout<2> layout, i64 n) {
  EDDY_FOR_EACH_ELEMENT(i, n) {
    i64 offset[2];
    offsets_of(layout, i, offset);
    out[offset[0]] = Convert<Out>::from(Op()(in[offset[1]]));
  }
}

template <typename In, typename Out, typename Op>
__global__ void binary(const In* a, const In* b, Out* out, Layout<3> layout, i64 n) {
  EDDY_FOR_EACH_ELEMENT(i, n) {
    i64 offset[3];
    offsets_of(layout, i, offset);
    out[offset[0]] = Op()(a[offset[1]], b[offset[2]]);
  }
}

template <typename T>
__global__ void select(const bool* condition, const T* a, const T* b, T* out, Layout<4> layout, i64 n) {
  EDDY_FOR_EACH_ELEMENT(i, n) {
    i64 offset[4];
    offsets_of(layout, i, offset);
    out[offset[0]] = condition[offset[1]] ? a[offset[2]] : b[offset[3]];
  }
}

template <typename T>
__global__ void fill(T* out, T value, Layout<1> layout, i64 n) {
  EDDY_FOR_EACH_ELEMENT(i, n) {
    i64 offset[1];
    offsets_of(layout, i, offset);
    out[offset[0]] = value;
  }
}

template <typename T>
__global__ void arange(T* out, double start, double step, i64 n) {
  EDDY_FOR_EACH_ELEMENT(i, n) { out[i] = static_cast<T>(start + static_cast<double>(i) * step); }
}

// ---- reductions: blocks of threads striding over one output's reduced elements ----
// Sum and prod start from their identity; max and min from the first element, as the CPU does
// (an empty max is 0 there, which is also what `identity` gives for them).
struct Sum {
  static const bool from_first = false;
  template <typename T> __device__ static T identity() { return T(0); }
  template <typename T> __device__ static T combine(T x, T y) { return x + y; }
};
struct Prod {
  static const bool from_first = false;
  template <typename T> __device__ static T identity() { return T(1); }
  template <typename T> __device__ static T combine(T x, T y) { return x * y; }
};
struct Max {
  static const bool from_first = true;
  template <typename T> __device__ static T identity() { return T(0); }
  template <typename T> __device__ static T combine(T x, T y) { return x > y ? x : y; }
};
struct Min {
  static const bool from_first = true;
  template <typename T> __device__ static T identity() { return T(0); }
  template <typename T> __device__ static T combine(T x, T y) { return x < y ? x : y; }
};

// Axes 0 .. kept-1 of `layout` index the outputs, the rest the reduced elements of one output.
// An output's reduced elements are cut into `chunks` runs of `chunk_length`, one block each, so
// that a few large sums still fill the GPU; block b writes partial[b] (output b / chunks), and a
// second launch combines the partials when chunks > 1.
struct ReduceLayout {
  i64 shape[8];
  i64 strides[8];
  int kept, rank;
  i64 outputs, count, chunks, chunk_length;
};

template <typename T, typename Op>
__global__ void reduce(const T* in, T* out, ReduceLayout layout) {
  extern __shared__ char shared_bytes[];
  T* partial = reinterpret_cast<T*>(shared_bytes);
  const bool one_reduced_axis = layout.rank - layout.kept == 1;
  for (i64 b = blockIdx.x; b < layout.outputs * layout.chunks; b += gridDim.x) {
    const i64 o = b / layout.chunks, first = (b % layout.chunks) * layout.chunk_length;
    const i64 end = min(layout.count, first + layout.chunk_length);
    i64 base = 0, rest = o;
    for (int d = layout.kept - 1; d >= 0; --d) {
      base += (rest % layout.shape[d]) * layout.strides[d];
      rest /= layout.shape[d];
    }
    T acc = Op::template identity<T>();
    if (Op::from_first && layout.count > 0) acc = in[base];
    for (i64 r = first + threadIdx.x; r < end; r += blockDim.x) {
      i64 offset = base;
      if (one_reduced_axis) {
        offset += r * layout.strides[layout.rank - 1];
      } else {
        for (i64 q = r, d = layout.rank - 1; d >= layout.kept; --d) {
          offset += (q % layout.shape[d]) * layout.strides[d];
          q /= layout.shape[d];
        }
      }
      acc = Op::combine(acc, in[offset]);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) partial[threadIdx.x] = Op::combine(partial[threadIdx.x], partial[threadIdx.x + width]);
      __syncthreads();
    }
    if (threadIdx.x == 0) out[b] = partial[0];
    __syncthreads();
  }
}

// ---- indexing: dense operands; the first bad index met sets bad[0] and is kept in bad[1] ----
template <typename I> __device__ bool checked_index(const I* index, i64 k, i64 bound, i64* bad, i64& value) {
  value = static_cast<i64>(index[k]);
  if (value < 0) value += bound;
  if (value >= 0 && value < bound) return true;
  if (atomicCAS(reinterpret_cast<unsigned long long*>(bad), 0ull, 1ull) == 0ull) bad[1] = static_cast<i64>(index[k]);
  return false;
}

// The index tensor's shape (rank axes) and the indexed tensor's dense strides.
struct IndexLayout {
  i64 shape[8];
  i64 target_strides[8];
  int rank, axis;
  i64 bound, n;
};

__device__ i64 target_offset(const IndexLayout& layout, i64 flat, i64 index_value) {
  i64 offset = 0;
  for (int d = layout.rank - 1; d >= 0; --d) {
    const i64 coordinate = flat % layout.shape[d];
    flat /= layout.shape[d];
    offset += (d == layout.axis ? index_value : coordinate) * layout.target_strides[d];
  }
  return offset;
}

template <typename T, typename I>
__global__ void gather(const T* in, const I* index, T* out, IndexLayout layout, i64* bad) {
  EDDY_FOR_EACH_ELEMENT(i, layout.n) {
    i64 value;
    if (checked_index(index, i, layout.bound, bad, value)) out[i] = in[target_offset(layout, i, value)];
  }
}

template <typename T, typename I>
__global__ void index_select(const T* in, const I* index, T* out, i64 outer, i64 size, i64 count, i64 inner, i64* bad) {
  EDDY_FOR_EACH_ELEMENT(i, outer * count * inner) {
    const i64 j = i % inner, k = (i / inner) % count, o = i / (inner * count);
    i64 value;
    if (checked_index(index, k, size, bad, value)) out[i] = in[(o * size + value) * inner + j];
  }
}

__device__ void add_atomically(float* to, float v) { atomicAdd(to, v); }
__device__ void add_atomically(double* to, double v) { atomicAdd(to, v); }
__device__ void add_atomically(int* to, int v) { atomicAdd(to, v); }
// Two's complement: an unsigned add is a signed one.
__device__ void add_atomically(i64* to, i64 v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(to), static_cast<unsigned long long>(v));
}
template <typename T> __device__ void add_atomically(Complex<T>* to, Complex<T> v) {
  add_atomically(&to->re, v.re);
  add_atomically(&to->im, v.im);
}

// Indices checked before anything is written: a bad one leaves scatter_add's target untouched.
template <typename I>
__global__ void check_indices(const I* index, i64 n, i64 bound, i64* bad) {
  EDDY_FOR_EACH_ELEMENT(i, n) {
    i64 value;
    checked_index(index, i, bound, bad, value);
  }
}

template <typename T, typename I>
__global__ void scatter_add(T* out, const I* index, const T* src, IndexLayout layout, i64* bad) {
  EDDY_FOR_EACH_ELEMENT(i, layout.n) {
    i64 value;
    if (checked_index(index, i, layout.bound, bad, value)) add_atomically(out + target_offset(layout, i, value), src[i]);
  }
}

// ---- counter-based random numbers: the CPU's Philox-4x32-10 (core/rng.h), word for word ----
__device__ void philox4x32(unsigned long long counter, unsigned long long key, unsigned (&c)[4]) {
  c[0] = static_cast<unsigned>(counter);
  c[1] = static_cast<unsigned>(counter >> 32);
  c[2] = 0;
  c[3] = 0;
  unsigned k0 = static_cast<unsigned>(key), k1 = static_cast<unsigned>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const unsigned long long p0 = 0xD2511F53ull * c[0], p1 = 0xCD9E8D57ull * c[2];
    const unsigned n0 = static_cast<unsigned>(p1 >> 32) ^ c[1] ^ k0;
    const unsigned n1 = static_cast<unsigned>(p1);
    const unsigned n2 = static_cast<unsigned>(p0 >> 32) ^ c[3] ^ k1;
    const unsigned n3 = static_cast<unsigned>(p0);
    c[0] = n0; c[1] = n1; c[2] = n2; c[3] = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

__device__ float uniform_from(const unsigned (&w)[4], int pair, float) {
  return static_cast<float>((w[pair] >> 8) * (1.0 / 16777216.0));
}
__device__ double uniform_from(const unsigned (&w)[4], int pair, double) {
  const unsigned long long bits = ((static_cast<unsigned long long>(w[2 * pair]) << 32) | w[2 * pair + 1]) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

template <typename T>
__global__ void random_uniform(T* out, unsigned long long seed, unsigned long long offset, i64 n) {
  EDDY_FOR_EACH_ELEMENT(i, n) {
    unsigned w[4];
    philox4x32(offset + i, seed, w);
    out[i] = uniform_from(w, 0, T());
  }
}

// Box-Muller on two uniforms from one counter, as the CPU draws them.
template <typename T>
__global__ void random_normal(T* out, unsigned long long seed, unsigned long long offset, i64 n) {
  EDDY_FOR_EACH_ELEMENT(i, n) {
    unsigned w[4];
    philox4x32(offset + i, seed, w);
    const T u1 = T(1) - uniform_from(w, 0, T()), u2 = uniform_from(w, 1, T());
    out[i] = static_cast<T>(sqrt_of(T(-2) * log_of(u1)) * cos_of(T(2) * T(3.14159265358979323846) * u2));
  }
}

}  // namespace eddy
)cuda";

}  // namespace eddy::cuda
