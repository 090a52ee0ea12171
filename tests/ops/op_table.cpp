#include "op_table.h"

#include <cmath>

#include "eddy/compiler/compile.h"
#include "eddy/dist/collectives.h"
#include "eddy/dist/distributed_fft.h"
#include "eddy/fft/fft.h"
#include "eddy/nn/attention.h"
#include "eddy/nn/normalize.h"

namespace eddy::testing {
namespace {

using c = std::complex<double>;
using Args = std::vector<c>;
const std::vector<DType> kReal = {DType::f32, DType::f64};
const std::vector<DType> kInexact = {DType::f32, DType::f64, DType::c64, DType::c128};
const std::vector<DType> kDouble = {DType::f64};

// Uniform in [lo, hi) (both parts for complex dtypes).
Tensor uniform(const Shape& shape, DType dtype, double lo, double hi, Generator& gen) {
  DType real_type = real_dtype(dtype);
  auto draw = [&] { return lo + (hi - lo) * rand(shape, real_type, &gen); };
  if (is_complex(dtype)) return complex(draw(), draw());
  return cast(draw(), dtype);
}

// Magnitudes in [0.5, 1.5) with random signs: keeps kinks (abs, sign, relu) out of reach of
// the finite differences.
Tensor away_from_zero(const Shape& shape, DType dtype, Generator& gen) {
  Tensor magnitude = uniform(shape, dtype, 0.5, 1.5, gen);
  Tensor signs = where(lt(rand(shape, DType::f64, &gen), scalar(0.5, DType::f64)),
                       scalar(-1.0, dtype), scalar(1.0, dtype));
  return magnitude * signs;
}

// Distinct values (a shuffled arange), so max/min/maximum have no ties.
Tensor distinct(const Shape& shape, DType dtype, Generator& gen, double offset = 0) {
  Tensor keys = rand({numel(shape)}, DType::f64, &gen);
  // Rank of each key = its position in sorted order; spacing 0.37 keeps values apart.
  auto k = keys.to_vector<double>();
  std::vector<double> values(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    int rank = 0;
    for (double other : k) rank += other < k[i];
    values[i] = offset + 0.37 * rank - 0.1 * static_cast<double>(k.size());
  }
  return cast(tensor(values, shape), dtype);
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using Make = std::function<std::vector<Tensor>(DType, Generator&)>;

Make normal_inputs(std::vector<Shape> shapes, double lo = -1.5, double hi = 1.5) {
  return [=](DType dtype, Generator& gen) {
    std::vector<Tensor> inputs;
    for (const Shape& shape : shapes) inputs.push_back(uniform(shape, dtype, lo, hi, gen));
    return inputs;
  };
}

OpCase unary(std::string name, std::vector<std::string> prims, std::vector<DType> dtypes,
             Tensor (*op)(const Tensor&), c (*ref)(c), Make make = normal_inputs({{3, 4}})) {
  OpCase row;
  row.name = std::move(name);
  row.primitives = std::move(prims);
  row.dtypes = std::move(dtypes);
  row.make_inputs = std::move(make);
  row.fn = [op](const std::vector<Tensor>& x) { return op(x[0]); };
  if (ref) row.reference = [ref](const Args& a) { return ref(a[0]); };
  return row;
}

OpCase binary(std::string name, std::vector<std::string> prims, std::vector<DType> dtypes,
              Tensor (*op)(const Tensor&, const Tensor&), c (*ref)(c, c),
              Make make = normal_inputs({{3, 4}, {4}})) {
  OpCase row;
  row.name = std::move(name);
  row.primitives = std::move(prims);
  row.dtypes = std::move(dtypes);
  row.make_inputs = std::move(make);
  row.fn = [op](const std::vector<Tensor>& x) { return op(x[0], x[1]); };
  if (ref) row.reference = [ref](const Args& a) { return ref(a[0], a[1]); };
  return row;
}

OpCase row(std::string name, std::vector<std::string> prims, std::vector<DType> dtypes, Make make,
           Fn fn, bool linear = false) {
  OpCase r;
  r.name = std::move(name);
  r.primitives = std::move(prims);
  r.dtypes = std::move(dtypes);
  r.make_inputs = std::move(make);
  r.fn = std::move(fn);
  r.linear = linear;
  return r;
}

OpCase linear(OpCase r) {
  r.linear = true;
  return r;
}

OpCase comparison(std::string name, Tensor (*op)(const Tensor&, const Tensor&), bool (*ref)(double, double)) {
  OpCase r = binary(name, {name}, kReal, op, nullptr,
                    [](DType dtype, Generator& gen) {
                      Tensor a = distinct({3, 4}, dtype, gen);
                      // Half the entries equal, so eq/le/ge see both outcomes.
                      Tensor b = where(lt(rand({3, 4}, DType::f64, &gen), scalar(0.5, DType::f64)), a,
                                       distinct({3, 4}, dtype, gen, 0.1));
                      return std::vector<Tensor>{a, b};
                    });
  r.reference = [ref](const Args& a) { return c(ref(a[0].real(), a[1].real()) ? 1.0 : 0.0); };
  r.max_order = 0;
  return r;
}

Tensor index_tensor(std::vector<int64_t> values, Shape shape) { return tensor(values, shape); }

std::vector<OpCase> build_table() {
  std::vector<OpCase> t;
  // ---- elementwise unary ----
  t.push_back(linear(unary("neg", {"neg"}, kInexact, [](const Tensor& x) { return neg(x); },
                           [](c x) { return -x; })));
  {
    // Its derivative is zero by definition, not the identity's: test_autodiff.cpp checks that.
    OpCase stop = unary("stop_gradient", {"stop_gradient"}, kInexact, [](const Tensor& x) { return stop_gradient(x); },
                        [](c x) { return x; });
    stop.max_order = 0;
    t.push_back(stop);
  }
  t.push_back(unary("exp", {"exp"}, kInexact, [](const Tensor& x) { return exp(x); },
                    [](c x) { return std::exp(x); }));
  t.push_back(unary("log", {"log"}, kInexact, [](const Tensor& x) { return log(x); },
                    [](c x) { return std::log(x); }, normal_inputs({{3, 4}}, 0.5, 2.0)));
  t.push_back(unary("sin", {"sin"}, kInexact, [](const Tensor& x) { return sin(x); },
                    [](c x) { return std::sin(x); }));
  t.push_back(unary("cos", {"cos"}, kInexact, [](const Tensor& x) { return cos(x); },
                    [](c x) { return std::cos(x); }));
  t.push_back(unary("tanh", {"tanh"}, kInexact, [](const Tensor& x) { return tanh(x); },
                    [](c x) { return std::tanh(x); }));
  t.push_back(unary("gelu", {"gelu"}, kReal, [](const Tensor& x) { return gelu(x); },
                    [](c x) {
                      double v = x.real();
                      return c(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
                    }));
  t.push_back(unary("erf", {"erf"}, kReal, [](const Tensor& x) { return erf(x); },
                    [](c x) { return c(std::erf(x.real())); }));
  t.push_back(unary("log1p", {"log1p"}, kReal, [](const Tensor& x) { return log1p(x); },
                    [](c x) { return c(std::log1p(x.real())); }, normal_inputs({{3, 4}}, 0.5, 2.0)));
  t.push_back(unary("expm1", {"expm1"}, kReal, [](const Tensor& x) { return expm1(x); },
                    [](c x) { return c(std::expm1(x.real())); }));
  t.push_back(unary("sinh", {"sinh"}, kReal, [](const Tensor& x) { return sinh(x); },
                    [](c x) { return c(std::sinh(x.real())); }));
  t.push_back(unary("cosh", {"cosh"}, kReal, [](const Tensor& x) { return cosh(x); },
                    [](c x) { return c(std::cosh(x.real())); }));
  t.push_back(unary("sqrt", {"sqrt"}, kInexact, [](const Tensor& x) { return sqrt(x); },
                    [](c x) { return std::sqrt(x); }, normal_inputs({{3, 4}}, 0.5, 2.0)));
  t.push_back(unary("abs", {"abs"}, kInexact, [](const Tensor& x) { return abs(x); },
                    [](c x) { return c(std::abs(x)); },
                    [](DType d, Generator& g) { return std::vector<Tensor>{away_from_zero({3, 4}, d, g)}; }));
  t.push_back(unary("sign", {"sign"}, kReal, [](const Tensor& x) { return sign(x); },
                    [](c x) { return c(x.real() > 0 ? 1.0 : -1.0); },
                    [](DType d, Generator& g) { return std::vector<Tensor>{away_from_zero({3, 4}, d, g)}; }));
  const std::vector<DType> kComplex = {DType::c64, DType::c128};
  t.push_back(linear(unary("real", {"real"}, kComplex, [](const Tensor& x) { return real(x); },
                           [](c x) { return c(x.real()); })));
  // A round trip through the host: nothing moves for host inputs, and for GPU ones
  // (tests/backends/test_cuda_backend.cpp) both directions and their derivatives run.
  t.push_back(linear(unary("to_device", {"to_device"}, kInexact,
                           [](const Tensor& x) { return to(to(x, cpu()), x.device()); }, [](c x) { return x; })));
  t.push_back(linear(unary("imag", {"imag"}, kComplex, [](const Tensor& x) { return imag(x); },
                           [](c x) { return c(x.imag()); })));
  t.push_back(linear(unary("conj", {"conj"}, kComplex, [](const Tensor& x) { return conj(x); },
                           [](c x) { return std::conj(x); })));
  t.push_back(unary("angle", {"angle"}, kComplex, [](const Tensor& x) { return angle(x); },
                    [](c x) { return c(std::arg(x)); },
                    [](DType d, Generator& g) { return std::vector<Tensor>{away_from_zero({3, 4}, d, g)}; }));
  t.push_back(linear(unary("cast_to_complex", {"cast"}, kReal,
                           [](const Tensor& x) { return cast(x, complex_dtype(x.dtype())); },
                           [](c x) { return x; })));
  t.push_back(linear(unary("cast_to_real", {"cast"}, kComplex,
                           [](const Tensor& x) { return cast(x, real_dtype(x.dtype())); },
                           [](c x) { return c(x.real()); })));

  // ---- elementwise binary (broadcasting [3,4] with [4]) ----
  t.push_back(linear(binary("add", {"add"}, kInexact, add, [](c a, c b) { return a + b; })));
  t.push_back(linear(binary("sub", {"sub"}, kInexact, sub, [](c a, c b) { return a - b; })));
  t.push_back(binary("mul", {"mul"}, kInexact, mul, [](c a, c b) { return a * b; },
                     normal_inputs({{3, 1}, {4}})));
  t.push_back(binary("div", {"div"}, kInexact, div, [](c a, c b) { return a / b; },
                     [](DType d, Generator& g) {
                       return std::vector<Tensor>{uniform({3, 4}, d, -1.5, 1.5, g), away_from_zero({4}, d, g)};
                     }));
  t.push_back(binary("pow", {"pow"}, kInexact,
                     [](const Tensor& a, const Tensor& b) { return pow(a, b); },
                     [](c a, c b) { return std::pow(a, b); }, normal_inputs({{3, 4}, {4}}, 0.5, 1.5)));
  t.push_back(binary("maximum", {"maximum"}, kReal, maximum,
                     [](c a, c b) { return c(std::max(a.real(), b.real())); },
                     [](DType d, Generator& g) {
                       return std::vector<Tensor>{distinct({3, 4}, d, g), distinct({3, 4}, d, g, 0.15)};
                     }));
  t.push_back(binary("minimum", {"minimum"}, kReal, minimum,
                     [](c a, c b) { return c(std::min(a.real(), b.real())); },
                     [](DType d, Generator& g) {
                       return std::vector<Tensor>{distinct({3, 4}, d, g), distinct({3, 4}, d, g, 0.15)};
                     }));
  t.push_back(linear(binary("complex", {"complex"}, kReal, complex,
                            [](c a, c b) { return c(a.real(), b.real()); })));
  t.push_back(comparison("eq", eq, [](double a, double b) { return a == b; }));
  t.push_back(comparison("ne", ne, [](double a, double b) { return a != b; }));
  t.push_back(comparison("lt", lt, [](double a, double b) { return a < b; }));
  t.push_back(comparison("le", le, [](double a, double b) { return a <= b; }));
  t.push_back(comparison("gt", gt, [](double a, double b) { return a > b; }));
  t.push_back(comparison("ge", ge, [](double a, double b) { return a >= b; }));
  {
    OpCase r = row("where", {"where"}, kInexact,
                   [](DType d, Generator& g) {
                     return std::vector<Tensor>{uniform({3, 4}, d, -1, 1, g), uniform({4}, d, -1, 1, g),
                                                lt(rand({3, 4}, DType::f64, &g), scalar(0.5, DType::f64))};
                   },
                   [](const std::vector<Tensor>& x) { return where(x[2], x[0], x[1]); }, true);
    r.reference = [](const Args& a) { return a[2].real() != 0 ? a[0] : a[1]; };
    t.push_back(r);
  }

  // ---- reductions ----
  t.push_back(row("sum_axis", {"sum"}, kInexact, normal_inputs({{3, 4, 2}}),
                  [](const std::vector<Tensor>& x) { return sum(x[0], {1}); }, true));
  t.push_back(row("sum_all_keepdims", {"sum"}, kInexact, normal_inputs({{3, 4}}),
                  [](const std::vector<Tensor>& x) { return sum(x[0], {}, true); }, true));
  t.push_back(row("mean", {"sum"}, kInexact, normal_inputs({{3, 4}}),
                  [](const std::vector<Tensor>& x) { return mean(x[0], {0, 1}); }, true));
  t.push_back(row("prod", {"prod"}, kInexact, normal_inputs({{3, 4}}, 0.5, 1.5),
                  [](const std::vector<Tensor>& x) { return prod(x[0], {0}); }));
  t.push_back(row("max", {"max"}, kReal,
                  [](DType d, Generator& g) { return std::vector<Tensor>{distinct({3, 4}, d, g)}; },
                  [](const std::vector<Tensor>& x) { return max(x[0], {1}, true); }));
  t.push_back(row("min", {"min"}, kReal,
                  [](DType d, Generator& g) { return std::vector<Tensor>{distinct({3, 4}, d, g)}; },
                  [](const std::vector<Tensor>& x) { return min(x[0], {0}); }));

  // ---- movement ----
  t.push_back(row("reshape", {"reshape"}, kInexact, normal_inputs({{3, 4}}),
                  [](const std::vector<Tensor>& x) { return reshape(x[0], {2, -1}); }, true));
  t.push_back(row("permute", {"permute"}, kInexact, normal_inputs({{2, 3, 4}}),
                  [](const std::vector<Tensor>& x) { return permute(x[0], {2, 0, 1}); }, true));
  t.push_back(row("transpose_contiguous", {"permute", "reshape"}, kInexact, normal_inputs({{3, 4}}),
                  [](const std::vector<Tensor>& x) { return contiguous(transpose(x[0])); }, true));
  t.push_back(row("expand", {"expand"}, kInexact, normal_inputs({{3, 1}}),
                  [](const std::vector<Tensor>& x) { return expand(x[0], {2, 3, 4}); }, true));
  t.push_back(row("slice_step", {"slice"}, kInexact, normal_inputs({{5, 7}}),
                  [](const std::vector<Tensor>& x) { return slice(slice(x[0], 1, 1, 7, 2), 0, -4, -1); },
                  true));
  t.push_back(row("pad", {"pad"}, kInexact, normal_inputs({{3, 4}}),
                  [](const std::vector<Tensor>& x) { return pad(x[0], {1, 0}, {2, 3}); }, true));
  t.push_back(row("flip", {"flip"}, kInexact, normal_inputs({{3, 4}}),
                  [](const std::vector<Tensor>& x) { return flip(x[0], {0, 1}); }, true));
  t.push_back(row("concat", {"concat"}, kInexact, normal_inputs({{2, 3}, {2, 1}, {2, 2}}),
                  [](const std::vector<Tensor>& x) { return concat({x[0], x[1], x[2]}, 1); }, true));
  t.push_back(row("stack_squeeze", {"concat", "reshape"}, kInexact, normal_inputs({{3}, {3}}),
                  [](const std::vector<Tensor>& x) { return squeeze(unsqueeze(stack({x[0], x[1]}, 1), 0), 0); },
                  true));

  // ---- indexing ----
  t.push_back(row("gather", {"gather"}, kInexact,
                  [](DType d, Generator& g) {
                    return std::vector<Tensor>{uniform({3, 4}, d, -1, 1, g),
                                               index_tensor({0, 2, 2, 1, 2, 0, 0, 1}, {2, 4})};
                  },
                  [](const std::vector<Tensor>& x) { return gather(x[0], 0, x[1]); }, true));
  t.push_back(row("index_select", {"index_select"}, kInexact,
                  [](DType d, Generator& g) {
                    return std::vector<Tensor>{uniform({3, 4}, d, -1, 1, g), index_tensor({3, 0, 3, -1, 1}, {5})};
                  },
                  [](const std::vector<Tensor>& x) { return index_select(x[0], 1, x[1]); }, true));
  t.push_back(row("scatter_add", {"scatter_add"}, kInexact,
                  [](DType d, Generator& g) {
                    return std::vector<Tensor>{uniform({3, 4}, d, -1, 1, g), uniform({3, 2}, d, -1, 1, g),
                                               index_tensor({1, 1, 0, 3, 2, 1}, {3, 2})};
                  },
                  [](const std::vector<Tensor>& x) { return scatter_add(x[0], 1, x[2], x[1]); }, true));

  // ---- linear algebra ----
  t.push_back(row("matmul", {"matmul"}, kInexact, normal_inputs({{3, 4}, {4, 2}}),
                  [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }));
  t.push_back(row("matmul_batched_broadcast", {"matmul"}, kInexact, normal_inputs({{2, 1, 3, 4}, {3, 4, 2}}),
                  [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }));
  t.push_back(row("matmul_transposed_vector", {"matmul", "permute"}, kInexact, normal_inputs({{4, 3}, {4}}),
                  [](const std::vector<Tensor>& x) { return matmul(transpose(x[0]), x[1]); }));
  t.push_back(row("matmul_add_bias", {"matmul_add"}, kInexact, normal_inputs({{3, 4}, {4, 2}, {2}}),
                  [](const std::vector<Tensor>& x) { return matmul_add(x[0], x[1], x[2]); }));
  t.push_back(row("matmul_add_batched", {"matmul_add"}, kInexact, normal_inputs({{2, 3, 4}, {4, 2}, {2, 3, 2}}),
                  [](const std::vector<Tensor>& x) { return matmul_add(x[0], x[1], x[2]); }));

  // ---- FFTs (linear; irfft/hfft ignore the imaginary parts of DC and Nyquist, whose
  // derivative is then zero in both the finite differences and the rules) ----
  using TL = std::vector<Tensor>;
  t.push_back(row("fft_odd", {"fft_c2c"}, kComplex, normal_inputs({{2, 5}}),
                  [](const TL& x) { return fft::fft(x[0]); }, true));
  t.push_back(row("fft_real_input", {"fft_c2c", "cast"}, kReal, normal_inputs({{3, 4}}),
                  [](const TL& x) { return fft::fft(x[0], -1, 0); }, true));
  t.push_back(row("ifft_ortho", {"fft_c2c"}, kComplex, normal_inputs({{4, 3}}),
                  [](const TL& x) { return fft::ifft(x[0], -1, -1, "ortho"); }, true));
  t.push_back(row("fft2_zero_padded", {"fft_c2c", "pad"}, kComplex, normal_inputs({{3, 4}}),
                  [](const TL& x) { return fft::fft2(x[0], {4, 6}); }, true));
  t.push_back(row("fftn_forward_norm", {"fft_c2c"}, kComplex, normal_inputs({{2, 3, 4}}),
                  [](const TL& x) { return fft::fftn(x[0], {}, {0, 1, 2}, "forward"); }, true));
  t.push_back(row("rfft_even", {"fft_r2c"}, kReal, normal_inputs({{2, 6}}),
                  [](const TL& x) { return fft::rfft(x[0]); }, true));
  t.push_back(row("rfft_odd_axis0", {"fft_r2c"}, kReal, normal_inputs({{5, 2}}),
                  [](const TL& x) { return fft::rfft(x[0], -1, 0); }, true));
  t.push_back(row("rfft_padded", {"fft_r2c", "pad"}, kReal, normal_inputs({{2, 5}}),
                  [](const TL& x) { return fft::rfft(x[0], 8); }, true));
  t.push_back(row("rfft_truncated", {"fft_r2c", "slice"}, kReal, normal_inputs({{2, 5}}),
                  [](const TL& x) { return fft::rfft(x[0], 3); }, true));
  t.push_back(row("irfft_default_n", {"fft_c2r"}, kComplex, normal_inputs({{2, 4}}),
                  [](const TL& x) { return fft::irfft(x[0]); }, true));
  t.push_back(row("irfft_odd_n", {"fft_c2r"}, kComplex, normal_inputs({{2, 4}}),
                  [](const TL& x) { return fft::irfft(x[0], 7); }, true));
  t.push_back(row("rfft2", {"fft_r2c"}, kReal, normal_inputs({{3, 4}}),
                  [](const TL& x) { return fft::rfft2(x[0]); }, true));
  t.push_back(row("irfft2", {"fft_c2r"}, kComplex, normal_inputs({{3, 3}}),
                  [](const TL& x) { return fft::irfft2(x[0]); }, true));
  t.push_back(row("irfftn_with_s", {"fft_c2r", "pad", "slice"}, kComplex, normal_inputs({{2, 3, 4}}),
                  [](const TL& x) { return fft::irfftn(x[0], {4, 5}); }, true));
  t.push_back(row("hfft", {"fft_c2r", "conj"}, kComplex, normal_inputs({{2, 4}}),
                  [](const TL& x) { return fft::hfft(x[0]); }, true));
  t.push_back(row("ihfft", {"fft_r2c", "conj"}, kReal, normal_inputs({{2, 5}}),
                  [](const TL& x) { return fft::ihfft(x[0]); }, true));

  // ---- collectives, on the process-wide communicator: single-process here, where each is the
  // identity (or a copy); tests/dist checks them across ranks under mpirun ----
  t.push_back(row("all_reduce_sum", {"allreduce_sum"}, kInexact, normal_inputs({{3, 4}}),
                  [](const TL& x) { return dist::all_reduce(x[0]); }, true));
  t.push_back(row("all_reduce_of_replicated", {"allreduce_sum_of_replicated"}, kInexact, normal_inputs({{3, 4}}),
                  [](const TL& x) { return dist::all_reduce_of_replicated(x[0]); }, true));
  t.push_back(row("all_reduce_mean", {"allreduce_sum", "div"}, kInexact, normal_inputs({{3, 4}}),
                  [](const TL& x) { return dist::all_reduce(x[0], dist::ReduceOp::mean); }, true));
  t.push_back(row("all_reduce_max", {"allreduce_max"}, kReal,
                  [](DType d, Generator& g) { return TL{distinct({3, 4}, d, g)}; },
                  [](const TL& x) { return dist::all_reduce(x[0], dist::ReduceOp::max); }));
  t.push_back(row("all_gather", {"allgather"}, kInexact, normal_inputs({{2, 3}}),
                  [](const TL& x) { return dist::all_gather(x[0]); }, true));
  t.push_back(row("reduce_scatter", {"reduce_scatter"}, kInexact, normal_inputs({{2, 3}}),
                  [](const TL& x) { return dist::reduce_scatter(x[0]); }, true));
  t.push_back(row("all_to_all", {"all_to_all"}, kInexact, normal_inputs({{2, 3}}),
                  [](const TL& x) { return dist::all_to_all(x[0]); }, true));
  t.push_back(row("broadcast_from_root", {"broadcast_from_root"}, kInexact, normal_inputs({{2, 3}}),
                  [](const TL& x) { return dist::broadcast(x[0]); }, true));
  t.push_back(row("reduce_to_root", {"reduce_to_root"}, kInexact, normal_inputs({{2, 3}}),
                  [](const TL& x) { return dist::reduce(x[0]); }, true));
  t.push_back(row("sum_gradient_over_ranks", {"sum_gradient_over_ranks"}, kInexact, normal_inputs({{2, 3}}),
                  [](const TL& x) { return dist::sum_gradient_over_ranks(x[0]); }, true));
  // The slab FFTs on one rank, which holds the whole grid (tests/dist runs them on two); in a
  // build without MPI they are fft_r2c and fft_c2r.
  t.push_back(row("dist_rfft2", {"dist_rfft2"}, kReal, normal_inputs({{2, 3, 4}}),
                  [](const TL& x) { return dist::rfft2(x[0], 3); }, true));
  t.push_back(row("dist_irfft2_odd", {"dist_irfft2"}, kComplex, normal_inputs({{4, 3}}),
                  [](const TL& x) { return dist::irfft2(x[0], 4, 5); }, true));

  // ---- checkpointing: orders 2 and 3 in reverse mode go through the create_graph recomputation;
  // forward mode runs the segment directly ----
  t.push_back(row("checkpoint_two_outputs", {"checkpoint"}, kInexact, normal_inputs({{3, 4}, {4}}),
                  [](const TL& x) {
                    TL out = checkpoint([](const TL& v) -> TL { return {sin(v[0]) * v[1], exp(v[1]) * v[1]}; }, x);
                    return out[0] + out[1];
                  }));

  // ---- composites ----
  t.push_back(unary("square", {"mul"}, kInexact, [](const Tensor& x) { return square(x); },
                    [](c x) { return x * x; }));
  t.push_back(unary("sigmoid", {"tanh"}, kReal, [](const Tensor& x) { return sigmoid(x); },
                    [](c x) { return c(1.0 / (1.0 + std::exp(-x.real()))); }));
  t.push_back(unary("softplus", {"where", "gt", "exp", "log"}, kReal, [](const Tensor& x) { return softplus(x); },
                    [](c x) { return c(std::log1p(std::exp(x.real()))); }));
  t.push_back(unary("relu", {"where", "le"}, kReal, [](const Tensor& x) { return relu(x); },
                    [](c x) { return c(std::max(x.real(), 0.0)); },
                    [](DType d, Generator& g) { return std::vector<Tensor>{away_from_zero({3, 4}, d, g)}; }));
  t.push_back(unary("silu", {"tanh"}, kReal, [](const Tensor& x) { return silu(x); },
                    [](c x) { return c(x.real() / (1 + std::exp(-x.real()))); }));
  t.push_back(row("logsumexp", {"max", "exp", "log", "sum"}, kReal, normal_inputs({{3, 4}}, -3, 3),
                  [](const std::vector<Tensor>& x) { return logsumexp(x[0], 1); }));
  t.push_back(row("softmax", {"exp"}, kReal, normal_inputs({{3, 4}}, -3, 3),
                  [](const std::vector<Tensor>& x) { return softmax(x[0], 0); }));
  t.push_back(row("log_softmax", {"sub"}, kReal, normal_inputs({{3, 4}}, -3, 3),
                  [](const std::vector<Tensor>& x) { return log_softmax(x[0], -1); }));
  t.push_back(row("norm", {"sqrt", "sum"}, kInexact,
                  [](DType d, Generator& g) { return std::vector<Tensor>{away_from_zero({3, 4}, d, g)}; },
                  [](const std::vector<Tensor>& x) { return norm(x[0], {1}); }));
  t.push_back(row("mse_loss", {"sub", "mul", "sum"}, kReal, normal_inputs({{3, 4}, {3, 4}}),
                  [](const std::vector<Tensor>& x) { return mse_loss(x[0], x[1]); }));

  // ---- creation (constants: the rows check the ops that use them) ----
  t.push_back(row("creation", {"full", "arange", "eye"}, kReal, normal_inputs({{3, 3}}),
                  [](const std::vector<Tensor>& x) {
                    const DType d = x[0].dtype();
                    const Device at = x[0].device();
                    return x[0] * full({3, 3}, 2.5, d, at) + x[0] * reshape(arange(-4, 5, 1, d, at), {3, 3}) +
                           matmul(eye(3, d, at), x[0]) + x[0] * linspace(0, 1, 3, d, at);
                  },
                  true));
  t.push_back(row("keyed_random", {"uniform", "normal"}, kReal, normal_inputs({{3, 4}}),
                  [](const std::vector<Tensor>& x) {
                    // Drawn in float64 for every dtype: the rows' float32 values are checked against float64.
                    const DType d = x[0].dtype();
                    const Device at = x[0].device();
                    return x[0] * cast(eddy::uniform(to(random_key(5), at), {3, 4}, DType::f64), d) +
                           x[0] * cast(normal(to(random_key(5, 12), at), {4}, DType::f64), d);
                  },
                  true));

  // ---- fused causal attention (nn/attention.h): grouped heads, and queries after cached keys ----
  const auto attention = [](const std::vector<Tensor>& x) { return nn::causal_attention(x[0], x[1], x[2]); };
  const std::vector<std::string> attention_primitives = {"causal_attention", "causal_attention_backward"};
  t.push_back(row("causal_attention", attention_primitives, kReal,
                  normal_inputs({{2, 4, 3, 2}, {2, 2, 3, 2}, {2, 2, 3, 2}}), attention));
  t.push_back(row("causal_attention_after_cache", attention_primitives, kReal,
                  normal_inputs({{1, 2, 2, 3}, {1, 2, 5, 3}, {1, 2, 5, 3}}), attention));

  // ---- LayerNorm's and RMSNorm's normalisation over the last axis (nn/normalize.h) ----
  t.push_back(row("layer_normalize", {"layer_normalize"}, kReal, normal_inputs({{3, 5}}),
                  [](const std::vector<Tensor>& x) { return nn::layer_normalize(x[0], 1e-3); }));
  t.push_back(row("rms_normalize", {"rms_normalize"}, kReal, normal_inputs({{2, 2, 4}}),
                  [](const std::vector<Tensor>& x) { return nn::rms_normalize(x[0], 1e-3); }));

  // ---- a compiled function, called as one primitive with rules ----
  {
    auto compiled = std::make_shared<CompiledFunction>([](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{tanh(x[0] * x[1]) + sum(exp(x[0]), {0}) * x[1], x[0]};
    });
    t.push_back(row("compiled_call", {"compiled_call"}, kReal, normal_inputs({{3, 4}, {4}}),
                    [compiled](const std::vector<Tensor>& x) {
                      const std::vector<Tensor> outputs = (*compiled)(x);
                      return outputs[0] * outputs[1];
                    }));
  }
  return t;
}

}  // namespace

const std::vector<OpCase>& op_table() {
  static const std::vector<OpCase> table = build_table();
  return table;
}

std::vector<OpCase> rows_where(bool (*keep)(const OpCase&)) {
  std::vector<OpCase> rows;
  for (const OpCase& op : op_table()) {
    if (keep(op)) rows.push_back(op);
  }
  return rows;
}

Tensor random_like(const Tensor& like, Generator& gen) {
  Tensor re = randn(like.shape(), real_dtype(like.dtype()), &gen);
  if (is_complex(like.dtype())) return complex(re, randn(like.shape(), real_dtype(like.dtype()), &gen));
  return re;
}

std::vector<size_t> differentiable_inputs(const std::vector<Tensor>& inputs) {
  std::vector<size_t> indices;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (is_inexact(inputs[i].dtype())) indices.push_back(i);
  }
  return indices;
}

std::function<std::vector<Tensor>(const std::vector<Tensor>&)> of_differentiable_inputs(
    const OpCase& op, const std::vector<Tensor>& inputs, const std::vector<size_t>& differentiable) {
  return [&op, inputs, differentiable](const std::vector<Tensor>& primals) {
    std::vector<Tensor> full = inputs;
    for (size_t k = 0; k < differentiable.size(); ++k) full[differentiable[k]] = primals[k];
    return std::vector<Tensor>{op.fn(full)};
  };
}

}  // namespace eddy::testing
