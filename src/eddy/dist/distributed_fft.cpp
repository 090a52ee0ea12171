// The slab-decomposed real FFTs on FFTW-MPI (builds with MPI; no_mpi_distributed_fft.cpp is the
// single-process one). Two unnormalised primitives, mirroring fft_r2c and fft_c2r of
// src/eddy/fft/fft.cpp, with the same rules written in themselves:
//   dist_rfft2   its transpose is dist_irfft2 (unscaled) of the cotangent with the entries that
//                stand for two frequencies (all but DC and Nyquist along the last axis) halved;
//   dist_irfft2  (times a scale) its transpose is the scale times dist_rfft2 of the cotangent
//                with those entries doubled.
// The weights act along the last axis, which every rank holds whole, so they are the same on
// every rank. Attrs.shape is the global grid {n0, n1}, Attrs.scale the inverse's factor and
// Attrs.payload the communicator (not owned). On one rank the kernels are the serial FFT
// backend's, so the op tests cover these primitives in a single process.

#include "eddy/dist/distributed_fft.h"

#include <fftw3-mpi.h>
#include <mpi.h>

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "eddy/dist/collectives.h"
#include "eddy/dist/distributed_fft_checks.h"
#include "eddy/fft/fft_backend.h"
#include "eddy/ops/ops.h"

namespace eddy::dist {
namespace {
using eddy::detail::dense;

// FFTW-MPI's float and double APIs behind one name. The MPI communicator spans MPI_COMM_WORLD
// (mpi_communicator.cpp), so that is the communicator every plan uses.
template <typename Real> struct FftwMpi;
template <> struct FftwMpi<double> {
  using Plan = fftw_plan;
  using Complex = fftw_complex;
  static Plan r2c(ptrdiff_t n0, ptrdiff_t n1, double* in, Complex* out, unsigned flags) {
    return fftw_mpi_plan_dft_r2c_2d(n0, n1, in, out, MPI_COMM_WORLD, flags);
  }
  static Plan c2r(ptrdiff_t n0, ptrdiff_t n1, Complex* in, double* out, unsigned flags) {
    return fftw_mpi_plan_dft_c2r_2d(n0, n1, in, out, MPI_COMM_WORLD, flags);
  }
  static double* alloc_real(size_t n) { return fftw_alloc_real(n); }
  static Complex* alloc_complex(size_t n) { return fftw_alloc_complex(n); }
  static void threads(int n) { fftw_plan_with_nthreads(n); }
  static void execute(Plan plan) { fftw_execute(plan); }
};
template <> struct FftwMpi<float> {
  using Plan = fftwf_plan;
  using Complex = fftwf_complex;
  static Plan r2c(ptrdiff_t n0, ptrdiff_t n1, float* in, Complex* out, unsigned flags) {
    return fftwf_mpi_plan_dft_r2c_2d(n0, n1, in, out, MPI_COMM_WORLD, flags);
  }
  static Plan c2r(ptrdiff_t n0, ptrdiff_t n1, Complex* in, float* out, unsigned flags) {
    return fftwf_mpi_plan_dft_c2r_2d(n0, n1, in, out, MPI_COMM_WORLD, flags);
  }
  static float* alloc_real(size_t n) { return fftwf_alloc_real(n); }
  static Complex* alloc_complex(size_t n) { return fftwf_alloc_complex(n); }
  static void threads(int n) { fftwf_plan_with_nthreads(n); }
  static void execute(Plan plan) { fftwf_execute(plan); }
};

// Once, before the first FFTW-MPI call of a job on several ranks. MPI is initialised by then: the
// MPI communicator did it when it was made. FFTW wants its threads initialised before
// fftw_mpi_init; fftw_init_threads is idempotent, so the serial backend calling it later is harmless.
void init_fftw_mpi(const Communicator& comm) {
  EDDY_CHECK(comm.kind() == "mpi", "distributed FFT: a ", comm.size(), "-rank job needs the MPI communicator, got a ",
             comm.kind(), " one");
  static std::once_flag once;
  std::call_once(once, [] {
    fftw_init_threads();
    fftwf_init_threads();
    fftw_mpi_init();
    fftwf_mpi_init();
  });
}

// The forward and backward plans of one n0 x n1 grid, on buffers of their own: FFTW-MPI lays the
// real rows out padded to 2 (n1 / 2 + 1) entries and needs room for its intermediate transposes
// (alloc_local), and FFTW's c2r destroys its input, so every call copies in and out of these.
template <typename Real>
struct SlabPlan {
  using Complex = typename FftwMpi<Real>::Complex;
  typename FftwMpi<Real>::Plan forward = nullptr, backward = nullptr;
  Real* real = nullptr;
  Complex* spectrum = nullptr;
  int64_t rows = 0;        // this rank's rows
  int64_t real_stride = 0;  // 2 (n1 / 2 + 1): the padded row length of `real`
};

// Plans are made once per grid (collectively: every rank asks for the same grids in the same
// order) and left to the process end, like the serial backend's.
template <typename Real>
SlabPlan<Real>& slab_plan(int64_t n0, int64_t n1) {
  static std::mutex mutex;
  static auto* plans = new std::map<std::pair<int64_t, int64_t>, SlabPlan<Real>>();
  std::lock_guard lock(mutex);
  auto found = plans->find({n0, n1});
  if (found != plans->end()) return found->second;

  SlabPlan<Real> plan;
  const ptrdiff_t m = n1 / 2 + 1;
  ptrdiff_t rows = 0, first_row = 0;
  const ptrdiff_t alloc_local = fftw_mpi_local_size_2d(n0, m, MPI_COMM_WORLD, &rows, &first_row);
  plan.rows = rows;
  plan.real_stride = 2 * m;
  plan.real = FftwMpi<Real>::alloc_real(2 * alloc_local);
  plan.spectrum = FftwMpi<Real>::alloc_complex(alloc_local);
  // One thread per rank: the ranks take the cores. The input is copied in before every run.
  FftwMpi<Real>::threads(1);
  const unsigned flags = fft::fftw_planner_flags() | FFTW_DESTROY_INPUT;
  plan.forward = FftwMpi<Real>::r2c(n0, n1, plan.real, plan.spectrum, flags);
  plan.backward = FftwMpi<Real>::c2r(n0, n1, plan.spectrum, plan.real, flags);
  EDDY_CHECK(plan.forward && plan.backward, "distributed FFT: FFTW-MPI could not plan a ", n0, " x ", n1, " grid");
  return plans->emplace(std::pair{n0, n1}, plan).first->second;
}

// The number of n0 x n1 fields in a slab: the product of its leading axes.
int64_t batch_of(const Tensor& slab) {
  int64_t count = 1;
  for (int64_t d = 0; d + 2 < slab.dim(); ++d) count *= slab.shape()[d];
  return count;
}

// One FFTW-MPI run per batch entry: every rank runs the same number, even with no rows.
template <typename Real>
void slab_r2c(const Tensor& in, const Tensor& out, int64_t n0, int64_t n1) {
  SlabPlan<Real>& plan = slab_plan<Real>(n0, n1);
  const int64_t m = n1 / 2 + 1, real_size = plan.rows * n1, spectrum_size = plan.rows * m;
  const Real* source = static_cast<const Real*>(in.raw_data());
  auto* target = static_cast<typename SlabPlan<Real>::Complex*>(out.raw_data());
  for (int64_t b = 0, count = batch_of(in); b < count; ++b) {
    for (int64_t row = 0; row < plan.rows; ++row) {
      std::memcpy(plan.real + row * plan.real_stride, source + b * real_size + row * n1, n1 * sizeof(Real));
    }
    FftwMpi<Real>::execute(plan.forward);
    std::memcpy(target + b * spectrum_size, plan.spectrum, spectrum_size * sizeof(*plan.spectrum));
  }
}

template <typename Real>
void slab_c2r(const Tensor& in, const Tensor& out, int64_t n0, int64_t n1, double scale) {
  SlabPlan<Real>& plan = slab_plan<Real>(n0, n1);
  const int64_t m = n1 / 2 + 1, real_size = plan.rows * n1, spectrum_size = plan.rows * m;
  const auto* source = static_cast<const typename SlabPlan<Real>::Complex*>(in.raw_data());
  Real* target = static_cast<Real*>(out.raw_data());
  const Real factor = static_cast<Real>(scale);
  for (int64_t b = 0, count = batch_of(in); b < count; ++b) {
    std::memcpy(plan.spectrum, source + b * spectrum_size, spectrum_size * sizeof(*plan.spectrum));
    FftwMpi<Real>::execute(plan.backward);
    for (int64_t row = 0; row < plan.rows; ++row) {
      const Real* padded = plan.real + row * plan.real_stride;
      Real* result = target + b * real_size + row * n1;
      for (int64_t j = 0; j < n1; ++j) result[j] = padded[j] * factor;
    }
  }
}

Attrs attrs_for(Communicator& comm, int64_t n0, int64_t n1, double scale) {
  Attrs attrs;
  attrs.payload = std::shared_ptr<void>(std::shared_ptr<void>(), &comm);  // aliasing: not owned
  attrs.shape = {n0, n1};
  attrs.scale = scale;
  return attrs;
}

// The last two axes of a slab, which the serial backend transforms on one rank.
std::vector<int64_t> grid_axes(const Tensor& slab) { return {slab.dim() - 2, slab.dim() - 1}; }

// Weights along the last axis of a half spectrum of n1 columns: `scale` at DC (and at Nyquist
// when n1 is even), scale * middle elsewhere, broadcasting against `like`.
Tensor hermitian_weights(const Tensor& like, int64_t n1, double middle, double scale) {
  const int64_t m = n1 / 2 + 1;
  std::vector<double> w(m, scale * middle);
  w[0] = scale;
  if (n1 % 2 == 0) w[m - 1] = scale;
  Shape shape(like.dim(), 1);
  shape.back() = m;
  return cast(tensor(w, shape), real_dtype(like.dtype()));
}

Tensor r2c(const Tensor& slab, Communicator& comm, int64_t n0, int64_t n1);
Tensor c2r(const Tensor& spectrum_slab, Communicator& comm, int64_t n0, int64_t n1, double scale);

const Primitive& r2c_p = []() -> const Primitive& {
  Primitive p;
  p.name = "dist_rfft2";
  p.cost = CostClass::collective;
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    Communicator& comm = communicator_of(a);
    const int64_t n0 = a.shape[0], n1 = a.shape[1];
    detail::check_slab("dist::rfft2", in[0], n0, n1, false, slab_rows(n0, n1, comm), comm);
    Shape shape = in[0].shape();
    shape.back() = n1 / 2 + 1;
    return OutputSpec{shape, complex_dtype(in[0].dtype())};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = eddy::detail::new_output(spec, in[0]);
    Communicator& comm = communicator_of(a);
    if (comm.size() == 1) {
      if (out.numel() > 0) fft::fft_backend_for(out.device()).r2c(dense(in[0]), out, grid_axes(out));
      return out;
    }
    init_fftw_mpi(comm);
    if (in[0].dtype() == DType::f64) {
      slab_r2c<double>(dense(in[0]), out, a.shape[0], a.shape[1]);
    } else {
      slab_r2c<float>(dense(in[0]), out, a.shape[0], a.shape[1]);
    }
    return out;
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return r2c(t, communicator_of(a), a.shape[0], a.shape[1]); };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) {
    return c2r(g * hermitian_weights(g, a.shape[1], 0.5, 1), communicator_of(a), a.shape[0], a.shape[1], 1);
  };
  return register_primitive(std::move(p));
}();

const Primitive& c2r_p = []() -> const Primitive& {
  Primitive p;
  p.name = "dist_irfft2";
  p.cost = CostClass::collective;
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    Communicator& comm = communicator_of(a);
    const int64_t n0 = a.shape[0], n1 = a.shape[1];
    detail::check_slab("dist::irfft2", in[0], n0, n1, true, slab_rows(n0, n1, comm), comm);
    Shape shape = in[0].shape();
    shape.back() = n1;
    return OutputSpec{shape, real_dtype(in[0].dtype())};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = eddy::detail::new_output(spec, in[0]);
    Communicator& comm = communicator_of(a);
    if (comm.size() == 1) {
      if (out.numel() > 0) fft::fft_backend_for(out.device()).c2r(dense(in[0]), out, grid_axes(out), a.scale);
      return out;
    }
    init_fftw_mpi(comm);
    if (in[0].dtype() == DType::c128) {
      slab_c2r<double>(dense(in[0]), out, a.shape[0], a.shape[1], a.scale);
    } else {
      slab_c2r<float>(dense(in[0]), out, a.shape[0], a.shape[1], a.scale);
    }
    return out;
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) {
    return c2r(t, communicator_of(a), a.shape[0], a.shape[1], a.scale);
  };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) {
    const Tensor spectrum = r2c(g, communicator_of(a), a.shape[0], a.shape[1]);
    return spectrum * hermitian_weights(spectrum, a.shape[1], 2.0, a.scale);
  };
  return register_primitive(std::move(p));
}();

Tensor r2c(const Tensor& slab, Communicator& comm, int64_t n0, int64_t n1) {
  return dispatch(r2c_p, {slab}, attrs_for(comm, n0, n1, 1));
}

Tensor c2r(const Tensor& spectrum_slab, Communicator& comm, int64_t n0, int64_t n1, double scale) {
  return dispatch(c2r_p, {spectrum_slab}, attrs_for(comm, n0, n1, scale));
}

}  // namespace

SlabRows slab_rows(int64_t n0, int64_t n1, Communicator& comm) {
  EDDY_CHECK(n0 > 0 && n1 > 0, "dist::slab_rows: the grid must have positive sizes, got ", n0, " x ", n1);
  if (comm.size() == 1) return SlabRows{0, n0};
  init_fftw_mpi(comm);
  ptrdiff_t rows = 0, first_row = 0;
  fftw_mpi_local_size_2d(n0, n1 / 2 + 1, MPI_COMM_WORLD, &rows, &first_row);
  return SlabRows{first_row, rows};
}

Tensor rfft2(const Tensor& slab, int64_t n0, Communicator& comm) {
  EDDY_CHECK(slab.defined() && slab.dim() >= 2, "dist::rfft2: needs at least 2 axes (rows and columns of the grid), got ",
             slab.defined() ? cat(slab.shape()) : std::string("an undefined tensor"));
  return r2c(slab, comm, n0, slab.size(-1));
}

Tensor irfft2(const Tensor& spectrum_slab, int64_t n0, int64_t n1, Communicator& comm) {
  return c2r(spectrum_slab, comm, n0, n1, 1.0 / (static_cast<double>(n0) * static_cast<double>(n1)));
}

}  // namespace eddy::dist
