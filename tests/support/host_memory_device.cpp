#include "support/host_memory_device.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eddy/core/backend.h"
#include "eddy/core/error.h"
#include "eddy/core/storage.h"
#include "eddy/fft/fft_backend.h"

namespace eddy::testing {
namespace {

// The same elements as a CPU tensor: the view's storage wraps the cuda one's memory and keeps
// that storage alive.
Tensor host_view(const Tensor& t) {
  if (!t.defined()) return t;
  std::shared_ptr<Storage> storage = t.storage();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::wrap(storage->data(), storage->bytes(), cpu(), [storage](void*) {});
  impl->offset = t.offset();
  impl->shape = t.shape();
  impl->strides = t.strides();
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

std::atomic<int64_t> kernel_calls{0};

Backend& cpu_kernels() {
  ++kernel_calls;
  return backend_for(cpu());
}

class HostMemoryBackend final : public Backend {
 public:
  void copy(const Tensor& src, const Tensor& out) override { cpu_kernels().copy(host_view(src), host_view(out)); }
  void fill(const Tensor& out, std::complex<double> value) override { cpu_kernels().fill(host_view(out), value); }
  void unary(UnaryKernel kind, const Tensor& in, const Tensor& out) override {
    cpu_kernels().unary(kind, host_view(in), host_view(out));
  }
  void apply(const ArrayFunction& function, const Tensor& in, const Tensor& out) override {
    cpu_kernels().apply(function, host_view(in), host_view(out));
  }
  void binary(BinaryKernel kind, const Tensor& a, const Tensor& b, const Tensor& out) override {
    cpu_kernels().binary(kind, host_view(a), host_view(b), host_view(out));
  }
  void where(const Tensor& condition, const Tensor& a, const Tensor& b, const Tensor& out) override {
    cpu_kernels().where(host_view(condition), host_view(a), host_view(b), host_view(out));
  }
  void reduce(ReduceKernel kind, const Tensor& in, const std::vector<int64_t>& axes, const Tensor& out) override {
    cpu_kernels().reduce(kind, host_view(in), axes, host_view(out));
  }
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) override {
    cpu_kernels().matmul(host_view(a), host_view(b), host_view(out), accumulate);
  }
  void gather(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) override {
    cpu_kernels().gather(host_view(in), axis, host_view(index), host_view(out));
  }
  void index_select(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) override {
    cpu_kernels().index_select(host_view(in), axis, host_view(index), host_view(out));
  }
  void scatter_add(const Tensor& out, int64_t axis, const Tensor& index, const Tensor& src) override {
    cpu_kernels().scatter_add(host_view(out), axis, host_view(index), host_view(src));
  }
  void arange(const Tensor& out, double start, double step) override { cpu_kernels().arange(host_view(out), start, step); }
  bool has(OptionalKernel) const override { return true; }
  void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                        const Tensor& packed) override {
    cpu_kernels().causal_attention(host_view(q), host_view(k), host_view(v), scale, host_view(packed));
  }
  void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                 const Tensor& packed, const Tensor& d_packed, const Tensor& dq, const Tensor& dk,
                                 const Tensor& dv) override {
    cpu_kernels().causal_attention_backward(host_view(q), host_view(k), host_view(v), scale, host_view(packed),
                                            host_view(d_packed), host_view(dq), host_view(dk), host_view(dv));
  }
  void normalize_last_axis(const Tensor& x, double eps, bool centred, const Tensor& out) override {
    cpu_kernels().normalize_last_axis(host_view(x), eps, centred, host_view(out));
  }
  void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) override {
    cpu_kernels().random_uniform(host_view(out), seed, offset);
  }
  void random_normal(const Tensor& out, uint64_t seed, uint64_t offset) override {
    cpu_kernels().random_normal(host_view(out), seed, offset);
  }
  void upload(const Tensor& host, const Tensor& device_out) override { cpu_kernels().copy(host, host_view(device_out)); }
  void download(const Tensor& device_in, const Tensor& host_out) override {
    cpu_kernels().copy(host_view(device_in), host_out);
  }
  std::string unavailable_reason(int index) const override {
    return index < 2 ? "" : cat("the tests' stand-in GPUs are cuda:0 and cuda:1, not cuda:", index);
  }
};

class HostMemoryFft final : public fft::FftBackend {
 public:
  void c2c(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, bool forward) override {
    ++kernel_calls;
    fft::fft_backend_for(cpu()).c2c(host_view(in), host_view(out), axes, forward);
  }
  void r2c(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes) override {
    ++kernel_calls;
    fft::fft_backend_for(cpu()).r2c(host_view(in), host_view(out), axes);
  }
  void c2r(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, double scale) override {
    ++kernel_calls;
    fft::fft_backend_for(cpu()).c2r(host_view(in), host_view(out), axes, scale);
  }
};

Allocator& host_allocator(int) { return cpu_allocator(); }

}  // namespace

int64_t host_memory_device_kernel_calls() { return kernel_calls.load(); }

void install_host_memory_device() {
  static HostMemoryBackend backend;
  static HostMemoryFft fft;
  register_backend(DeviceType::cuda, &backend);
  fft::register_fft_backend(DeviceType::cuda, &fft);
  register_allocator(DeviceType::cuda, &host_allocator);
}

}  // namespace eddy::testing
