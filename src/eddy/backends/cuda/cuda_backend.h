#pragma once
// The CUDA backend: eddy's eager kernels on NVIDIA GPUs. Elementwise, reduction, indexing and
// random kernels are CUDA templates (kernel_source.cpp) that NVRTC compiles for the GPU at hand
// the first time each instantiation is used; matrix products go through cuBLAS. Everything runs
// on the device's one stream (driver.h), so the host waits only where it reads values back.

#include <string>
#include <vector>

#include "eddy/core/allocator.h"
#include "eddy/core/backend.h"

namespace eddy::cuda {

class CudaBackend final : public Backend {
 public:
  void copy(const Tensor& src, const Tensor& out) override;
  void fill(const Tensor& out, std::complex<double> value) override;
  void unary(UnaryKernel kind, const Tensor& in, const Tensor& out) override;
  void apply(const ArrayFunction& function, const Tensor& in, const Tensor& out) override;
  void binary(BinaryKernel kind, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void where(const Tensor& condition, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void reduce(ReduceKernel kind, const Tensor& in, const std::vector<int64_t>& axes, const Tensor& out) override;
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) override;
  void gather(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) override;
  void index_select(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) override;
  void scatter_add(const Tensor& out, int64_t axis, const Tensor& index, const Tensor& src) override;
  void arange(const Tensor& out, double start, double step) override;
  void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) override;
  void random_normal(const Tensor& out, uint64_t seed, uint64_t offset) override;
  void upload(const Tensor& host, const Tensor& device_out) override;
  void download(const Tensor& device_in, const Tensor& host_out) override;
  void synchronize(Device device) override;
  std::string unavailable_reason(int index) const override;
  intptr_t stream_handle(int index) const override;
};

// Device `index`'s caching allocator (its statistics, empty_cache).
Allocator& device_allocator(int index);

// The name expression of every kernel instantiation the backend can ask for, for the test that
// has NVRTC compile them all on machines without a GPU.
std::vector<std::string> all_kernel_names();

}  // namespace eddy::cuda
