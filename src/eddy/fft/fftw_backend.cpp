// The CPU FFT backend on FFTW3 (single and double precision). Plans are made once per layout
// (kind, precision, shape, axes, thread count, alignment) and reused through FFTW's new-array
// execute functions. Planner effort: fftw_planner_flags() (fft_backend.h).

#include <fftw3.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "eddy/backends/backend.h"
#include "eddy/backends/cpu/loops.h"
#include "eddy/fft/fft_backend.h"

namespace eddy::fft {
namespace {

enum class Kind { c2c_forward, c2c_backward, r2c, c2r };

// FFTW's float and double APIs behind one name.
template <typename Real> struct Fftw;
template <> struct Fftw<double> {
  using Plan = fftw_plan;
  using Complex = fftw_complex;
  static void* malloc(size_t bytes) { return fftw_malloc(bytes); }
  static void free(void* p) { fftw_free(p); }
  static void threads(int n) { fftw_plan_with_nthreads(n); }
  static int alignment(const void* p) { return fftw_alignment_of(static_cast<double*>(const_cast<void*>(p))); }
  static Plan c2c(int rank, const fftw_iodim64* dims, int howmany, const fftw_iodim64* batch, void* in,
                  void* out, int sign, unsigned flags) {
    return fftw_plan_guru64_dft(rank, dims, howmany, batch, static_cast<Complex*>(in),
                                static_cast<Complex*>(out), sign, flags);
  }
  static Plan r2c(int rank, const fftw_iodim64* dims, int howmany, const fftw_iodim64* batch, void* in,
                  void* out, unsigned flags) {
    return fftw_plan_guru64_dft_r2c(rank, dims, howmany, batch, static_cast<double*>(in),
                                    static_cast<Complex*>(out), flags);
  }
  static Plan c2r(int rank, const fftw_iodim64* dims, int howmany, const fftw_iodim64* batch, void* in,
                  void* out, unsigned flags) {
    return fftw_plan_guru64_dft_c2r(rank, dims, howmany, batch, static_cast<Complex*>(in),
                                    static_cast<double*>(out), flags);
  }
  static void run_c2c(Plan p, void* in, void* out) {
    fftw_execute_dft(p, static_cast<Complex*>(in), static_cast<Complex*>(out));
  }
  static void run_r2c(Plan p, void* in, void* out) {
    fftw_execute_dft_r2c(p, static_cast<double*>(in), static_cast<Complex*>(out));
  }
  static void run_c2r(Plan p, void* in, void* out) {
    fftw_execute_dft_c2r(p, static_cast<Complex*>(in), static_cast<double*>(out));
  }
};
template <> struct Fftw<float> {
  using Plan = fftwf_plan;
  using Complex = fftwf_complex;
  static void* malloc(size_t bytes) { return fftwf_malloc(bytes); }
  static void free(void* p) { fftwf_free(p); }
  static void threads(int n) { fftwf_plan_with_nthreads(n); }
  static int alignment(const void* p) { return fftwf_alignment_of(static_cast<float*>(const_cast<void*>(p))); }
  static Plan c2c(int rank, const fftw_iodim64* dims, int howmany, const fftw_iodim64* batch, void* in,
                  void* out, int sign, unsigned flags) {
    return fftwf_plan_guru64_dft(rank, dims, howmany, batch, static_cast<Complex*>(in),
                                 static_cast<Complex*>(out), sign, flags);
  }
  static Plan r2c(int rank, const fftw_iodim64* dims, int howmany, const fftw_iodim64* batch, void* in,
                  void* out, unsigned flags) {
    return fftwf_plan_guru64_dft_r2c(rank, dims, howmany, batch, static_cast<float*>(in),
                                     static_cast<Complex*>(out), flags);
  }
  static Plan c2r(int rank, const fftw_iodim64* dims, int howmany, const fftw_iodim64* batch, void* in,
                  void* out, unsigned flags) {
    return fftwf_plan_guru64_dft_c2r(rank, dims, howmany, batch, static_cast<Complex*>(in),
                                     static_cast<float*>(out), flags);
  }
  static void run_c2c(Plan p, void* in, void* out) {
    fftwf_execute_dft(p, static_cast<Complex*>(in), static_cast<Complex*>(out));
  }
  static void run_r2c(Plan p, void* in, void* out) {
    fftwf_execute_dft_r2c(p, static_cast<float*>(in), static_cast<Complex*>(out));
  }
  static void run_c2r(Plan p, void* in, void* out) {
    fftwf_execute_dft_c2r(p, static_cast<Complex*>(in), static_cast<float*>(out));
  }
};

unsigned planner_flags() {
  static const unsigned flags = fftw_planner_flags();
  return flags;
}

// Transform dims over `axes`, in their order (FFTW halves the last dim of a real transform), and
// batch (howmany) dims over the others, from dense layouts.
struct Layout {
  std::vector<fftw_iodim64> dims, batch;
  int rank() const { return static_cast<int>(dims.size()); }
  int howmany() const { return static_cast<int>(batch.size()); }
};

Layout layout_of(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes,
                 const Shape& logical) {
  auto dim = [&](int64_t d) { return fftw_iodim64{logical[d], in.strides()[d], out.strides()[d]}; };
  Layout layout;
  for (int64_t axis : axes) layout.dims.push_back(dim(axis));
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end() && logical[d] != 1) layout.batch.push_back(dim(d));
  }
  return layout;
}

using PlanKey = std::tuple<Kind, bool, Shape, std::vector<int64_t>, int, int, int>;

// A transform's layout: kind, precision, the full (real side's) shape, axes, threads, alignment.
template <typename Real>
PlanKey plan_key(Kind kind, const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, int threads) {
  return {kind, sizeof(Real) == 8, kind == Kind::c2r ? out.shape() : in.shape(), axes, threads,
          Fftw<Real>::alignment(in.raw_data()), Fftw<Real>::alignment(out.raw_data())};
}

// A value worked out once per layout, under a lock (FFTW's planner is not thread-safe, and a
// measurement should not run twice at once).
template <typename Value>
class LayoutMemo {
 public:
  // work_out is a template parameter, not a std::function: get runs on every transform, and a
  // std::function of a capturing lambda would allocate there.
  template <typename WorkOut>
  Value get(const PlanKey& key, const WorkOut& work_out) {
    std::lock_guard lock(mutex_);
    auto found = values_.find(key);
    if (found != values_.end()) return found->second;
    const Value value = work_out();
    values_.emplace(key, value);
    return value;
  }

 private:
  std::mutex mutex_;
  std::map<PlanKey, Value> values_;
};

// Threads pay off only on large transforms. On small ones their start-up costs more than the
// transform, and when the cores are oversubscribed (tests run in parallel) FFTW_MEASURE's trial
// runs of threaded plans spin in OpenMP barriers for whole time slices: seconds per plan.
constexpr int64_t kMinElementsForThreads = int64_t{1} << 15;

// c2r runs a few batch entries (a chunk) at a time through a scratch buffer of about this size (at
// least one batch entry): half of a 512 KiB L2, leaving room for FFTW's output. (Tuned on such a
// core; on the 1 MiB L2 of the benchmark machine in docs/benchmarks.md it was not retuned.)
constexpr int64_t kC2rScratchBytes = 256 * 1024;

// How c2r keeps its input intact (see run_c2r).
enum class C2rScheme { two_stages, copy };

// Over several axes, with FFTW_ESTIMATE (no measuring), c2r runs in two stages while a batch
// entry's half spectrum is at most this size and through a copy above it. Measured on one machine
// (raw FFTW, one thread, docs/benchmarks.md): the two stages took 0.90 to 0.97x the time of the
// copy up to 256^2 in float and double, 1.13x at 512^2 in float and 1.8 to 2.6x at 1024^2.
constexpr int64_t kC2rTwoStageMaxEntryBytes = 1024 * 1024;

// The schemes are timed on the first entries of the batch, up to about this many bytes of input:
// more than L2 holds, so that each timed run reads its input from L3 or memory, as a whole call
// does. One chunk timed again and again runs from L2, where the two can rank otherwise: at f64
// 256^2 they tied there (120 against 121 us an entry) while whole calls ran 2 to 5% faster in
// two stages.
constexpr int64_t kC2rSampleBytes = 4 * 1024 * 1024;

int planning_threads(const Tensor& in, const Tensor& out) {
  if (std::max(in.numel(), out.numel()) < kMinElementsForThreads) return 1;
  // Counted also at one thread: a later count would change these bits (solvers' ThreadTuner).
  note_thread_dependent_kernel();
  return omp_get_max_threads();
}

template <typename Real>
class PlanCache {
 public:
  ~PlanCache() = default;  // plans are left to the process end: FFTW may be torn down first

  typename Fftw<Real>::Plan get(Kind kind, const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes,
                                int threads) {
    return plans_.get(plan_key<Real>(kind, in, out, axes, threads), [&] {
      auto plan = make(kind, in, out, axes, threads);
      EDDY_CHECK(plan, "fft: FFTW could not plan a transform of shape ", in.shape(), " over axes ",
                 to_string(axes));
      return plan;
    });
  }

 private:
  // Plans on scratch arrays, since FFTW_MEASURE overwrites them; the alignment of the scratch
  // arrays is matched to the real ones by offsetting.
  typename Fftw<Real>::Plan make(Kind kind, const Tensor& in, const Tensor& out,
                                 const std::vector<int64_t>& axes, int threads) {
    static std::once_flag init;
    std::call_once(init, [] {
      fftw_init_threads();
      fftwf_init_threads();
    });
    Fftw<Real>::threads(threads);
    const size_t in_bytes = in.numel() * dtype_size(in.dtype()) + 64;
    const size_t out_bytes = out.numel() * dtype_size(out.dtype()) + 64;
    char* scratch_in = static_cast<char*>(Fftw<Real>::malloc(in_bytes));
    char* scratch_out = static_cast<char*>(Fftw<Real>::malloc(out_bytes));
    void* pin = scratch_in + (reinterpret_cast<uintptr_t>(in.raw_data()) % 16);
    void* pout = scratch_out + (reinterpret_cast<uintptr_t>(out.raw_data()) % 16);
    const unsigned flags = planner_flags();
    typename Fftw<Real>::Plan plan;
    if (kind == Kind::c2c_forward || kind == Kind::c2c_backward) {
      Layout l = layout_of(in, out, axes, in.shape());
      plan = Fftw<Real>::c2c(l.rank(), l.dims.data(), l.howmany(), l.batch.data(), pin, pout,
                             kind == Kind::c2c_forward ? FFTW_FORWARD : FFTW_BACKWARD, flags);
    } else if (kind == Kind::r2c) {
      Layout l = layout_of(in, out, axes, in.shape());
      plan = Fftw<Real>::r2c(l.rank(), l.dims.data(), l.howmany(), l.batch.data(), pin, pout, flags);
    } else {
      Layout l = layout_of(in, out, axes, out.shape());
      plan = Fftw<Real>::c2r(l.rank(), l.dims.data(), l.howmany(), l.batch.data(), pin, pout, flags);
    }
    Fftw<Real>::free(scratch_in);
    Fftw<Real>::free(scratch_out);
    return plan;
  }

  LayoutMemo<typename Fftw<Real>::Plan> plans_;
};

template <typename Real>
PlanCache<Real>& plan_cache() {
  static auto* cache = new PlanCache<Real>();
  return *cache;
}

// EDDY_FFTW_C2R=two_stages|copy forces c2r's scheme, to compare them or to bisect a bug; read on
// every call so that a test can switch it.
std::optional<C2rScheme> forced_c2r_scheme() {
  const char* scheme = std::getenv("EDDY_FFTW_C2R");
  if (!scheme || !*scheme) return std::nullopt;
  if (std::strcmp(scheme, "two_stages") == 0) return C2rScheme::two_stages;
  if (std::strcmp(scheme, "copy") == 0) return C2rScheme::copy;
  throw Error(cat("EDDY_FFTW_C2R is '", scheme, "'; use two_stages or copy, or leave it unset"));
}

// Which c2r scheme is faster over several axes depends on the plans FFTW_MEASURE picks for each
// and on the cache sizes: on one machine the two stages won up to 256^2 and lost from 512^2, on
// another the copy won at 256^2 in some runs. So under FFTW_MEASURE and FFTW_PATIENT the scheme is
// measured as FFTW measures its plans: the first call on a layout times both on its first few
// entries (transform_sample) and keeps the faster, per layout. The first run of each scheme plans
// it; then the best of a few alternating runs counts, as one run on a shared machine can be
// slowed by a neighbour.
template <typename TransformSample>
C2rScheme faster_c2r_scheme(const TransformSample& transform_sample) {
  constexpr std::array<C2rScheme, 2> schemes{C2rScheme::two_stages, C2rScheme::copy};
  constexpr int kTimedRuns = 3;
  std::array<double, 2> best{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  for (C2rScheme scheme : schemes) transform_sample(scheme);
  for (int run = 0; run < kTimedRuns; ++run) {
    for (size_t i = 0; i < schemes.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      transform_sample(schemes[i]);
      best[i] = std::min(best[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  return best[0] <= best[1] ? schemes[0] : schemes[1];
}

class FftwBackend final : public FftBackend {
 public:
  void c2c(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, bool forward) override {
    const Kind kind = forward ? Kind::c2c_forward : Kind::c2c_backward;
    if (in.dtype() == DType::c128) {
      Fftw<double>::run_c2c(plan_cache<double>().get(kind, in, out, axes, planning_threads(in, out)), in.raw_data(),
                            out.raw_data());
    } else {
      Fftw<float>::run_c2c(plan_cache<float>().get(kind, in, out, axes, planning_threads(in, out)), in.raw_data(),
                           out.raw_data());
    }
  }

  void r2c(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes) override {
    if (in.dtype() == DType::f64) {
      Fftw<double>::run_r2c(plan_cache<double>().get(Kind::r2c, in, out, axes, planning_threads(in, out)),
                            in.raw_data(), out.raw_data());
    } else {
      Fftw<float>::run_r2c(plan_cache<float>().get(Kind::r2c, in, out, axes, planning_threads(in, out)),
                           in.raw_data(), out.raw_data());
    }
  }

  void c2r(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, double scale) override {
    if (in.dtype() == DType::c128) {
      run_c2r<double>(in, out, axes, scale);
    } else {
      run_c2r<float>(in, out, axes, scale);
    }
  }

 private:
  // FFTW's c2r overwrites its input (and cannot be told not to over several axes), so it runs
  // either in two stages or on a copy, a few batch entries (a chunk) at a time through a scratch
  // buffer small enough to stay in cache.
  // - Two stages, over several axes: the full backward transforms along all but the last axis,
  //   out of place from the input into scratch (reading the input once, as a copy would), then
  //   the half-spectrum transform along the last axis from scratch into the output, which may
  //   destroy the scratch. The scale is a pass over the chunk's output while it is in cache.
  // - A copy: the transform being linear, the scale is applied while copying, and FFTW
  //   transforms the copy from cache.
  // Over one axis it is always the copy; over several, the faster of the two (c2r_scheme).
  template <typename Real>
  static void run_c2r(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, double scale) {
    // The axes before the first transformed one are batch axes; in is dense and out new, so they
    // merge into one, axis 0 of these views.
    const int64_t first_axis = *std::min_element(axes.begin(), axes.end());
    const auto batch_view = [first_axis](const Tensor& t) {
      Shape shape{numel(Shape(t.shape().begin(), t.shape().begin() + first_axis))};
      shape.insert(shape.end(), t.shape().begin() + first_axis, t.shape().end());
      return make_view(t, shape, contiguous_strides(shape), t.offset());
    };
    const Tensor batched_in = batch_view(in), batched_out = batch_view(out);
    std::vector<int64_t> batched_axes;
    for (int64_t axis : axes) batched_axes.push_back(axis - first_axis + 1);
    const std::vector<int64_t> leading_axes(batched_axes.begin(), batched_axes.end() - 1);
    const std::vector<int64_t> last_axis{batched_axes.back()};

    const int64_t batch = batched_in.shape()[0], entry_elements = batched_in.strides()[0];
    const int64_t entry_bytes = entry_elements * static_cast<int64_t>(dtype_size(in.dtype()));
    const int64_t chunk = std::clamp<int64_t>(kC2rScratchBytes / entry_bytes, 1, batch);
    const int threads = planning_threads(in, out);
    // With a batch entry per thread or more, each thread takes an equal share of the entries and
    // runs it chunk by chunk with one-thread plans: one parallel region per call, where threading
    // within each chunk would fork and join twice per chunk, and each join can wait a whole time
    // slice when other processes hold the cores.
    const bool threads_over_batch = threads > 1 && batch >= threads;
    const Tensor scratch =
        Tensor::empty({(threads_over_batch ? threads : 1) * chunk * entry_elements}, in.dtype(), in.device());
    const Real factor = static_cast<Real>(scale);

    // Transforms batch entries [first, end) chunk by chunk through scratch slot `slot`, on
    // `chunk_threads` threads.
    const auto transform_entries = [&](int64_t first, int64_t end, int slot, int chunk_threads, C2rScheme scheme) {
      for (; first < end; first += chunk) {
        Shape in_shape = batched_in.shape(), out_shape = batched_out.shape();
        in_shape[0] = out_shape[0] = std::min(chunk, end - first);
        const Tensor from = make_view(batched_in, in_shape, batched_in.strides(),
                                      batched_in.offset() + first * entry_elements);
        const Tensor staged = make_view(scratch, in_shape, batched_in.strides(), slot * chunk * entry_elements);
        const Tensor into = make_view(batched_out, out_shape, batched_out.strides(),
                                      batched_out.offset() + first * batched_out.strides()[0]);
        if (scheme == C2rScheme::two_stages) {
          Fftw<Real>::run_c2c(plan_cache<Real>().get(Kind::c2c_backward, from, staged, leading_axes, chunk_threads),
                              from.raw_data(), staged.raw_data());
          Fftw<Real>::run_c2r(plan_cache<Real>().get(Kind::c2r, staged, into, last_axis, chunk_threads),
                              staged.raw_data(), into.raw_data());
          if (scale != 1) {
            Real* values = static_cast<Real*>(into.raw_data());
            const int64_t count = into.numel();
#pragma omp parallel for if (chunk_threads > 1) num_threads(chunk_threads) schedule(static)
            for (int64_t i = 0; i < count; ++i) values[i] *= factor;
          }
        } else {
          const Real* source = static_cast<const Real*>(from.raw_data());
          Real* target = static_cast<Real*>(staged.raw_data());
          const int64_t reals = 2 * from.numel();  // real and imaginary parts
#pragma omp parallel for if (chunk_threads > 1) num_threads(chunk_threads) schedule(static)
          for (int64_t i = 0; i < reals; ++i) target[i] = source[i] * factor;
          Fftw<Real>::run_c2r(plan_cache<Real>().get(Kind::c2r, staged, into, batched_axes, chunk_threads), target,
                              into.raw_data());
        }
      }
    };

    const int threads_per_chunk = threads_over_batch ? 1 : threads;
    const int64_t sample_entries = std::clamp<int64_t>(kC2rSampleBytes / entry_bytes, chunk, batch);
    const C2rScheme scheme = c2r_scheme<Real>(batched_in, batched_out, batched_axes, threads, entry_bytes,
                                              [&](C2rScheme candidate) {
                                                transform_entries(0, sample_entries, 0, threads_per_chunk, candidate);
                                              });
    if (threads_over_batch) {
#pragma omp parallel num_threads(threads)
      {
        const auto [first, end] = cpu_kernels::thread_block(batch);
        transform_entries(first, end, omp_get_thread_num(), 1, scheme);
      }
    } else {
      transform_entries(0, batch, 0, threads, scheme);
    }
  }

  // The scheme for a layout: forced, from the size under FFTW_ESTIMATE, else measured once per
  // layout by running `transform_sample` with each (faster_c2r_scheme).
  template <typename Real, typename TransformSample>
  static C2rScheme c2r_scheme(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, int threads,
                              int64_t entry_bytes, const TransformSample& transform_sample) {
    if (axes.size() == 1) return C2rScheme::copy;
    if (const std::optional<C2rScheme> forced = forced_c2r_scheme()) return *forced;
    if (planner_flags() == FFTW_ESTIMATE) {
      return entry_bytes <= kC2rTwoStageMaxEntryBytes ? C2rScheme::two_stages : C2rScheme::copy;
    }
    static auto* schemes = new LayoutMemo<C2rScheme>();
    return schemes->get(plan_key<Real>(Kind::c2r, in, out, axes, threads),
                        [&] { return faster_c2r_scheme(transform_sample); });
  }
};

std::array<FftBackend*, kNumDeviceTypes>& fft_backends() {
  static FftwBackend fftw;
  static std::array<FftBackend*, kNumDeviceTypes> table{&fftw, nullptr};
  return table;
}

}  // namespace

FftBackend& fft_backend_for(Device device) {
  FftBackend* backend = fft_backends()[static_cast<int>(device.type)];
  EDDY_CHECK(backend, "fft: no FFT backend is registered for device ", device);
  return *backend;
}

void register_fft_backend(DeviceType type, FftBackend* backend) {
  fft_backends()[static_cast<int>(type)] = backend;
}

unsigned fftw_planner_flags() {
  const char* effort = std::getenv("EDDY_FFTW_PLANNER");
  if (!effort || !*effort || std::strcmp(effort, "measure") == 0) return FFTW_MEASURE;
  if (std::strcmp(effort, "estimate") == 0) return FFTW_ESTIMATE;
  if (std::strcmp(effort, "patient") == 0) return FFTW_PATIENT;
  throw Error(cat("EDDY_FFTW_PLANNER is '", effort, "'; use estimate, measure or patient, or leave it unset"));
}

}  // namespace eddy::fft
