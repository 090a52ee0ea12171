// gather, index_select and scatter_add. Operands arrive dense; indices are checked before any
// element moves, so a bad index throws instead of reading or writing out of bounds.

#include <cstring>

#include "eddy/backends/cpu/cpu_backend.h"
#include "eddy/backends/cpu/half.h"
#include "eddy/backends/cpu/kernel_util.h"

namespace eddy::cpu_kernels {
namespace {

std::vector<int64_t> read_indices(const Tensor& index, int64_t bound, std::string_view op) {
  std::vector<int64_t> values(index.numel());
  if (index.dtype() == DType::i64) {
    std::memcpy(values.data(), index.data<int64_t>(), values.size() * sizeof(int64_t));
  } else if (index.dtype() == DType::i32) {
    const int32_t* p = index.data<int32_t>();
    for (size_t i = 0; i < values.size(); ++i) values[i] = p[i];
  } else {
    throw Error(cat(op, ": index tensor must be int32 or int64, got ", index.dtype()));
  }
  for (int64_t& v : values) {
    if (v < 0) v += bound;
    EDDY_CHECK(v >= 0 && v < bound, op, ": index ", (v < 0 ? v - bound : v),
               " is out of range for a dimension of size ", bound);
  }
  return values;
}

// Splits a dense shape around `axis` into (outer, size, inner) element counts.
struct AxisSplit {
  int64_t outer = 1, size = 1, inner = 1;
};
AxisSplit split_at(const Shape& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.size = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

// Calls visit(source_offset, target_offset) for every element of a dense `index` tensor used
// along `axis`: the source offset addresses `index`'s own layout, the target offset the
// tensor of `target_shape` at the indexed position.
template <typename Visit>
void for_each_indexed(const Shape& index_shape, const std::vector<int64_t>& indices,
                      const Shape& target_shape, int64_t axis, Visit visit) {
  const int64_t rank = static_cast<int64_t>(index_shape.size());
  Shape target_strides = contiguous_strides(target_shape);
  Shape counter(rank, 0);
  const int64_t total = static_cast<int64_t>(indices.size());
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t target = 0;
    for (int64_t d = 0; d < rank; ++d) {
      target += (d == axis ? indices[flat] : counter[d]) * target_strides[d];
    }
    visit(flat, target);
    for (int64_t d = rank; d-- > 0;) {
      if (++counter[d] < index_shape[d]) break;
      counter[d] = 0;
    }
  }
}

}  // namespace

void CpuBackend::gather(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) {
  if (computed_in_float32({in}, out, [&](const auto& x, const Tensor& o) { gather(x[0], axis, index, o); })) return;
  auto indices = read_indices(index, in.shape()[axis], "gather");
  EDDY_DISPATCH_ALL(in.dtype(), T, {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    for_each_indexed(index.shape(), indices, in.shape(), axis,
                     [&](int64_t flat, int64_t source) { dst[flat] = src[source]; });
  });
}

void CpuBackend::index_select(const Tensor& in, int64_t axis, const Tensor& index,
                              const Tensor& out) {
  auto indices = read_indices(index, in.shape()[axis], "index_select");
  AxisSplit s = split_at(in.shape(), axis);
  const int64_t count = static_cast<int64_t>(indices.size());
  const size_t block = static_cast<size_t>(s.inner) * dtype_size(in.dtype());
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t k = 0; k < count; ++k) {
      std::memcpy(dst + (o * count + k) * block, src + (o * s.size + indices[k]) * block, block);
    }
  }
}

void CpuBackend::scatter_add(const Tensor& out, int64_t axis, const Tensor& index,
                             const Tensor& src) {
  if (is_half(out.dtype()) || is_half(src.dtype())) {  // adds into out: its values go to float32 and back
    const Tensor wide_out = Tensor::empty(out.shape(), DType::f32);
    copy(out, wide_out);
    scatter_add(wide_out, axis, index, float32_copy_if_half(src));
    copy(wide_out, out);
    return;
  }
  auto indices = read_indices(index, out.shape()[axis], "scatter_add");
  EDDY_DISPATCH_NUMERIC(out.dtype(), T, "scatter_add", {
    const T* from = src.data<T>();
    T* to = out.data<T>();
    for_each_indexed(index.shape(), indices, out.shape(), axis,
                     [&](int64_t flat, int64_t target) { to[target] += from[flat]; });
  });
}

}  // namespace eddy::cpu_kernels
