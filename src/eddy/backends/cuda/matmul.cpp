// Matrix products on the GPU: cuBLAS's strided batched GEMM, over views where cuBLAS can read
// them as they are and over dense copies where it cannot.

#include <cublas_v2.h>

#include <complex>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "eddy/backends/cuda/cuda_backend.h"
#include "eddy/backends/cuda/driver.h"
#include "eddy/backends/cuda/cuda_libraries.h"
#include "eddy/backends/cuda/dynamic_library.h"
#include "eddy/backends/cuda/launch.h"

namespace eddy::cuda {
namespace {

// The cuBLAS calls eddy uses, bound on first use (dynamic_library.h).
struct Cublas {
  DynamicLibrary library{EDDY_CUBLAS_SONAME, EDDY_CUDA_LIBRARY_DIR};
  decltype(&cublasGetStatusString) status_string = nullptr;
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  // The C function, not the header's inline overload that takes the compute type as a cudaDataType.
  using GemmStridedBatchedEx =
      cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                     cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
                     cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(static_cast<GemmStridedBatchedEx*>(&cublasGemmStridedBatchedEx)) gemm_strided_batched = nullptr;

  Cublas() {
    library.bind(status_string, EDDY_CUDA_SYMBOL(cublasGetStatusString));
    library.bind(create, EDDY_CUDA_SYMBOL(cublasCreate));
    library.bind(set_stream, EDDY_CUDA_SYMBOL(cublasSetStream));
    library.bind(gemm_strided_batched, EDDY_CUDA_SYMBOL(cublasGemmStridedBatchedEx));
  }
};

const Cublas& cublas() { return opened<Cublas>("a matrix product on the GPU"); }

void check_blas(cublasStatus_t status, const char* call) {
  EDDY_CHECK(status == CUBLAS_STATUS_SUCCESS, "cuBLAS: ", call, " failed: ", cublas().status_string(status));
}

cublasHandle_t blas_handle(int device) {
  static std::mutex mutex;
  static std::map<int, cublasHandle_t> handles;  // kept for the process, as the contexts are
  std::lock_guard lock(mutex);
  cublasHandle_t& handle = handles[device];
  if (!handle) {
    use_device(device);
    check_blas(cublas().create(&handle), "cublasCreate");
    check_blas(cublas().set_stream(handle, reinterpret_cast<cudaStream_t>(stream(device))), "cublasSetStream");
  }
  return handle;
}

// One operand of a batched product as cuBLAS reads it: a column-major matrix, transposed or not.
struct BlasMatrix {
  const void* data;
  cublasOperation_t operation;
  int64_t leading;  // leading dimension
  int64_t batch_stride;
};

// A row-major rows x cols matrix with strides (row_stride, col_stride) read by cuBLAS as the
// column-major cols x rows matrix it is in memory, or as the transpose of a column-major one;
// nullopt when neither fits (the caller then copies it dense).
std::optional<BlasMatrix> blas_view(const void* data, int64_t rows, int64_t cols, int64_t row_stride,
                                    int64_t col_stride, int64_t batch_stride) {
  if (cols == 1) col_stride = 1;
  if (rows == 1) row_stride = std::max<int64_t>(cols, 1);
  constexpr int64_t kMaxLeading = std::numeric_limits<int>::max();  // cuBLAS takes an int
  if (row_stride > kMaxLeading || col_stride > kMaxLeading) return std::nullopt;
  if (col_stride == 1 && row_stride >= std::max<int64_t>(cols, 1)) {
    return BlasMatrix{data, CUBLAS_OP_N, row_stride, batch_stride};
  }
  if (cols == 1) row_stride = 1;
  if (row_stride == 1 && col_stride >= std::max<int64_t>(rows, 1)) {
    return BlasMatrix{data, CUBLAS_OP_T, col_stride, batch_stride};
  }
  return std::nullopt;
}

}  // namespace

void CudaBackend::matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int device = device_of(out);
  const DType dtype = out.dtype();
  EDDY_CHECK(is_inexact(dtype), "matmul on ", out.device(), ": cuBLAS multiplies float and complex matrices, not ",
             dtype, "; cast the operands to float32 or float64");
  const int64_t rank = out.dim();
  const int64_t n = out.shape()[rank - 2], m = out.shape()[rank - 1], k = a.shape()[a.dim() - 1];
  if (out.numel() == 0) return;
  if (k == 0) {
    if (!accumulate) fill(out, 0.0);
    return;
  }
  // The batch axes of a, b and out merged into one where they allow; otherwise a and b are
  // copied dense in out's batch shape.
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  auto with_batch = [&](const Tensor& t, int64_t rows, int64_t cols) {
    Shape shape = batch;
    shape.push_back(rows);
    shape.push_back(cols);
    return detail::broadcast_view(t, shape);
  };
  Tensor a_full = with_batch(a, n, k), b_full = with_batch(b, k, m);
  auto batch_layout = [&]() {
    Tensor a_batch = make_view(a_full, batch, Shape(a_full.strides().begin(), a_full.strides().end() - 2), a_full.offset());
    Tensor b_batch = make_view(b_full, batch, Shape(b_full.strides().begin(), b_full.strides().end() - 2), b_full.offset());
    Tensor o_batch = make_view(out, batch, Shape(out.strides().begin(), out.strides().end() - 2), out.offset());
    return layout_of<3>(batch, {&o_batch, &a_batch, &b_batch});
  };
  auto dense = [&](const Tensor& t) {
    Tensor copy = Tensor::empty(t.shape(), t.dtype(), t.device());
    this->copy(t, copy);
    return copy;
  };
  Layout<3> batches = batch_layout();
  if (batches.rank > 1) {
    a_full = dense(a_full);
    b_full = dense(b_full);
    batches = batch_layout();
  }
  EDDY_CHECK(batches.rank <= 1, "matmul on ", out.device(), ": the output's batch axes of ", out.shape(),
             " are not one run of memory");
  const int64_t count = batches.rank == 0 ? 1 : batches.shape[0];
  auto batch_stride = [&](int operand) { return batches.rank == 0 ? int64_t{0} : batches.strides[operand][0]; };
  auto view = [&](Tensor& t, int64_t rows, int64_t cols, int operand) {
    std::optional<BlasMatrix> matrix = blas_view(element_address(t), rows, cols, t.strides()[rank - 2],
                                                 t.strides()[rank - 1], batch_stride(operand));
    if (!matrix) {
      t = dense(t);
      matrix = blas_view(element_address(t), rows, cols, cols, 1, rows * cols * (batch_stride(operand) != 0));
    }
    return *matrix;
  };
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS computes it with B first.
  const BlasMatrix a_matrix = view(a_full, n, k, 1), b_matrix = view(b_full, k, m, 2);
  const cudaDataType_t type = dtype == DType::f32 ? CUDA_R_32F : dtype == DType::f64 ? CUDA_R_64F
                            : dtype == DType::c64 ? CUDA_C_32F : CUDA_C_64F;
  const bool single = dtype == DType::f32 || dtype == DType::c64;
  const cublasComputeType_t compute = single ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F;
  const std::complex<double> one_double = 1.0, zero_double = 0.0;
  const std::complex<float> one_float = 1.0f, zero_float = 0.0f;
  const void* alpha = single ? static_cast<const void*>(&one_float) : static_cast<const void*>(&one_double);
  const std::complex<double>& beta_double = accumulate ? one_double : zero_double;
  const std::complex<float>& beta_float = accumulate ? one_float : zero_float;
  const void* beta = single ? static_cast<const void*>(&beta_float) : static_cast<const void*>(&beta_double);
  cublasHandle_t handle = blas_handle(device);
  use_device(device);
  check_blas(cublas().gemm_strided_batched(handle, b_matrix.operation, a_matrix.operation, static_cast<int>(m),
                                           static_cast<int>(n), static_cast<int>(k), alpha, b_matrix.data, type,
                                           static_cast<int>(b_matrix.leading), b_matrix.batch_stride, a_matrix.data,
                                           type, static_cast<int>(a_matrix.leading), a_matrix.batch_stride, beta,
                                           element_address(out), type, static_cast<int>(out.strides()[rank - 2]),
                                           batch_stride(0), static_cast<int>(count), compute, CUBLAS_GEMM_DEFAULT),
             "cublasGemmStridedBatchedEx");
}

}  // namespace eddy::cuda
