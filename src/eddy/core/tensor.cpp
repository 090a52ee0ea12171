#include "eddy/core/tensor.h"

#include <algorithm>
#include <iomanip>
#include <limits>
#include <ostream>
#include <type_traits>

#include "eddy/core/autograd.h"
#include "eddy/core/backend.h"
#include "eddy/core/checked_size.h"
#include "eddy/core/distribution.h"
#include "eddy/core/memory.h"
#include "eddy/core/tracing.h"

namespace eddy {

namespace {
// A dense row-major tensor over `storage`, which the caller sized for `shape` and `dtype`.
Tensor dense_over(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

size_t bytes_for(const Shape& shape, DType dtype, std::string_view op) {
  for (int64_t d : shape) EDDY_CHECK(d >= 0, op, ": negative dimension in shape ", shape);
  const std::optional<int64_t> bytes = checked_byte_size(shape, dtype);
  EDDY_CHECK(bytes, op, ": shape ", shape, " of ", dtype_name(dtype), " is too large to address (2^63 bytes or more)");
  return static_cast<size_t>(*bytes);
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  const size_t bytes = bytes_for(shape, dtype, "empty");
  // More than the machine has is refused with the shape and both sizes, rather than a bare
  // std::bad_alloc (eddy.ones([100000, 100000]) in Python raised MemoryError('std::bad_alloc')).
  if (device == cpu()) {
    static const UsableMemory memory = usable_memory();  // asked once: every op allocates here
    EDDY_CHECK(memory.bytes == 0 || bytes <= static_cast<uint64_t>(memory.bytes), "a tensor of shape ", shape, " of ",
               dtype_name(dtype), " needs ", memory_text(static_cast<double>(bytes)), usable_memory_note());
  }
  return dense_over(Storage::allocate(bytes, device), shape, dtype);
}

Tensor Tensor::abstract(const Shape& shape, DType dtype, Device device) {
  return dense_over(Storage::abstract(bytes_for(shape, dtype, "abstract"), device), shape, dtype);
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
bool Tensor::is_abstract() const { return storage()->is_abstract(); }

int64_t Tensor::size(int64_t axis) const {
  return shape()[normalize_axis(axis, dim(), "size")];
}

bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  // No element, no layout: a [6, 0] view with strides [1, 1] was not contiguous, so an MPI
  // collective refused a rank's empty part of an uneven split, and its peers waited for good.
  if (std::find(s.begin(), s.end(), 0) != s.end()) return true;
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
  if (const Distribution* layout = distribution_of(*this)) {
    throw Error(cat("data(): the tensor of shape ", shape(), " is distributed (", to_string(layout->placements),
                "); its values are on the ranks: read this rank's part with dist::to_local or the whole with "
                "dist::full_tensor"));
  }
  EDDY_CHECK(!is_abstract(), "data(): the tensor of shape ", shape(), " is abstract (made by abstract "
             "tracing): it has a shape and a dtype but no values");
  EDDY_CHECK(device().type == DeviceType::cpu, "data(): tensor lives on ", device(),
             "; copy it to the CPU first");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * dtype_size(impl_->dtype);
}

void* element_address(const Tensor& tensor) {
  EDDY_CHECK(!tensor.is_abstract(), "the tensor of shape ", tensor.shape(), " is abstract (made by abstract tracing) "
             "and has no values");
  return static_cast<char*>(tensor.storage()->data()) + tensor.offset() * dtype_size(tensor.dtype());
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  // A view past its storage read or wrote outside it (a public function: {100000} of a 4-element
  // tensor segfaulted in fill_).
  EDDY_CHECK(strides.size() == shape.size(), "make_view: ", strides.size(), " strides for the shape ", shape);
  if (const std::shared_ptr<Storage>& storage = base.storage(); storage && numel(shape) > 0) {
    int64_t lowest = offset, highest = offset;
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t extent = (shape[d] - 1) * strides[d];
      (extent < 0 ? lowest : highest) += extent;
    }
    const auto available = static_cast<int64_t>(storage->bytes() / dtype_size(base.dtype()));
    EDDY_CHECK(lowest >= 0 && highest < available, "make_view: shape ", shape, " with strides ", to_string(strides),
               " from offset ", offset, " reaches elements ", lowest, " to ", highest, " of a storage of ", available,
               " ", base.dtype(), " elements");
  }
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

const std::shared_ptr<const ValueIdentity>& value_identity(const Tensor& tensor) {
  std::shared_ptr<const ValueIdentity>& identity = tensor.impl()->identity;
  if (!identity) identity = std::make_shared<const ValueIdentity>();
  return identity;
}

namespace detail {
Tensor broadcast_view(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  const size_t rank = shape.size(), lead = rank - t.shape().size();
  Shape strides(rank, 0);
  for (size_t i = 0; i < t.shape().size(); ++i) {
    strides[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return make_view(t, shape, strides, t.offset());
}
}  // namespace detail

// ---- in-place writes and host reads: straight to the device's kernels, outside dispatch ----
namespace {
// The first and last storage offsets a view reaches; {1, 0} (nothing) for an empty one.
std::pair<int64_t, int64_t> reach(const Tensor& t) {
  int64_t first = t.offset(), last = t.offset();
  for (size_t i = 0; i < t.shape().size(); ++i) {
    if (t.shape()[i] == 0) return {1, 0};
    const int64_t span = (t.shape()[i] - 1) * t.strides()[i];
    (span < 0 ? first : last) += span;
  }
  return {first, last};
}

// The first and last bytes a non-empty view reaches in memory.
std::pair<uintptr_t, uintptr_t> bytes_reached(const Tensor& t) {
  const auto [first, last] = reach(t);
  const auto item = static_cast<int64_t>(dtype_size(t.dtype()));
  const auto start = reinterpret_cast<uintptr_t>(element_address(t));
  return {start + static_cast<uintptr_t>((first - t.offset()) * item),
          start + static_cast<uintptr_t>((last - t.offset()) * item + item - 1)};
}

// Whether a copy from `source` into `target`, element by element, could overwrite elements of
// `source` before it reads them (x[1:4] = x[0:3]): two different views of memory whose byte
// ranges meet. By address, not by storage: a NumPy array over a tensor's memory comes back
// through as_tensor as a storage of its own (t[1:] = t.numpy()[:-1] came out all t[0]).
// Conservative: interleaved views that share no element also count.
bool copy_may_read_its_writes(const Tensor& target, const Tensor& source) {
  if (target.numel() == 0 || source.numel() == 0) return false;  // an empty one may have no memory
  if (element_address(target) == element_address(source) && target.strides() == source.strides() &&
      target.dtype() == source.dtype()) {
    return false;
  }
  const auto [target_first, target_last] = bytes_reached(target);
  const auto [source_first, source_last] = bytes_reached(source);
  return target_first <= source_last && source_first <= target_last;
}

void check_writable(const Tensor& t, std::string_view op) {
  EDDY_CHECK(!(GradMode::enabled() && t.requires_grad()), op,
             ": in-place write to a tensor that requires grad; do it inside a NoGradGuard");
  EDDY_CHECK(!t.is_abstract(), op, ": the tensor of shape ", t.shape(), " is abstract (made by abstract "
             "tracing) and has no elements to write");
  // Elements that share memory (an expanded view) would each take the last value written there.
  for (int64_t axis = 0; axis < t.dim(); ++axis) {
    EDDY_CHECK(t.strides()[axis] != 0 || t.shape()[axis] <= 1, op, ": the tensor of shape ", t.shape(),
               " repeats its elements along axis ", axis, " (a broadcast view, strides ", t.strides(),
               "), so several of them are one place in memory; write into a tensor of its own (contiguous(t))");
  }
}

// A distributed target takes the source's local part when both are laid out alike; an ordinary
// source is every rank's whole value, of which each rank keeps its part (a checkpoint loaded into
// sharded parameters), or a single value for every element.
void copy_to_distributed(const Tensor& target, const Tensor& source) {
  const Distribution& layout = *distribution_of(target);
  if (const Distribution* from = distribution_of(source)) {
    EDDY_CHECK(from->mesh == layout.mesh && from->placements == layout.placements && source.shape() == target.shape(),
               "copy_: the distributed source ", source.shape(), " placed ", to_string(from->placements),
               " differs from the target ", target.shape(), " placed ", to_string(layout.placements),
               "; dist::reshard it first");
    Tensor local = layout.local;
    local.copy_(from->local);
    return;
  }
  for (const Placement& placement : layout.placements) {
    EDDY_CHECK(!placement.is_partial(), "copy_: the target is partial (", to_string(layout.placements),
               "); dist::reshard it to Replicate or Shard first");
  }
  EDDY_CHECK(broadcast_shapes(source.shape(), target.shape(), "copy_") == target.shape(), "copy_: a source of shape ",
             source.shape(), " does not broadcast to the target's ", target.shape());
  // The whole value (broadcast), which every rank holds: each keeps its own block of it.
  const Tensor whole = detail::broadcast_view(source, target.shape());
  Tensor local = layout.local;
  int64_t offset = whole.offset();
  for (size_t axis = 0; axis < layout.placements.size(); ++axis) {
    const Placement& placement = layout.placements[axis];
    if (!placement.is_shard()) continue;
    const auto tensor_axis = static_cast<size_t>(placement.axis);
    const int64_t first =
        shard_range(whole.shape()[tensor_axis], layout.mesh_shape[axis], layout.coordinates[axis]).first;
    offset += first * whole.strides()[tensor_axis];
  }
  local.copy_(make_view(whole, local.shape(), whole.strides(), offset));
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& source) {
  if (const Distribution* layout = distribution_of(*this)) {
    check_writable(layout->local, "copy_");
    layout->reduced.reset();
    copy_to_distributed(*this, source);
    return *this;
  }
  // The capture's refusal first: inside a traced function it says what to do instead.
  if (TraceRecorder* recorder = active_trace_recorder()) recorder->inplace_write(*this, "copy_");
  check_writable(*this, "copy_");
  if (const Distribution* from = distribution_of(source)) {
    EDDY_CHECK(whole_on_every_rank(*from), "copy_: the source of shape ", source.shape(), " is distributed (",
               to_string(from->placements), ") and the target is an ordinary tensor; copy dist::full_tensor(source)");
    return copy_(from->local);
  }
  EDDY_CHECK(source.device() == device(), "copy_: source is on ", source.device(), ", target on ",
             device());
  EDDY_CHECK(!is_complex(source.dtype()) || is_complex(dtype()), "copy_: a ", source.dtype(), " source into a ",
             dtype(), " tensor would drop its imaginary parts; copy real(source) (or imag) if that is meant");
  // A tensor the traced function did not read before, written from a value of the trace.
  EDDY_CHECK(!source.is_abstract() || !active_trace_recorder(), "compile: the traced function writes in place (copy_) "
             "to a tensor of shape ", shape(), " from a value of the trace; run in-place updates (an optimiser step) "
             "outside the compiled function, or build the tensor with ops");
  EDDY_CHECK(!source.is_abstract(), "copy_: the source of shape ", source.shape(), " is abstract (made by "
             "abstract tracing) and has no values");
  Shape target = shape();
  // The source broadcasts to the target's shape, never beyond it: [2, 4] into a row of 4 would
  // have been written past the row's end.
  EDDY_CHECK(broadcast_shapes(source.shape(), target, "copy_") == target, "copy_: a source of shape ", source.shape(),
             " does not broadcast to the target's shape ", target);
  Backend& backend = backend_for(device());
  Tensor from = detail::broadcast_view(source, target);
  if (copy_may_read_its_writes(*this, from)) {
    Tensor unaliased = Tensor::empty(source.shape(), source.dtype(), source.device());
    backend.copy(source, unaliased);
    from = detail::broadcast_view(unaliased, target);
  }
  backend.copy(from, *this);
  if (storage()) storage()->note_write();
  return *this;
}

Tensor& Tensor::fill_(std::complex<double> value) {
  if (const Distribution* layout = distribution_of(*this)) {
    for (const Placement& placement : layout->placements) {
      EDDY_CHECK(!placement.is_partial(), "fill_: the tensor is partial (", to_string(layout->placements),
                 "); dist::reshard it to Replicate or Shard first");
    }
    Tensor local = layout->local;
    local.fill_(value);
    return *this;
  }
  if (TraceRecorder* recorder = active_trace_recorder()) recorder->inplace_write(*this, "fill_");
  check_writable(*this, "fill_");
  require_value_fits("fill_", value, dtype());
  backend_for(device()).fill(*this, value);
  if (storage()) storage()->note_write();
  return *this;
}

template <ElementType T>
std::vector<T> Tensor::to_vector() const {
  if (const Distribution* layout = distribution_of(*this)) {
    EDDY_CHECK(whole_on_every_rank(*layout), "to_vector/item: the distributed tensor of shape ", shape(), " is placed ",
               to_string(layout->placements), ", so no rank holds all of it; read dist::full_tensor(t) or this "
               "rank's part, dist::to_local(t)");
    return layout->local.to_vector<T>();
  }
  if (TraceRecorder* recorder = active_trace_recorder()) recorder->host_read(*this, "to_vector/item");
  EDDY_CHECK(!is_abstract(), "to_vector/item: the tensor of shape ", shape(), " is abstract (made by "
             "abstract tracing) and has no values to read; an abstractly traced function cannot depend on "
             "them");
  const Tensor source = device().type == DeviceType::cpu ? *this : host_copy(*this);
  // A conversion that would lose the value is refused, as PyTorch's item<T>() refuses it: a complex
  // value's imaginary part, and for an integer type a NaN, an infinity or a value past its range
  // (undefined behaviour in C++; 1e20 came back as -2^31).
  constexpr bool to_complex = std::is_same_v<T, c64> || std::is_same_v<T, c128>;
  constexpr bool to_integer = std::is_integral_v<T> && !std::is_same_v<T, bool>;
  if ((!to_complex && is_complex(dtype())) || (to_integer && is_inexact(dtype()))) {
    Tensor wide = Tensor::empty(shape(), DType::c128);
    backend_for(cpu()).copy(source, wide);
    const c128* values = wide.data<c128>();
    for (int64_t i = 0; i < numel(); ++i) {
      EDDY_CHECK(values[i].imag() == 0, "to_vector/item: element ", i, " of the ", dtype(), " tensor is ", values[i],
                 ", whose imaginary part ", dtype_of<T>(), " cannot hold; take real() or abs() first");
      if constexpr (to_integer) {
        const double real = values[i].real(), lowest = static_cast<double>(std::numeric_limits<T>::min());
        EDDY_CHECK(real >= lowest && real < -lowest, "to_vector/item: element ", i, " of the ", dtype(), " tensor is ",
                   real, ", which ", dtype_of<T>(), " cannot hold");
      }
    }
  }
  if constexpr (to_integer) {
    // An int64 read as int32 wrapped around (5e9 came back 705032704).
    if (dtype() == DType::i64 && sizeof(T) < sizeof(int64_t)) {
      const std::vector<int64_t> values = to_vector<int64_t>();
      for (size_t i = 0; i < values.size(); ++i) {
        EDDY_CHECK(values[i] >= std::numeric_limits<T>::min() && values[i] <= std::numeric_limits<T>::max(),
                   "to_vector/item: element ", i, " of the int64 tensor is ", values[i], ", which ", dtype_of<T>(),
                   " cannot hold");
      }
    }
  }
  Tensor dense = Tensor::empty(shape(), dtype_of<T>());
  backend_for(cpu()).copy(source, dense);
  const T* data = dense.data<T>();
  return std::vector<T>(data, data + numel());
}

template <ElementType T>
T Tensor::item() const {
  EDDY_CHECK(numel() == 1, "item: tensor has shape ", shape(), ", not a single element");
  return to_vector<T>()[0];
}

#define EDDY_INSTANTIATE(T)                                \
  template std::vector<T> Tensor::to_vector<T>() const;    \
  template T Tensor::item<T>() const;
EDDY_INSTANTIATE(float)
EDDY_INSTANTIATE(double)
EDDY_INSTANTIATE(c64)
EDDY_INSTANTIATE(c128)
EDDY_INSTANTIATE(int32_t)
EDDY_INSTANTIATE(int64_t)
EDDY_INSTANTIATE(bool)
EDDY_INSTANTIATE(bfloat16)
EDDY_INSTANTIATE(float16)
#undef EDDY_INSTANTIATE

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "Tensor(undefined)";
  out << "Tensor(shape=" << t.shape() << ", dtype=" << t.dtype();
  if (t.device() != cpu()) out << ", device=" << t.device();
  if (t.requires_grad()) out << ", requires_grad";
  if (t.is_abstract()) return out << ", abstract)";
  out << ", values=[";
  constexpr int64_t kShown = 8;
  const int64_t n = std::min(t.numel(), kShown);
  // The first elements in row-major order: a dense copy when the layout is not, then a 1-D view.
  Tensor dense = t.detach();
  if (!dense.is_contiguous()) {
    dense = Tensor::empty(t.shape(), t.dtype(), t.device());
    backend_for(t.device()).copy(t, dense);
  }
  Tensor head = make_view(dense, {n}, {1}, dense.offset());
  if (is_complex(t.dtype())) {
    auto values = head.to_vector<c128>();
    for (int64_t i = 0; i < n; ++i) out << (i ? ", " : "") << values[i];
  } else if (is_integral(t.dtype())) {  // whole, not rounded to six digits as floats are
    auto values = head.to_vector<int64_t>();
    for (int64_t i = 0; i < n; ++i) out << (i ? ", " : "") << values[i];
  } else {
    auto values = head.to_vector<double>();
    for (int64_t i = 0; i < n; ++i) out << (i ? ", " : "") << std::setprecision(6) << values[i];
  }
  if (t.numel() > kShown) out << ", ...";
  return out << "])";
}

}  // namespace eddy
