// Creation functions (constants: no inputs, so no derivatives).

#include <cstring>

#include "eddy/core/tracing.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"

namespace eddy {
using detail::backend_of;

Tensor full(const Shape& shape, std::complex<double> value, DType dtype, Device device) {
  Tensor out = Tensor::empty(shape, dtype, device);
  backend_of(out).fill(out, value);
  return out;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), like.dtype(), like.device()); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), like.dtype(), like.device()); }
Tensor full_like(const Tensor& like, std::complex<double> value) {
  return full(like.shape(), value, like.dtype(), like.device());
}
Tensor scalar(std::complex<double> value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}

Tensor arange(double start, double stop, double step, DType dtype, Device device) {
  EDDY_CHECK(step != 0, "arange: step must be non-zero");
  const double span = (stop - start) / step;
  const int64_t count = span > 0 ? static_cast<int64_t>(std::ceil(span)) : 0;
  Tensor out = Tensor::empty({count}, dtype, device);
  backend_of(out).arange(out, start, step);
  return out;
}

Tensor linspace(double start, double stop, int64_t count, DType dtype, Device device) {
  EDDY_CHECK(count >= 0, "linspace: count must be non-negative, got ", count);
  Tensor out = Tensor::empty({count}, dtype, device);
  backend_of(out).arange(out, start, count > 1 ? (stop - start) / static_cast<double>(count - 1) : 0.0);
  return out;
}

namespace {
Tensor draw(const Shape& shape, DType dtype, Generator* generator, bool normal) {
  if (TraceRecorder* recorder = active_trace_recorder()) recorder->random_draw(normal ? "randn" : "rand");
  EDDY_CHECK(is_floating(dtype), normal ? "randn" : "rand", ": dtype must be float32 or float64, got ",
             dtype);
  Generator& g = generator ? *generator : default_generator();
  Tensor out = Tensor::empty(shape, dtype);
  const uint64_t offset = g.advance(static_cast<uint64_t>(out.numel()));
  if (normal) {
    backend_of(out).random_normal(out, g.seed(), offset);
  } else {
    backend_of(out).random_uniform(out, g.seed(), offset);
  }
  return out;
}
}  // namespace

Tensor rand(const Shape& shape, DType dtype, Generator* generator) {
  return draw(shape, dtype, generator, false);
}
Tensor randn(const Shape& shape, DType dtype, Generator* generator) {
  return draw(shape, dtype, generator, true);
}

Tensor eye(int64_t n, DType dtype, Device device) {
  EDDY_CHECK(n >= 0, "eye: size must be non-negative, got ", n);
  Tensor out = zeros({n, n}, dtype, device);
  backend_of(out).fill(make_view(out, {n}, {n + 1}, 0), 1.0);
  return out;
}

Tensor from_buffer(const void* data, const Shape& shape, DType dtype) {
  Tensor out = Tensor::empty(shape, dtype);
  if (out.numel() > 0) std::memcpy(out.raw_data(), data, out.numel() * dtype_size(dtype));
  return out;
}

Tensor from_blob(void* data, const Shape& shape, DType dtype, std::function<void(void*)> release,
                 const Shape& strides) {
  Shape layout = strides.empty() ? contiguous_strides(shape) : strides;
  EDDY_CHECK(layout.size() == shape.size(), "from_blob: ", layout.size(), " strides for shape ", shape);
  int64_t extent = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    EDDY_CHECK(layout[d] >= 0, "from_blob: negative stride ", layout[d]);
    if (shape[d] > 0) extent += (shape[d] - 1) * layout[d];
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::wrap(data, extent * dtype_size(dtype), cpu(), std::move(release));
  impl->shape = shape;
  impl->strides = layout;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace eddy
