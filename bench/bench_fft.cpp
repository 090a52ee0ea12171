// FFT: eddy's rfft2, irfft2 and fft2 against FFTW's own batched 2-D plans (FFTW is what eddy
// calls underneath), with the same planner flags and thread count on same-sized buffers; and the
// FNO question: how much of a Fourier layer goes to the copy-truncate-multiply-pad sequence
// around its transforms.

#include <fftw3.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "eddy/fft/fft.h"
#include "eddy/fft/spectral.h"

namespace eddy_bench {
namespace {

enum class Transform { rfft2, irfft2, fft2 };
constexpr const char* transform_name(Transform transform) {
  switch (transform) {
    case Transform::rfft2: return "rfft2";
    case Transform::irfft2: return "irfft2";
    case Transform::fft2: return "fft2";
  }
  return "";
}

// fftw_keeping_input (irfft2 only): FFTW's multi-dimensional c2r destroys its input and cannot be
// told not to (FFTW_PRESERVE_INPUT is refused there), so a caller of FFTW who needs the spectrum
// afterwards, as irfft2's callers do, copies it into the plan's input buffer first, folding in the
// 1/n^2 scale.
enum class FftImpl { eddy, fftw, fftw_keeping_input };
constexpr const char* impl_name(FftImpl impl) {
  switch (impl) {
    case FftImpl::eddy: return "eddy";
    case FftImpl::fftw: return "fftw";
    case FftImpl::fftw_keeping_input: return "fftw_keeping_input";
  }
  return "";
}

template <typename Real>
constexpr const char* type_name() {
  return std::is_same_v<Real, float> ? "f32" : "f64";
}

// A batch of square 2-D transforms over the last two axes of [batch, size, size].
struct FftCase {
  Transform transform;
  int64_t size;
  std::string label() const {
    return std::string(transform_name(transform)) + " " + std::to_string(size) + "^2 x" + std::to_string(batch());
  }
  // 8 images up to 256^2 and 2 above, so every case moves enough data to time reliably.
  int64_t batch() const { return size <= 256 ? 8 : 2; }
};

// float32 at every size; float64 at one mid and one large size.
template <typename Real>
std::vector<FftCase> fft_cases() {
  const std::vector<int64_t> sizes =
      std::is_same_v<Real, float> ? std::vector<int64_t>{64, 128, 256, 512, 1024} : std::vector<int64_t>{256, 1024};
  std::vector<FftCase> cases;
  for (int64_t size : sizes) {
    for (Transform transform : {Transform::rfft2, Transform::irfft2, Transform::fft2}) {
      cases.push_back({transform, size});
    }
  }
  return cases;
}

// eddy's planner effort (fftw_backend.cpp), so both sides plan alike.
unsigned planner_flags() {
  const char* effort = std::getenv("EDDY_FFTW_PLANNER");
  if (effort && std::strcmp(effort, "estimate") == 0) return FFTW_ESTIMATE;
  if (effort && std::strcmp(effort, "patient") == 0) return FFTW_PATIENT;
  return FFTW_MEASURE;
}

// FFTW's float and double APIs behind one name: contiguous batches of rank-2 transforms.
template <typename Real> struct Fftw;
template <> struct Fftw<float> {
  using Plan = fftwf_plan;
  using Complex = fftwf_complex;
  // eddy initialises FFTW's threads on its first plan too; doing it twice is harmless.
  static void plan_threads(int threads) {
    fftwf_init_threads();
    fftwf_plan_with_nthreads(threads);
  }
  static Plan r2c(const int* n, int batch, void* in, void* out, unsigned flags) {
    return fftwf_plan_many_dft_r2c(2, n, batch, static_cast<float*>(in), nullptr, 1, n[0] * n[1],
                                   static_cast<Complex*>(out), nullptr, 1, n[0] * (n[1] / 2 + 1), flags);
  }
  static Plan c2r(const int* n, int batch, void* in, void* out, unsigned flags) {
    return fftwf_plan_many_dft_c2r(2, n, batch, static_cast<Complex*>(in), nullptr, 1, n[0] * (n[1] / 2 + 1),
                                   static_cast<float*>(out), nullptr, 1, n[0] * n[1], flags);
  }
  static Plan c2c(const int* n, int batch, void* in, void* out, unsigned flags) {
    return fftwf_plan_many_dft(2, n, batch, static_cast<Complex*>(in), nullptr, 1, n[0] * n[1],
                               static_cast<Complex*>(out), nullptr, 1, n[0] * n[1], FFTW_FORWARD, flags);
  }
  static void execute(Plan plan) { fftwf_execute(plan); }
  static void destroy(Plan plan) { fftwf_destroy_plan(plan); }
};
template <> struct Fftw<double> {
  using Plan = fftw_plan;
  using Complex = fftw_complex;
  static void plan_threads(int threads) {
    fftw_init_threads();
    fftw_plan_with_nthreads(threads);
  }
  static Plan r2c(const int* n, int batch, void* in, void* out, unsigned flags) {
    return fftw_plan_many_dft_r2c(2, n, batch, static_cast<double*>(in), nullptr, 1, n[0] * n[1],
                                  static_cast<Complex*>(out), nullptr, 1, n[0] * (n[1] / 2 + 1), flags);
  }
  static Plan c2r(const int* n, int batch, void* in, void* out, unsigned flags) {
    return fftw_plan_many_dft_c2r(2, n, batch, static_cast<Complex*>(in), nullptr, 1, n[0] * (n[1] / 2 + 1),
                                  static_cast<double*>(out), nullptr, 1, n[0] * n[1], flags);
  }
  static Plan c2c(const int* n, int batch, void* in, void* out, unsigned flags) {
    return fftw_plan_many_dft(2, n, batch, static_cast<Complex*>(in), nullptr, 1, n[0] * n[1],
                              static_cast<Complex*>(out), nullptr, 1, n[0] * n[1], FFTW_FORWARD, flags);
  }
  static void execute(Plan plan) { fftw_execute(plan); }
  static void destroy(Plan plan) { fftw_destroy_plan(plan); }
};

// One case's input, eddy's warm plans, and an FFTW plan on buffers of the same shapes. eddy
// allocates its result on every call, as user code does; FFTW writes into a preallocated buffer.
// FFTW's c2r destroys its input, so its buffers are FFTW's own (after the first call its c2r
// transforms whatever the last call left there, which overflows to NaN within a few hundred
// calls; a transform of NaNs measured no faster). eddy's c2r keeps its input intact, which counts
// as eddy's overhead against fftw, and not against fftw_keeping_input; the 1/n^2 of irfft2's norm
// is applied on all sides.
template <typename Real>
class FftOperands {
 public:
  explicit FftOperands(const FftCase& fft_case) : case_(fft_case) {
    const eddy::DType real_type = eddy::dtype_of<Real>(), complex_type = eddy::complex_dtype(real_type);
    const int64_t batch = fft_case.batch(), n = fft_case.size, half = n / 2 + 1;
    eddy::Shape output_shape{batch, n, n};
    eddy::DType output_type = complex_type;
    switch (fft_case.transform) {
      case Transform::rfft2:
        input_ = eddy::randn({batch, n, n}, real_type);
        output_shape = {batch, n, half};
        break;
      case Transform::irfft2:
        input_ = eddy::fft::rfft2(eddy::randn({batch, n, n}, real_type));  // a Hermitian half spectrum
        output_type = real_type;
        break;
      case Transform::fft2:
        input_ = eddy::complex(eddy::randn({batch, n, n}, real_type), eddy::randn({batch, n, n}, real_type));
        break;
    }
    fftw_input_ = eddy::zeros(input_.shape(), input_.dtype());
    fftw_output_ = eddy::zeros(output_shape, output_type);
    Fftw<Real>::plan_threads(eddy::num_threads());
    const int dims[2] = {static_cast<int>(n), static_cast<int>(n)};
    const int howmany = static_cast<int>(batch);
    void* in = fftw_input_.raw_data();
    void* out = fftw_output_.raw_data();
    switch (fft_case.transform) {
      case Transform::rfft2: plan_ = Fftw<Real>::r2c(dims, howmany, in, out, planner_flags()); break;
      case Transform::irfft2: plan_ = Fftw<Real>::c2r(dims, howmany, in, out, planner_flags()); break;
      case Transform::fft2: plan_ = Fftw<Real>::c2c(dims, howmany, in, out, planner_flags()); break;
    }
    EDDY_CHECK(plan_, "bench_fft: FFTW could not plan ", fft_case.label());
    // Planning with FFTW_MEASURE scribbles on the buffers, so the input is filled afterwards.
    std::memcpy(in, input_.raw_data(), input_.numel() * eddy::dtype_size(input_.dtype()));
    run(FftImpl::eddy);  // eddy plans on its first call: keep that out of the timings
  }
  ~FftOperands() { Fftw<Real>::destroy(plan_); }
  FftOperands(const FftOperands&) = delete;
  FftOperands& operator=(const FftOperands&) = delete;

  void run(FftImpl impl) const {
    if (impl == FftImpl::fftw) {
      Fftw<Real>::execute(plan_);
      if (case_.transform == Transform::irfft2) scale_fftw_output();
    } else if (impl == FftImpl::fftw_keeping_input) {
      EDDY_CHECK(case_.transform == Transform::irfft2, "bench_fft: only irfft2 destroys its input");
      copy_scaled_input();
      Fftw<Real>::execute(plan_);
    } else {
      switch (case_.transform) {
        case Transform::rfft2: benchmark::DoNotOptimize(eddy::fft::rfft2(input_)); break;
        case Transform::irfft2: benchmark::DoNotOptimize(eddy::fft::irfft2(input_)); break;
        case Transform::fft2: benchmark::DoNotOptimize(eddy::fft::fft2(input_)); break;
      }
    }
    benchmark::ClobberMemory();
  }

 private:
  // irfft2's default norm divides by the transform size, which FFTW's c2r leaves to the caller:
  // the baseline does it too, so that both sides compute the same values.
  void scale_fftw_output() const {
    Real* values = static_cast<Real*>(fftw_output_.raw_data());
    const int64_t count = fftw_output_.numel();
    const Real factor = irfft2_scale();
    for (int64_t i = 0; i < count; ++i) values[i] *= factor;
  }

  // irfft2's default norm: 1 / n^2.
  Real irfft2_scale() const { return Real(1) / static_cast<Real>(case_.size * case_.size); }

  void copy_scaled_input() const {
    const Real* source = static_cast<const Real*>(input_.raw_data());
    Real* target = static_cast<Real*>(fftw_input_.raw_data());
    const int64_t count = 2 * input_.numel();  // real and imaginary parts
    const Real factor = irfft2_scale();
    for (int64_t i = 0; i < count; ++i) target[i] = source[i] * factor;
  }

  FftCase case_;
  eddy::Tensor input_, fftw_input_, fftw_output_;
  typename Fftw<Real>::Plan plan_;
};

template <typename Real>
void register_fft(const FftCase& fft_case, int threads, FftImpl impl) {
  const std::string name = "fft/" + std::string(type_name<Real>()) + "/" + transform_name(fft_case.transform) + "/" +
                           std::to_string(fft_case.size) + "^2/batch:" + std::to_string(fft_case.batch()) +
                           "/threads:" + std::to_string(threads) + "/" + impl_name(impl);
  benchmark::RegisterBenchmark(name.c_str(), [fft_case, threads, impl](benchmark::State& state) {
    set_threads(threads);
    const FftOperands<Real> operands(fft_case);
    for (auto _ : state) operands.run(impl);
  })
      ->MinTime(kMinTime)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

template <typename Real>
void register_fft_cases() {
  for (const FftCase& fft_case : fft_cases<Real>()) {
    for (int threads : kThreadCounts) {
      for (FftImpl impl : {FftImpl::eddy, FftImpl::fftw}) register_fft<Real>(fft_case, threads, impl);
      if (fft_case.transform == Transform::irfft2) register_fft<Real>(fft_case, threads, FftImpl::fftw_keeping_input);
    }
  }
}

// Rounds per table row: enough that the median of the paired ratios moves by a few percent
// between runs on the shared machine, where 15 rounds moved it by up to 20%.
constexpr int kFftRounds = 41;

template <typename Real>
void print_fft_rows() {
  for (const FftCase& fft_case : fft_cases<Real>()) {
    for (int threads : kThreadCounts) {
      set_threads(threads);
      const FftOperands<Real> operands(fft_case);
      // One thread: CPU time, so that waits for a shared core do not swamp a few-percent difference.
      const bool destroys_input = fft_case.transform == Transform::irfft2;
      std::vector<std::function<void()>> impls{[&] { operands.run(FftImpl::fftw); },
                                               [&] { operands.run(FftImpl::eddy); }};
      if (destroys_input) impls.push_back([&] { operands.run(FftImpl::fftw_keeping_input); });
      const std::vector<std::vector<double>> rounds =
          interleaved_round_seconds(impls, 0.02, kFftRounds, threads == 1 ? Timing::thread_cpu : Timing::wall);
      const double ratio = median_ratio(rounds[1], rounds[0]);
      std::printf("| %s %s | %d | %.1f | %.1f | %.2f | %+.0f%% |", type_name<Real>(), fft_case.label().c_str(), threads,
                  median(rounds[1]) * 1e6, median(rounds[0]) * 1e6, ratio, (ratio - 1) * 100);
      if (destroys_input) {
        std::printf(" %.1f | %.2f |\n", median(rounds[2]) * 1e6, median_ratio(rounds[1], rounds[2]));
      } else {
        std::printf(" - | - |\n");
      }
      std::fflush(stdout);
    }
  }
}

// One FNO-2D Fourier layer (Li et al., ICLR 2021) at the paper's 2-D settings: width 32, 12 modes
// per axis, a 64 x 64 grid, batch 16, float32. layer(x) = gelu(spectral_conv(x) + W x + b), the
// skip W x being a 1x1 convolution: a matmul over channels.
constexpr int64_t kFnoBatch = 16, kFnoWidth = 32, kFnoGrid = 64, kFnoModes = 12;

class FnoLayer {
 public:
  FnoLayer() {
    eddy::Generator generator(0);
    const eddy::Shape weight_shape = eddy::fft::spectral_weight_shape(kFnoWidth, kFnoWidth, {kFnoModes, kFnoModes});
    const double scale = 1.0 / (kFnoWidth * kFnoWidth);  // the reference implementation's init
    spectral_weights_ = (eddy::complex(eddy::rand(weight_shape, eddy::DType::f32, &generator),
                                       eddy::rand(weight_shape, eddy::DType::f32, &generator)) *
                         scale)
                            .detach()
                            .requires_grad_();
    skip_weights_ = (eddy::randn({kFnoWidth, kFnoWidth}, eddy::DType::f32, &generator) / std::sqrt(double(kFnoWidth)))
                        .detach()
                        .requires_grad_();
    skip_bias_ = eddy::zeros({kFnoWidth, 1}, eddy::DType::f32).requires_grad_();
  }

  eddy::Tensor spectral(const eddy::Tensor& x) const {
    return eddy::fft::spectral_conv(x, spectral_weights_, {kFnoModes, kFnoModes});
  }

  eddy::Tensor operator()(const eddy::Tensor& x) const {
    // [width, width] @ [batch, width, grid^2]: the 1x1 convolution without moving x.
    const eddy::Tensor flat = eddy::reshape(x, {kFnoBatch, kFnoWidth, kFnoGrid * kFnoGrid});
    const eddy::Tensor skip = eddy::reshape(eddy::matmul(skip_weights_, flat) + skip_bias_, x.shape());
    return eddy::gelu(spectral(x) + skip);
  }

  std::vector<eddy::Tensor> parameters() const { return {spectral_weights_, skip_weights_, skip_bias_}; }

 private:
  eddy::Tensor spectral_weights_, skip_weights_, skip_bias_;
};

// The layer and its parts, forward only (no graph recorded) and forward + backward (the
// gradient with respect to x and all weights, as for a layer inside a stack).
struct FnoParts {
  FnoLayer layer;
  eddy::Tensor x = eddy::randn({kFnoBatch, kFnoWidth, kFnoGrid, kFnoGrid}, eddy::DType::f32).requires_grad_();
  eddy::Tensor cotangent = eddy::randn(x.shape(), eddy::DType::f32);
  // spectral_conv's transforms (spectral.cpp): rfft of x along the last axis, then fft along the
  // other axis of the kept columns of that half spectrum; back, ifft and irfft of columns of
  // that shape. `columns` stands for all three column-shaped operands and cotangents.
  eddy::Tensor columns =
      eddy::slice(eddy::fft::rfft(x.detach(), kFnoGrid, 3), 3, 0, kFnoModes).detach().requires_grad_();
  eddy::Tensor half_spectrum_cotangent = eddy::fft::rfft(cotangent, kFnoGrid, 3);

  void layer_forward() const {
    eddy::NoGradGuard no_grad;
    benchmark::DoNotOptimize(layer(x));
  }
  void spectral_forward() const {
    eddy::NoGradGuard no_grad;
    benchmark::DoNotOptimize(layer.spectral(x));
  }
  void ffts_forward() const {
    eddy::NoGradGuard no_grad;
    benchmark::DoNotOptimize(eddy::fft::rfft(x, kFnoGrid, 3));
    benchmark::DoNotOptimize(eddy::fft::fft(columns, kFnoGrid, 2));
    benchmark::DoNotOptimize(eddy::fft::ifft(columns, kFnoGrid, 2));
    benchmark::DoNotOptimize(eddy::fft::irfft(columns, kFnoGrid, 3));
  }
  void layer_forward_backward() const {
    std::vector<eddy::Tensor> inputs = layer.parameters();
    inputs.push_back(x);
    benchmark::DoNotOptimize(eddy::grad({layer(x)}, inputs, {cotangent}));
  }
  void spectral_forward_backward() const {
    benchmark::DoNotOptimize(eddy::grad({layer.spectral(x)}, {layer.parameters()[0], x}, {cotangent}));
  }
  void ffts_forward_backward() const {
    const eddy::Tensor column_cotangent = columns.detach();
    benchmark::DoNotOptimize(eddy::grad({eddy::fft::rfft(x, kFnoGrid, 3)}, {x}, {half_spectrum_cotangent}));
    benchmark::DoNotOptimize(eddy::grad({eddy::fft::fft(columns, kFnoGrid, 2)}, {columns}, {column_cotangent}));
    benchmark::DoNotOptimize(eddy::grad({eddy::fft::ifft(columns, kFnoGrid, 2)}, {columns}, {column_cotangent}));
    benchmark::DoNotOptimize(eddy::grad({eddy::fft::irfft(columns, kFnoGrid, 3)}, {columns}, {cotangent}));
  }
};

const std::string kFnoName = "fno_layer/f32/" + std::to_string(kFnoGrid) + "^2/width:" + std::to_string(kFnoWidth) +
                             "/modes:" + std::to_string(kFnoModes) + "/batch:" + std::to_string(kFnoBatch);

void register_fno(int threads, bool backward) {
  const std::string name =
      kFnoName + "/threads:" + std::to_string(threads) + (backward ? "/forward_backward" : "/forward");
  benchmark::RegisterBenchmark(name.c_str(), [threads, backward](benchmark::State& state) {
    set_threads(threads);
    const FnoParts parts;
    parts.layer_forward_backward();  // plans and warms the allocator
    for (auto _ : state) backward ? parts.layer_forward_backward() : parts.layer_forward();
  })
      ->MinTime(kMinTime)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

void print_fno_rows() {
  const FnoParts parts;
  for (int threads : kThreadCounts) {
    set_threads(threads);
    parts.layer_forward_backward();  // plans for this thread count
    for (bool backward : {false, true}) {
      const std::vector<double> seconds =
          backward ? interleaved_median_seconds({[&] { parts.layer_forward_backward(); },
                                                 [&] { parts.spectral_forward_backward(); },
                                                 [&] { parts.ffts_forward_backward(); }},
                                                0.05)
                   : interleaved_median_seconds({[&] { parts.layer_forward(); }, [&] { parts.spectral_forward(); },
                                                 [&] { parts.ffts_forward(); }},
                                                0.05);
      const double layer = seconds[0], spectral = seconds[1], ffts = seconds[2];
      std::printf("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.0f%% |\n", backward ? "forward + backward" : "forward",
                  threads, layer * 1e3, spectral * 1e3, ffts * 1e3, (spectral - ffts) * 1e3,
                  (spectral - ffts) / layer * 100);
      std::fflush(stdout);
    }
  }
}

}  // namespace

void register_fft_benchmarks() {
  register_fft_cases<float>();
  register_fft_cases<double>();
  for (int threads : kThreadCounts) {
    for (bool backward : {false, true}) register_fno(threads, backward);
  }
}

void print_fft_table() {
  std::printf("\n(1 thread: CPU time of the calling thread; 2 threads: wall time. Times are medians over %d "
              "interleaved rounds; eddy/FFTW is the median of the rounds' own ratios)\n",
              kFftRounds);
  std::printf("| case | threads | eddy µs | FFTW µs | eddy/FFTW | overhead | FFTW keeping its input µs | "
              "eddy/that |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  print_fft_rows<float>();
  print_fft_rows<double>();
}

void print_fno_table() {
  std::printf("\n| FNO layer (%s) | threads | layer ms | spectral_conv ms | its transforms ms | "
              "rest of spectral_conv ms | rest / layer |\n",
              kFnoName.c_str());
  std::printf("|---|---|---|---|---|---|---|\n");
  print_fno_rows();
}

}  // namespace eddy_bench
