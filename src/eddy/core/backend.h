#pragma once
// The kernel interface a device implements. Kernels know nothing of op semantics (shapes are
// already checked, broadcasting is already expressed as zero strides, autodiff happens above);
// a new device plugs in by implementing this class and calling register_backend. The interface
// and the registry are core's, like the allocators' (core/storage.h), so that Tensor's own
// members (copy_, fill_, to_vector) reach kernels without depending on a layer above; the
// implementations are the backends layer's (backends/cpu/), which registers them when linked.

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy {

enum class UnaryKernel { neg, exp, log, sin, cos, tanh, gelu, sqrt, abs, sign, real, imag, conj, angle };
enum class BinaryKernel { add, sub, mul, div, pow, maximum, minimum, eq, ne, lt, le, gt, ge, complex };
enum class ReduceKernel { sum, prod, max, min };

// An elementwise function as a plain loop over dense arrays, one per dtype it accepts (null for
// the others). This is how a primitive brings its own CPU kernel, declared with the rest of it,
// where the kernels above are the backend's tuned ones.
struct ArrayFunction {
  void (*f32)(const float* in, float* out, int64_t n) = nullptr;
  void (*f64)(const double* in, double* out, int64_t n) = nullptr;
  void (*c64)(const std::complex<float>* in, std::complex<float>* out, int64_t n) = nullptr;
  void (*c128)(const std::complex<double>* in, std::complex<double>* out, int64_t n) = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // out[i] = cast(src[i]); src has out's shape, with any strides (zero or negative included).
  virtual void copy(const Tensor& src, const Tensor& out) = 0;
  virtual void fill(const Tensor& out, std::complex<double> value) = 0;
  // Operands have out's shape (broadcast views); out is dense.
  virtual void unary(UnaryKernel kind, const Tensor& in, const Tensor& out) = 0;
  // `function` over dense `in` (of out's shape and dtype), on the host; for CPU tensors only.
  virtual void apply(const ArrayFunction& function, const Tensor& in, const Tensor& out) = 0;
  virtual void binary(BinaryKernel kind, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  virtual void where(const Tensor& condition, const Tensor& a, const Tensor& b,
                     const Tensor& out) = 0;
  // Reduces `in` over the sorted `axes`; out is dense with in's shape and 1 on those axes.
  virtual void reduce(ReduceKernel kind, const Tensor& in, const std::vector<int64_t>& axes,
                      const Tensor& out) = 0;
  // out[..., n, m] = a[..., n, k] @ b[..., k, m]; a and b are broadcast to out's batch shape.
  // With `accumulate`, out += a @ b: out holds an addend, which the product is summed onto in the
  // GEMM's own write of out (BLAS's beta = 1) instead of in a pass of its own.
  virtual void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) = 0;
  // torch.gather semantics: out[i][j] = in[i][index[i][j]] along `axis` (index has out's shape).
  virtual void gather(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) = 0;
  // out[.., k, ..] = in[.., index[k], ..] along `axis`; index is 1-D.
  virtual void index_select(const Tensor& in, int64_t axis, const Tensor& index,
                            const Tensor& out) = 0;
  // out[.., index[i][j], ..] += src[i][j] along `axis`; index has src's shape.
  virtual void scatter_add(const Tensor& out, int64_t axis, const Tensor& index,
                           const Tensor& src) = 0;
  // out[i] = start + i * step.
  virtual void arange(const Tensor& out, double start, double step) = 0;
  // Counter-based draws: element i uses Philox counter `offset + i` under key `seed`.
  virtual void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) = 0;
  virtual void random_normal(const Tensor& out, uint64_t seed, uint64_t offset) = 0;

  // Kernels a device may lack, whose callers then compose the same function of ops: a backend
  // says which it has, and keeps the refusing defaults of the others.
  enum class OptionalKernel { causal_attention, normalize_last_axis };
  virtual bool has(OptionalKernel) const { return false; }

  // Causal attention in blocks, with the softmax taken online (FlashAttention, Dao et al. 2022),
  // so that no [T, S] matrix is stored. q [B, H, T, D], k and v [B, Hkv, S, D] with S >= T:
  // query t sees keys up to S - T + t, and head h reads key/value head h / (H / Hkv). The scores
  // are q k^T * scale. `packed` [B, H, T, D + 1] receives the output in its first D columns and
  // each row's log-sum-exp of the visible scores in the last. q, k and v may be any views, as
  // matmul's operands (heads split from a [B, T, H, D] projection are, and the CPU reads them in
  // place); the other operands are dense.
  virtual void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                const Tensor& packed);
  // The gradients of that attention for the cotangent `d_packed` of `packed` (both [B, H, T,
  // D + 1]; the log-sum-exp column's cotangent included): dq, dk and dv, dense, of q's, k's
  // and v's shapes.
  virtual void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                         const Tensor& packed, const Tensor& d_packed, const Tensor& dq,
                                         const Tensor& dk, const Tensor& dv);

  // Each row along the last axis of x normalised: (x - mean) / sqrt(mean((x - mean)^2) + eps)
  // when `centred` (LayerNorm's), x / sqrt(mean(x^2) + eps) otherwise (RMSNorm's). x is float32
  // or float64, any view; out is dense, of x's shape.
  virtual void normalize_last_axis(const Tensor& x, double eps, bool centred, const Tensor& out);

  // For devices with memory of their own (the CPU needs neither): dense copies between a host
  // tensor and one of this device, of one shape and dtype. download returns once the values are
  // on the host.
  virtual void upload(const Tensor& host, const Tensor& device_out);
  virtual void download(const Tensor& device_in, const Tensor& host_out);
  // Returns once the device has finished the work queued so far (for timing; reading values
  // waits by itself).
  virtual void synchronize(Device) {}
  // Empty when device `index` of this type can be used; otherwise why not.
  virtual std::string unavailable_reason(int index) const { return {}; }
  // The stream the device's work is queued on, as DLPack exchanges name it (0: none).
  virtual intptr_t stream_handle(int index) const { return 0; }
};

// Empty when tensors can live on `device`; otherwise why not: a build without its backend, no
// driver, no such device.
std::string device_unavailable_reason(Device device);

// A dense host copy of `tensor` (itself when it is a dense host tensor already), without autodiff
// state: how core and the ops read values from any device.
Tensor host_copy(const Tensor& tensor);
// A dense copy of `tensor` on `device`, through the host, without autodiff state: how values made
// on the host (a vector, a file's bytes) reach a device, and the to_device primitive's kernel.
Tensor device_copy(const Tensor& tensor, Device device);
// The bytes of `tensor`'s elements in row-major order (read through host_copy): a key for
// values that compare equal bit for bit.
std::string element_bytes(const Tensor& tensor);

// The kernels registered for the device's type; throws when none are.
Backend& backend_for(Device device);
// Whether `device` has `kernel` (false for a device without a backend, whose tensors can still be
// abstract ones a trace records).
bool device_has(Device device, Backend::OptionalKernel kernel);
void register_backend(DeviceType type, Backend* backend);

}  // namespace eddy
