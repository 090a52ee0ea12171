// The FFT kernels on NVIDIA GPUs: cuFFT, with plans cached by layout. A transform over the
// trailing axes of a dense tensor is one batched plan; any other set of axes is done one axis at
// a time (each a strided batched plan, run once per slice of the axes before it), which the
// separability of the DFT makes exact. c2r always goes one axis at a time (see there).

#include <cufft.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "eddy/backends/cuda/driver.h"
#include "eddy/backends/cuda/cuda_libraries.h"
#include "eddy/backends/cuda/dynamic_library.h"
#include "eddy/core/backend.h"
#include "eddy/fft/fft_backend.h"
#include "eddy/ops/ops.h"

namespace eddy::fft {
namespace {

// The cuFFT calls eddy uses, bound on first use (backends/cuda/dynamic_library.h).
struct Cufft {
  cuda::DynamicLibrary library{EDDY_CUFFT_SONAME, EDDY_CUDA_LIBRARY_DIR};
  decltype(&cufftCreate) create = nullptr;
  decltype(&cufftMakePlanMany64) make_plan_many = nullptr;
  decltype(&cufftSetStream) set_stream = nullptr;
  decltype(&cufftExecC2C) c2c = nullptr;
  decltype(&cufftExecZ2Z) z2z = nullptr;
  decltype(&cufftExecR2C) r2c = nullptr;
  decltype(&cufftExecD2Z) d2z = nullptr;
  decltype(&cufftExecC2R) c2r = nullptr;
  decltype(&cufftExecZ2D) z2d = nullptr;

  Cufft() {
    library.bind(create, "cufftCreate");
    library.bind(make_plan_many, "cufftMakePlanMany64");
    library.bind(set_stream, "cufftSetStream");
    library.bind(c2c, "cufftExecC2C");
    library.bind(z2z, "cufftExecZ2Z");
    library.bind(r2c, "cufftExecR2C");
    library.bind(d2z, "cufftExecD2Z");
    library.bind(c2r, "cufftExecC2R");
    library.bind(z2d, "cufftExecZ2D");
  }
};

const Cufft& cufft() { return cuda::opened<Cufft>("an FFT on the GPU"); }

void check(cufftResult result, const char* call) {
  EDDY_CHECK(result == CUFFT_SUCCESS, "cuFFT: ", call, " failed with cufftResult ", static_cast<int>(result));
}

// A plan's layout, cuFFT's advanced one: `lengths` transformed, elements `stride` apart, `batch`
// transforms `distance` apart (the same for input and output but for the half spectrum's
// lengths, which cuFFT derives).
struct PlanKey {
  int device;
  cufftType type;
  std::vector<int> lengths;
  int64_t stride, input_distance, output_distance, batch;
  auto tie() const { return std::tie(device, type, lengths, stride, input_distance, output_distance, batch); }
  bool operator<(const PlanKey& other) const { return tie() < other.tie(); }
};

cufftHandle plan_for(const PlanKey& key) {
  static std::mutex mutex;
  static std::map<PlanKey, cufftHandle> plans;  // kept for the process, as cuBLAS's handles are
  std::lock_guard lock(mutex);
  auto [entry, inserted] = plans.try_emplace(key, 0);
  if (!inserted) return entry->second;
  cuda::use_device(key.device);
  std::vector<long long> n(key.lengths.begin(), key.lengths.end());
  // Embedding extents equal to the lengths (the halved last one for the spectrum side) describe
  // dense data; cuFFT needs them whenever strides are given.
  std::vector<long long> real_embed = n, half_embed = n;
  half_embed.back() = n.back() / 2 + 1;
  const bool to_half = key.type == CUFFT_R2C || key.type == CUFFT_D2Z;
  const bool from_half = key.type == CUFFT_C2R || key.type == CUFFT_Z2D;
  std::vector<long long>& in_embed = from_half ? half_embed : real_embed;
  std::vector<long long>& out_embed = to_half ? half_embed : real_embed;
  size_t workspace = 0;
  try {
    check(cufft().create(&entry->second), "cufftCreate");
    check(cufft().make_plan_many(entry->second, static_cast<int>(n.size()), n.data(), in_embed.data(), key.stride,
                                 key.input_distance, out_embed.data(), key.stride, key.output_distance, key.type,
                                 key.batch, &workspace),
          "cufftMakePlanMany64");
    check(cufft().set_stream(entry->second, reinterpret_cast<cudaStream_t>(cuda::stream(key.device))), "cufftSetStream");
  } catch (...) {
    plans.erase(entry);
    throw;
  }
  return entry->second;
}

void execute(cufftHandle plan, cufftType type, void* in, void* out, bool forward) {
  const int direction = forward ? CUFFT_FORWARD : CUFFT_INVERSE;
  switch (type) {
    case CUFFT_C2C:
      check(cufft().c2c(plan, static_cast<cufftComplex*>(in), static_cast<cufftComplex*>(out), direction), "cufftExecC2C");
      return;
    case CUFFT_Z2Z:
      check(cufft().z2z(plan, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleComplex*>(out), direction),
            "cufftExecZ2Z");
      return;
    case CUFFT_R2C:
      check(cufft().r2c(plan, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(out)), "cufftExecR2C");
      return;
    case CUFFT_D2Z:
      check(cufft().d2z(plan, static_cast<cufftDoubleReal*>(in), static_cast<cufftDoubleComplex*>(out)), "cufftExecD2Z");
      return;
    case CUFFT_C2R:
      check(cufft().c2r(plan, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(out)), "cufftExecC2R");
      return;
    case CUFFT_Z2D:
      check(cufft().z2d(plan, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleReal*>(out)), "cufftExecZ2D");
      return;
  }
}

int64_t product(const Shape& shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= shape[d];
  return p;
}

// Transforms `axis` of dense tensors `in` -> `out` (`shape` is the larger of the two, the real
// side's for R2C/C2R); in and out may be one buffer for C2C.
void along_axis(cufftType type, const Shape& shape, int64_t axis, const Tensor& in, const Tensor& out, bool forward) {
  const int device = out.device().index;
  const size_t a = static_cast<size_t>(axis);
  const int64_t inner = product(shape, a + 1, shape.size()), outer = product(shape, 0, a), n = shape[a];
  const int64_t half = n / 2 + 1;
  const bool to_half = type == CUFFT_R2C || type == CUFFT_D2Z, from_half = type == CUFFT_C2R || type == CUFFT_Z2D;
  const int64_t in_length = from_half ? half : n, out_length = to_half ? half : n;
  // One plan over the `inner` interleaved transforms of a slice, run for each of `outer` slices;
  // when inner is 1 the slices are the batch instead.
  const bool batch_slices = inner == 1;
  const PlanKey key{device, type, {static_cast<int>(n)}, inner, batch_slices ? in_length : 1,
                    batch_slices ? out_length : 1, batch_slices ? outer : inner};
  const cufftHandle plan = plan_for(key);
  char* in_bytes = static_cast<char*>(element_address(in));
  char* out_bytes = static_cast<char*>(element_address(out));
  const size_t in_slice = static_cast<size_t>(in_length * inner) * dtype_size(in.dtype());
  const size_t out_slice = static_cast<size_t>(out_length * inner) * dtype_size(out.dtype());
  cuda::use_device(device);
  for (int64_t o = 0; o < (batch_slices ? 1 : outer); ++o) {
    execute(plan, type, in_bytes + o * in_slice, out_bytes + o * out_slice, forward);
  }
}

// Whether `axes` (sorted) are the last axes of a rank-`rank` tensor, at most cuFFT's three.
bool trailing(const std::vector<int64_t>& axes, int64_t rank) {
  if (axes.empty() || axes.size() > 3) return false;
  for (size_t k = 0; k < axes.size(); ++k) {
    if (axes[k] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(k)) return false;
  }
  return true;
}

// The C2C or R2C transforms over trailing `axes` as one plan (shape: the input's).
void over_trailing_axes(cufftType type, const Shape& shape, const std::vector<int64_t>& axes, const Tensor& in,
                        const Tensor& out, bool forward) {
  std::vector<int> lengths;
  for (int64_t a : axes) lengths.push_back(static_cast<int>(shape[a]));
  const int64_t batch = product(shape, 0, static_cast<size_t>(axes.front()));
  const int64_t full = product(shape, static_cast<size_t>(axes.front()), shape.size());
  const int64_t half = full / shape.back() * (shape.back() / 2 + 1);
  const bool to_half = type == CUFFT_R2C || type == CUFFT_D2Z;
  const PlanKey key{out.device().index, type, lengths, 1, full, to_half ? half : full, batch};
  const cufftHandle plan = plan_for(key);
  cuda::use_device(out.device().index);
  execute(plan, type, element_address(in), element_address(out), forward);
}

Tensor dense_copy(const Tensor& t) {
  Tensor copy = Tensor::empty(t.shape(), t.dtype(), t.device());
  backend_for(t.device()).copy(t, copy);
  return copy;
}

class CufftBackend final : public FftBackend {
 public:
  void c2c(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, bool forward) override {
    const cufftType type = in.dtype() == DType::c64 ? CUFFT_C2C : CUFFT_Z2Z;
    if (trailing(axes, in.dim())) return over_trailing_axes(type, in.shape(), axes, in, out, forward);
    const Tensor* source = &in;
    for (int64_t axis : axes) {
      along_axis(type, in.shape(), axis, *source, out, forward);
      source = &out;  // the later axes in place
    }
  }

  void r2c(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes) override {
    const cufftType type = in.dtype() == DType::f32 ? CUFFT_R2C : CUFFT_D2Z;
    if (trailing(axes, in.dim())) return over_trailing_axes(type, in.shape(), axes, in, out, true);
    along_axis(type, in.shape(), axes.back(), in, out, true);
    const std::vector<int64_t> others(axes.begin(), axes.end() - 1);
    if (!others.empty()) c2c(out, out, others, true);
  }

  // cuFFT's C2R overwrites its input, and eddy's c2r leaves it alone: the transforms run on a
  // copy. eddy's c2r ignores the imaginary parts of the DC and Nyquist entries (fft.cpp), which
  // cuFFT may read in some cases: the copy has them zeroed, after the full transforms along the
  // other axes and before the one-axis C2R.
  void c2r(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, double scale) override {
    const Tensor spectrum = dense_copy(in);
    const int64_t axis = axes.back(), n = out.shape()[axis], half = spectrum.shape()[axis];
    const std::vector<int64_t> others(axes.begin(), axes.end() - 1);
    if (!others.empty()) c2c(spectrum, spectrum, others, false);
    for (const int64_t entry : {int64_t{0}, n % 2 == 0 ? half - 1 : int64_t{-1}}) {
      if (entry < 0) continue;
      Tensor plane = slice(spectrum, axis, entry, entry + 1);
      plane.copy_(real(plane));
    }
    const cufftType type = in.dtype() == DType::c64 ? CUFFT_C2R : CUFFT_Z2D;
    along_axis(type, out.shape(), axis, spectrum, out, false);
    if (scale != 1) {
      Tensor factor = Tensor::empty({}, out.dtype(), out.device());
      backend_for(out.device()).fill(factor, scale);
      backend_for(out.device()).binary(BinaryKernel::mul, out, detail::broadcast_view(factor, out.shape()), out);
    }
  }
};

const bool cufft_backend_registered = [] {
  static CufftBackend backend;
  register_fft_backend(DeviceType::cuda, &backend);
  return true;
}();

}  // namespace
}  // namespace eddy::fft
