// How fast could a fully fused PINN training step be? The Burgers step of `make bench-peers`
// (2 -> 8 x 20 -> 1 tanh MLP, Taylor mode for u, u_x, u_t and u_xx at 10,000 interior points,
// loss mean(r^2) with r = u_t + u u_x - nu u_xx, its weight gradient), written by hand as one
// pass per block of 64 points: the block goes forward through every layer and back again while
// its activations stay in L1 and L2, and the weight gradients are summed block by block. Nothing
// is stored per point outside the block. This is the "fused-MLP route" of docs/benchmarks.md; it
// runs here beside eddy's compiled step (the same function through eddy::compile and taylor_jets)
// on the same weights and points, checks that both give the same loss and gradient, and times
// both, interleaved, on OMP_NUM_THREADS threads (the fused step splits the blocks between them):
//
//   OMP_NUM_THREADS=1 taskset -c 0 build/bench/fused_step [--seconds S]
//   OMP_NUM_THREADS=2 taskset -c 0,1 build/bench/fused_step
//
// It is a measurement of the route's ceiling on this machine, not an eddy feature: the layer
// sizes, the activation and the residual are fixed in the code.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <omp.h>

#include "eddy/compiler/compile.h"
#include "eddy/compiler/taylor.h"
#include "eddy/eddy.h"
#include "tanh_mlp.h"

// glibc's vector tanh (libmvec) for the `omp simd` loops, as eddy's generated kernels declare it.
extern "C" {
#pragma omp declare simd notinbranch
float tanhf(float) noexcept;
}

namespace {

constexpr int kWidth = 20;       // hidden units
constexpr int kHidden = 8;       // hidden layers: weights 0 (2 -> 20), 1..7 (20 -> 20), 8 (20 -> 1)
constexpr int kBlock = 64;       // points per block: four 16-lane vectors
constexpr int kLanes = 16;
constexpr int kVectors = kBlock / kLanes;
constexpr int64_t kPoints = 10000;
constexpr float kNu = 0.01f / 3.14159265358979f;

typedef float Vector __attribute__((vector_size(64)));

Vector load(const float* p) {
  Vector v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store(float* p, const Vector& v) { std::memcpy(p, &v, sizeof v); }
float lane_sum(const Vector& v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// out[M][kBlock] = w[M][K] @ in[K][kBlock], in tiles of R rows held in registers.
template <int M, int K, int R>
void product(const float* w, const float* in, float* out) {
  static_assert(M % R == 0);
  for (int m0 = 0; m0 < M; m0 += R) {
    Vector acc[R][kVectors] = {};
    for (int k = 0; k < K; ++k) {
      Vector row[kVectors];
      for (int v = 0; v < kVectors; ++v) row[v] = load(in + k * kBlock + v * kLanes);
      for (int r = 0; r < R; ++r) {
        const float weight = w[(m0 + r) * K + k];
        for (int v = 0; v < kVectors; ++v) acc[r][v] += weight * row[v];
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVectors; ++v) store(out + (m0 + r) * kBlock + v * kLanes, acc[r][v]);
  }
}

// partial[M][K] += sum over the four streams q and the block's points j of g_q[M][j] * s_q[K][j],
// summed in 16 lanes and held in tiles of 5 x 4 (or 1 x 4) registers across the streams; the lanes
// are added up once per step (fused_step).
template <int M, int K>
void outer_sum(const float* const (&g)[4], const float* const (&s)[4], Vector* partial) {
  constexpr int MR = M % 5 == 0 ? 5 : 1, KR = 4;
  static_assert(K % KR == 0);
  for (int m0 = 0; m0 < M; m0 += MR) {
    for (int k0 = 0; k0 < K; k0 += KR) {
      Vector acc[MR][KR];
      for (int r = 0; r < MR; ++r)
        for (int c = 0; c < KR; ++c) acc[r][c] = partial[(m0 + r) * K + k0 + c];
      for (int q = 0; q < 4; ++q) {
        for (int v = 0; v < kVectors; ++v) {
          Vector gv[MR], sv[KR];
          for (int r = 0; r < MR; ++r) gv[r] = load(g[q] + (m0 + r) * kBlock + v * kLanes);
          for (int c = 0; c < KR; ++c) sv[c] = load(s[q] + (k0 + c) * kBlock + v * kLanes);
          for (int r = 0; r < MR; ++r)
            for (int c = 0; c < KR; ++c) acc[r][c] += gv[r] * sv[c];
        }
      }
      for (int r = 0; r < MR; ++r)
        for (int c = 0; c < KR; ++c) partial[(m0 + r) * K + k0 + c] = acc[r][c];
    }
  }
}

// The four Taylor streams of a layer's input or output, feature-major: value, d/dt, d/dx, d2/dx2.
struct Streams {
  float value[kWidth * kBlock], t[kWidth * kBlock], x[kWidth * kBlock], xx[kWidth * kBlock];
};
// What a hidden layer keeps for the backward pass: its output streams and its pre-activation
// tangents (tanh and its derivatives come from the output value).
struct Saved {
  Streams output;
  float zt[kWidth * kBlock], zx[kWidth * kBlock], zxx[kWidth * kBlock];
};

struct Weights {
  // w[l] is [out][in] for the forward products; wt[l] is eddy's own [in][out], the backward's.
  std::vector<float> w[kHidden + 1], wt[kHidden + 1], b[kHidden + 1];
};

struct Gradients {
  std::vector<float> w[kHidden + 1], b[kHidden + 1];  // w in [out][in]
  std::vector<Vector> partial[kHidden + 1];           // w's sums over points, lane by lane
  double loss = 0;
};

// tanh and the Taylor rule of one hidden layer, from its pre-activation streams: z (held in
// s.output.value until it is replaced by tanh(z)) and zt, zx, zxx.
void activate(Saved& s) {
#pragma omp simd
  for (int i = 0; i < kWidth * kBlock; ++i) {
    const float h = tanhf(s.output.value[i]);
    const float d1 = 1 - h * h, d2 = -2 * h * d1;
    s.output.value[i] = h;
    s.output.t[i] = d1 * s.zt[i];
    s.output.x[i] = d1 * s.zx[i];
    s.output.xx[i] = d1 * s.zxx[i] + d2 * s.zx[i] * s.zx[i];
  }
}

// One block: forward through every layer, the residual, and back, adding to `grad`.
void block_step(const Weights& W, const float* x, const float* t, int valid, Gradients& grad, Saved* saved) {
  // Layer 0: z = W0 [x t]^T + b; its tangents are W0's columns.
  {
    Saved& s = saved[0];
    const float* w = W.w[0].data();  // [20][2]: column 0 is x, column 1 is t
    for (int m = 0; m < kWidth; ++m) {
      for (int j = 0; j < kBlock; ++j) {
        s.output.value[m * kBlock + j] = w[m * 2] * x[j] + w[m * 2 + 1] * t[j] + W.b[0][m];
        s.zx[m * kBlock + j] = w[m * 2];
        s.zt[m * kBlock + j] = w[m * 2 + 1];
        s.zxx[m * kBlock + j] = 0;
      }
    }
    activate(s);
  }
  for (int l = 1; l < kHidden; ++l) {
    Saved& s = saved[l];
    const Streams& in = saved[l - 1].output;
    product<kWidth, kWidth, 5>(W.w[l].data(), in.value, s.output.value);
    product<kWidth, kWidth, 5>(W.w[l].data(), in.t, s.zt);
    product<kWidth, kWidth, 5>(W.w[l].data(), in.x, s.zx);
    product<kWidth, kWidth, 5>(W.w[l].data(), in.xx, s.zxx);
    for (int m = 0; m < kWidth; ++m)
      for (int j = 0; j < kBlock; ++j) s.output.value[m * kBlock + j] += W.b[l][m];
    activate(s);
  }
  // The output layer and the residual's cotangents.
  const Streams& last = saved[kHidden - 1].output;
  float u[kBlock], ut[kBlock], ux[kBlock], uxx[kBlock];
  product<1, kWidth, 1>(W.w[kHidden].data(), last.value, u);
  product<1, kWidth, 1>(W.w[kHidden].data(), last.t, ut);
  product<1, kWidth, 1>(W.w[kHidden].data(), last.x, ux);
  product<1, kWidth, 1>(W.w[kHidden].data(), last.xx, uxx);
  float gu[kBlock], gut[kBlock], gux[kBlock], guxx[kBlock];
  for (int j = 0; j < kBlock; ++j) {
    const float value = u[j] + W.b[kHidden][0];
    const float r = ut[j] + value * ux[j] - kNu * uxx[j];
    const float gr = j < valid ? 2 * r / static_cast<float>(kPoints) : 0.0f;
    if (j < valid) grad.loss += static_cast<double>(r) * r;
    gu[j] = gr * ux[j];
    gut[j] = gr;
    gux[j] = gr * value;
    guxx[j] = -kNu * gr;
  }
  outer_sum<1, kWidth>({gu, gut, gux, guxx}, {last.value, last.t, last.x, last.xx}, grad.partial[kHidden].data());
  for (int j = 0; j < kBlock; ++j) grad.b[kHidden][0] += gu[j];
  // Cotangents of the last hidden layer's output streams.
  Streams g;
  product<kWidth, 1, 5>(W.wt[kHidden].data(), gu, g.value);
  product<kWidth, 1, 5>(W.wt[kHidden].data(), gut, g.t);
  product<kWidth, 1, 5>(W.wt[kHidden].data(), gux, g.x);
  product<kWidth, 1, 5>(W.wt[kHidden].data(), guxx, g.xx);
  Streams gz;  // cotangents of a layer's pre-activation streams z, zt, zx, zxx
  for (int l = kHidden - 1; l >= 0; --l) {
    const Saved& s = saved[l];
#pragma omp simd
    for (int i = 0; i < kWidth * kBlock; ++i) {
      const float h = s.output.value[i], d1 = 1 - h * h, d2 = -2 * h * d1, d3 = -2 * (d1 * d1 + h * d2);
      const float zt = s.zt[i], zx = s.zx[i], zxx = s.zxx[i];
      gz.value[i] = g.value[i] * d1 + g.t[i] * d2 * zt + g.x[i] * d2 * zx + g.xx[i] * (d2 * zxx + d3 * zx * zx);
      gz.t[i] = g.t[i] * d1;
      gz.x[i] = g.x[i] * d1 + g.xx[i] * 2 * d2 * zx;
      gz.xx[i] = g.xx[i] * d1;
    }
    for (int m = 0; m < kWidth; ++m) {
      float sum = 0;
      for (int j = 0; j < kBlock; ++j) sum += gz.value[m * kBlock + j];
      grad.b[l][m] += sum;
    }
    if (l == 0) {
      // z = W0 [x t]^T: the value's product, and the tangents, which are W0's columns.
      for (int m = 0; m < kWidth; ++m) {
        float gx = 0, gt = 0;
        for (int j = 0; j < kBlock; ++j) {
          gx += gz.value[m * kBlock + j] * x[j] + gz.x[m * kBlock + j];
          gt += gz.value[m * kBlock + j] * t[j] + gz.t[m * kBlock + j];
        }
        grad.w[0][m * 2] += gx;
        grad.w[0][m * 2 + 1] += gt;
      }
      break;
    }
    const Streams& in = saved[l - 1].output;
    outer_sum<kWidth, kWidth>({gz.value, gz.t, gz.x, gz.xx}, {in.value, in.t, in.x, in.xx}, grad.partial[l].data());
    product<kWidth, kWidth, 5>(W.wt[l].data(), gz.value, g.value);
    product<kWidth, kWidth, 5>(W.wt[l].data(), gz.t, g.t);
    product<kWidth, kWidth, 5>(W.wt[l].data(), gz.x, g.x);
    product<kWidth, kWidth, 5>(W.wt[l].data(), gz.xx, g.xx);
  }
}

Gradients zero_gradients(const Weights& W) {
  Gradients grad;
  for (int l = 0; l <= kHidden; ++l) {
    grad.w[l].assign(W.w[l].size(), 0.0f);
    grad.b[l].assign(W.b[l].size(), 0.0f);
    grad.partial[l].assign(W.w[l].size(), Vector{});
  }
  return grad;
}

// Each thread takes a contiguous range of blocks with its own sums; the ranges' sums are added in
// order, so the result depends on the thread count only through those ranges.
Gradients fused_step(const Weights& W, const std::vector<float>& x, const std::vector<float>& t) {
  const int64_t blocks = (kPoints + kBlock - 1) / kBlock;
  const int threads = omp_get_max_threads();
  std::vector<Gradients> parts(static_cast<size_t>(threads), zero_gradients(W));
#pragma omp parallel num_threads(threads)
  {
    const int me = omp_get_thread_num();
    Gradients& grad = parts[static_cast<size_t>(me)];
    static thread_local Saved saved[kHidden];
    for (int64_t b = blocks * me / threads; b < blocks * (me + 1) / threads; ++b) {
      const int64_t first = b * kBlock;
      const int valid = static_cast<int>(std::min<int64_t>(kBlock, kPoints - first));
      float bx[kBlock] = {}, bt[kBlock] = {};
      std::copy(x.begin() + first, x.begin() + first + valid, bx);
      std::copy(t.begin() + first, t.begin() + first + valid, bt);
      block_step(W, bx, bt, valid, grad, saved);
    }
  }
  Gradients total = zero_gradients(W);
  for (const Gradients& part : parts) {
    for (int l = 0; l <= kHidden; ++l) {
      for (size_t i = 0; i < total.w[l].size(); ++i) total.w[l][i] += part.w[l][i] + lane_sum(part.partial[l][i]);
      for (size_t i = 0; i < total.b[l].size(); ++i) total.b[l][i] += part.b[l][i];
    }
    total.loss += part.loss;
  }
  total.loss /= static_cast<double>(kPoints);
  return total;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  double budget = 3.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--seconds") budget = std::atof(argv[i + 1]);
  }
  using namespace eddy;
  std::vector<int64_t> widths{2};
  for (int l = 0; l < kHidden; ++l) widths.push_back(kWidth);
  widths.push_back(1);
  eddy_bench::TanhMlp mlp(widths, DType::f32);
  std::vector<Tensor> params = mlp.parameters();  // weights [in, out], then biases
  Generator generator(1);
  for (size_t l = kHidden + 1; l < params.size(); ++l) {  // non-zero biases, so their gradients count
    NoGradGuard no_grad;
    params[l].copy_(0.1 * randn(params[l].shape(), DType::f32, &generator));
  }
  const Tensor x = rand({kPoints, 1}, DType::f32, &generator) * 2.0 - 1.0;
  const Tensor t = rand({kPoints, 1}, DType::f32, &generator);

  // eddy: taylor_jets over [x t] and the weight gradient, compiled.
  TaylorOperator jets_of([&](const Tensor& points) { return mlp(points); }, TaylorOptions{{0}, false, {}});
  CompiledFunction eddy_step = compile([&](const std::vector<Tensor>&) {
    const TaylorJets jets = jets_of(concat({x, t}, 1));
    const Tensor residual = jets.first[1] + jets.value * jets.first[0] - kNu * jets.second[0];
    const Tensor loss = mean(residual * residual);
    std::vector<Tensor> outputs = grad({loss}, params);
    outputs.insert(outputs.begin(), loss);
    return outputs;
  });

  Weights W;
  auto refresh = [&] {
    for (int l = 0; l <= kHidden; ++l) {
      const std::vector<float> w = params[static_cast<size_t>(l)].detach().to_vector<float>();  // [in][out]
      const int64_t in = widths[static_cast<size_t>(l)], out = widths[static_cast<size_t>(l) + 1];
      W.w[l].assign(static_cast<size_t>(in * out), 0.0f);
      W.wt[l] = w;
      for (int64_t k = 0; k < in; ++k)
        for (int64_t m = 0; m < out; ++m) W.w[l][static_cast<size_t>(m * in + k)] = w[static_cast<size_t>(k * out + m)];
      W.b[l] = params[static_cast<size_t>(kHidden + 1 + l)].detach().to_vector<float>();
    }
  };
  refresh();
  const std::vector<float> xs = x.to_vector<float>(), ts = t.to_vector<float>();

  // The same loss and gradient.
  const std::vector<Tensor> reference = eddy_step({});
  const Gradients mine = fused_step(W, xs, ts);
  const double loss = reference[0].item<double>();
  double worst = std::abs(mine.loss - loss) / std::abs(loss);
  for (int l = 0; l <= kHidden; ++l) {
    const std::vector<float> gw = reference[static_cast<size_t>(1 + l)].to_vector<float>();  // [in][out]
    const std::vector<float> gb = reference[static_cast<size_t>(2 + kHidden + l)].to_vector<float>();
    const int64_t in = widths[static_cast<size_t>(l)], out = widths[static_cast<size_t>(l) + 1];
    double scale = 0, error = 0;
    for (int64_t k = 0; k < in; ++k) {
      for (int64_t m = 0; m < out; ++m) {
        const double a = gw[static_cast<size_t>(k * out + m)], b = mine.w[l][static_cast<size_t>(m * in + k)];
        scale = std::max(scale, std::abs(a));
        error = std::max(error, std::abs(a - b));
      }
    }
    for (int64_t m = 0; m < out; ++m) {
      scale = std::max(scale, std::abs(static_cast<double>(gb[static_cast<size_t>(m)])));
      error = std::max(error, std::abs(static_cast<double>(gb[static_cast<size_t>(m)]) - mine.b[l][static_cast<size_t>(m)]));
    }
    worst = std::max(worst, error / scale);
  }
  std::printf("loss: eddy %.7g, fused %.7g; largest gradient difference %.2e of the largest entry\n", loss, mine.loss,
              worst);
  if (!(worst < 1e-3)) {
    std::printf("the fused step disagrees with eddy's\n");
    return 1;
  }

  // Interleaved rounds; the median of each side's times.
  std::vector<double> eddy_times, fused_times;
  const auto begin = std::chrono::steady_clock::now();
  while (seconds_since(begin) < budget || eddy_times.size() < 5) {
    auto start = std::chrono::steady_clock::now();
    const std::vector<Tensor> out = eddy_step({});
    eddy_times.push_back(seconds_since(start));
    start = std::chrono::steady_clock::now();
    const Gradients g = fused_step(W, xs, ts);
    fused_times.push_back(seconds_since(start));
    if (!std::isfinite(g.loss)) return 1;
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double e = median(eddy_times), f = median(fused_times);
  // The step's GEMM floating-point operations (bench/peers/common.py, interior points only).
  const double flops = 3.0 * (2.0 * kPoints * 2 * kWidth + 4.0 * 2 * kPoints * kWidth * kWidth * (kHidden - 1) +
                              4.0 * 2 * kPoints * kWidth) - 2.0 * kPoints * 2 * kWidth;
  std::printf("eddy compiled %.2f ms, fused by hand %.2f ms (%.2fx); %.3f GFLOP of products: %.1f and %.1f GFLOP/s "
              "(%zu rounds)\n",
              e * 1e3, f * 1e3, e / f, flops * 1e-9, flops / e * 1e-9, flops / f * 1e-9, eddy_times.size());
  return 0;
}
