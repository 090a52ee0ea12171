// 16-bit products on oneDNN's matmul primitive. Widening bfloat16 operands to float32 made a
// product under autocast slower than the float32 one it replaced; oneDNN multiplies bfloat16 in
// the CPU's own instructions (AMX tiles or AVX-512 BF16 where present), accumulating in float32.

#include <omp.h>

#include <dnnl.hpp>
#include <optional>

#include "eddy/backends/backend.h"
#include "eddy/backends/cpu/blas_layout.h"
#include "eddy/backends/cpu/half.h"
#include "eddy/core/error.h"

namespace eddy::cpu_kernels {
namespace {

using dnnl::memory;

memory::data_type onednn_type(DType dtype) {
  switch (dtype) {
    case DType::bf16: return memory::data_type::bf16;
    case DType::f16: return memory::data_type::f16;
    default: return memory::data_type::f32;
  }
}

// The [rows, cols] matrix of a batch element of t: its last two dimensions' strides.
memory::desc matrix_desc(const Tensor& t, int64_t rows, int64_t cols) {
  const int64_t rank = t.dim();
  return memory::desc({rows, cols}, onednn_type(t.dtype()), memory::dims{t.strides()[rank - 2], t.strides()[rank - 1]});
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The product's primitive, or none where oneDNN has only its reference loops for these dtypes
// and layouts (float16 before AVX-512 FP16 support, for one), or takes no such layout at all
// (overlapping rows, from memory shared through DLPack): the float32 route serves those.
std::optional<dnnl::matmul> native_product(const Tensor& a, const Tensor& b, const Tensor& out, int64_t n, int64_t m,
                                           int64_t k, bool accumulate) {
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops sum_onto_out;
    sum_onto_out.append_sum(1.0f);
    attr.set_post_ops(sum_onto_out);
  }
  try {
    const dnnl::matmul::desc product(matrix_desc(a, n, k), matrix_desc(b, k, m), matrix_desc(out, n, m));
    const dnnl::matmul::primitive_desc pd(product, attr, cpu_engine());
    if (std::string_view(pd.impl_info_str()).starts_with("ref")) return std::nullopt;
    return dnnl::matmul(pd);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

}  // namespace

bool native_half_matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  if (!is_half(a.dtype()) || a.dtype() != b.dtype() || (out.dtype() != a.dtype() && out.dtype() != DType::f32)) {
    return false;
  }
  const int64_t rank = out.dim();
  const int64_t n = out.shape()[rank - 2], m = out.shape()[rank - 1], k = a.shape()[rank - 1];
  if (n == 0 || m == 0 || k == 0) return false;
  // oneDNN caches primitives by their description, so one made again per call is a lookup.
  const std::optional<dnnl::matmul> product = native_product(a, b, out, n, m, k, accumulate);
  if (!product) return false;
  give_threads_signal_stacks();
  // The split of the inner dimension across threads changes the sums' order.
  if (!omp_in_parallel()) note_thread_dependent_kernel();
  memory a_matrix(matrix_desc(a, n, k), cpu_engine(), nullptr);
  memory b_matrix(matrix_desc(b, k, m), cpu_engine(), nullptr);
  memory out_matrix(matrix_desc(out, n, m), cpu_engine(), nullptr);
  thread_local dnnl::stream stream(cpu_engine());
  const int64_t element = dtype_size(a.dtype()), out_element = dtype_size(out.dtype());
  for_each_batch_matrix(a, b, out, [&](int64_t off_a, int64_t off_b, int64_t off_out) {
    a_matrix.set_data_handle(static_cast<char*>(a.raw_data()) + off_a * element);
    b_matrix.set_data_handle(static_cast<char*>(b.raw_data()) + off_b * element);
    out_matrix.set_data_handle(static_cast<char*>(out.raw_data()) + off_out * out_element);
    product->execute(stream, {{DNNL_ARG_SRC, a_matrix}, {DNNL_ARG_WEIGHTS, b_matrix}, {DNNL_ARG_DST, out_matrix}});
  });
  stream.wait();
  return true;
}

}  // namespace eddy::cpu_kernels
