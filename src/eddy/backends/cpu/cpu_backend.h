#pragma once
// The CPU backend: OpenMP-threaded, Eigen-vectorised elementwise kernels and OpenBLAS GEMM.

#include "eddy/backends/backend.h"

namespace eddy::cpu_kernels {

class CpuBackend final : public Backend {
 public:
  void copy(const Tensor& src, const Tensor& out) override;
  void fill(const Tensor& out, std::complex<double> value) override;
  void unary(UnaryKernel kind, const Tensor& in, const Tensor& out) override;
  void apply(const ArrayFunction& function, const Tensor& in, const Tensor& out) override;
  void binary(BinaryKernel kind, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void where(const Tensor& condition, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void reduce(ReduceKernel kind, const Tensor& in, const std::vector<int64_t>& axes,
              const Tensor& out) override;
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) override;
  void gather(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) override;
  void index_select(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) override;
  void scatter_add(const Tensor& out, int64_t axis, const Tensor& index, const Tensor& src) override;
  void arange(const Tensor& out, double start, double step) override;
  void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) override;
  void random_normal(const Tensor& out, uint64_t seed, uint64_t offset) override;
  bool has(OptionalKernel) const override { return true; }
  void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                        const Tensor& packed) override;
  void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                 const Tensor& packed, const Tensor& d_packed, const Tensor& dq, const Tensor& dk,
                                 const Tensor& dv) override;
  void normalize_last_axis(const Tensor& x, double eps, bool centred, const Tensor& out) override;
};

}  // namespace eddy::cpu_kernels
