#pragma once
// Tensor: a cheap, shared handle to a strided view of a Storage, plus the autodiff state that
// rides along with it (the reverse-mode graph node and forward-mode tangents).

#include <complex>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "eddy/core/dtype.h"
#include "eddy/core/error.h"
#include "eddy/core/shape.h"
#include "eddy/core/storage.h"

namespace eddy {

struct AutogradMeta;  // defined in core/autograd.h
struct Distribution;  // defined in core/distribution.h
struct TensorImpl;
// An empty token whose address names a value while it lives (TensorImpl::identity).
struct ValueIdentity {};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Uninitialised dense storage.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = cpu());
  // A shape, dtype and device with no values (Storage::abstract): what abstract tracing computes
  // with. Reading or writing its elements is an error that says so.
  static Tensor abstract(const Shape& shape, DType dtype = DType::f32, Device device = cpu());

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t axis) const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  bool is_abstract() const;
  const std::shared_ptr<Storage>& storage() const;

  // Typed pointer to the first element (host memory only); T must match dtype().
  template <ElementType T>
  T* data() const;
  void* raw_data() const;
  // The single element of a one-element tensor, converted to T.
  template <ElementType T>
  T item() const;
  // A dense copy of the elements in row-major order, converted to T.
  template <ElementType T>
  std::vector<T> to_vector() const;

  // ---- autodiff state (core/autograd.h); backward(loss), grad(outputs, ...): autodiff/tape.h ----
  bool requires_grad() const;
  // Marks a leaf as a gradient target for backward(); only inexact dtypes can.
  Tensor& requires_grad_(bool enabled = true);
  bool is_leaf() const;
  // Gradient accumulated by backward() on a leaf; undefined until then.
  Tensor grad() const;
  void zero_grad();
  // Same data, cut from the graph and without tangents.
  Tensor detach() const;

  // Views and layout changes are ops (eddy/ops/ops.h: reshape(x, shape), transpose(x),
  // slice(x, ...), cast(x, dtype), ...), not members: Tensor is core's, and ops sit above it.

  // ---- in-place, outside autodiff (for optimisers and initialisers) ----
  // Overwrites this tensor's elements (through any view) with `source`, broadcast and cast.
  Tensor& copy_(const Tensor& source);
  Tensor& fill_(std::complex<double> value);

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  // True when both handles share the same underlying TensorImpl.
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  void check_defined() const;
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;       // in elements
  DType dtype = DType::f32;
  // Reverse mode: shared between aliases of the same value.
  std::shared_ptr<AutogradMeta> autograd;
  // Forward mode: one tangent per active jvp level, keyed by level id.
  std::vector<std::pair<int64_t, Tensor>> tangents;
  // Which value this is, for graph recorders (compiler/trace.cpp): shared by the handles of one
  // value (shallow_alias, detach), since autodiff makes fresh ones (tangent-stripped aliases)
  // that must resolve to the same graph value. Null until a recorder first meets the value.
  std::shared_ptr<const ValueIdentity> identity;
  // Set on a distributed tensor only (core/distribution.h): its storage is then abstract.
  std::shared_ptr<const Distribution> distribution;
  // The communicators (dist::Communicator, opaque here) over whose ranks every rank holds this
  // value alike: the distributed interpreter's replicated local parts, and a cotangent while the
  // backward pass that proved it alike runs its derivative rule. A sum over such a communicator
  // then sends nothing (dist/collectives.h). Helpers in core/distribution.h.
  std::vector<const void*> alike_across;
};

// The address of a tensor's first element in its device's own memory (a GPU address for a cuda
// tensor): what a device's kernels are handed. Host code reads through data<T>() instead.
void* element_address(const Tensor& tensor);

// A new TensorImpl over the same storage with the given layout; no autodiff state.
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);
// A new TensorImpl sharing storage, layout, autodiff state and identity (used to strip tangents).
Tensor shallow_alias(const Tensor& tensor);
// The token naming `tensor`'s value, made on first request and shared by its later aliases.
const std::shared_ptr<const ValueIdentity>& value_identity(const Tensor& tensor);

namespace detail {
// A view of `t` with `shape` through zero strides, for kernels (no autodiff; not an op).
Tensor broadcast_view(const Tensor& t, const Shape& shape);
}  // namespace detail

template <ElementType T>
T* Tensor::data() const {
  EDDY_CHECK(dtype() == dtype_of<T>(), "data<", dtype_name(dtype_of<T>()), ">(): tensor has dtype ",
             dtype());
  return static_cast<T*>(raw_data());
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

}  // namespace eddy
