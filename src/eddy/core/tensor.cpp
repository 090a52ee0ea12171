#include "eddy/core/tensor.h"

#include <ostream>

namespace eddy {

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) {
    EDDY_CHECK(d >= 0, "empty: negative dimension in shape ", shape);
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate(static_cast<size_t>(eddy::numel(shape)) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

void Tensor::check_defined() const {
  EDDY_CHECK(impl_ != nullptr, "operation on an undefined tensor");
}

const Shape& Tensor::shape() const { check_defined(); return impl_->shape; }
const Shape& Tensor::strides() const { check_defined(); return impl_->strides; }
int64_t Tensor::offset() const { check_defined(); return impl_->offset; }
DType Tensor::dtype() const { check_defined(); return impl_->dtype; }
Device Tensor::device() const { check_defined(); return impl_->storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { check_defined(); return impl_->storage; }
int64_t Tensor::numel() const { return eddy::numel(shape()); }

int64_t Tensor::size(int64_t axis) const {
  return shape()[normalize_axis(axis, dim(), "size")];
}

bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  int64_t expected = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 1) continue;
    if (impl_->strides[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  check_defined();
  EDDY_CHECK(device().type == DeviceType::cpu, "data(): tensor lives on ", device(),
             "; copy it to the CPU first");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * dtype_size(impl_->dtype);
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

Tensor shallow_alias(const Tensor& tensor) {
  return Tensor(std::make_shared<TensorImpl>(*tensor.impl()));
}

}  // namespace eddy
