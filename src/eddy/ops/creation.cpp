// Creation ops: primitives without inputs (and random draws, whose one input is a key), so that
// they go through dispatch like every op: a graph records them, abstract tracing makes them
// abstract, and a backend creates them on its device.

#include <cmath>
#include <cstring>

#include "eddy/core/tracing.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"

namespace eddy {
using detail::backend_of;
using detail::dense;

namespace {

void check_shape(std::string_view op, const Shape& shape) {
  for (int64_t d : shape) EDDY_CHECK(d >= 0, op, ": negative dimension in shape ", shape);
}

// A creation primitive: no inputs, so no derivatives, and its output described by its Attrs.
Primitive creation_primitive(std::string_view name, std::function<void(const Tensor&, const Attrs&)> fill) {
  Primitive p;
  p.name = name;
  p.arity = 0;
  p.cost = CostClass::cheap;
  p.infer = [name](Inputs, const Attrs& a) {
    check_shape(name, a.shape);
    return OutputSpec{a.shape, a.dtype};
  };
  p.eval = [fill = std::move(fill)](Inputs, const Attrs& a, const OutputSpec& spec) {
    Tensor out = Tensor::empty(spec.shape, spec.dtype, a.device);
    fill(out, a);
    return out;
  };
  return p;
}

const Primitive& full_p = register_primitive(creation_primitive(
    "full", [](const Tensor& out, const Attrs& a) { backend_of(out).fill(out, a.value); }));

const Primitive& arange_p = register_primitive(creation_primitive(
    "arange", [](const Tensor& out, const Attrs& a) { backend_of(out).arange(out, a.value.number.real(), a.scale); }));

const Primitive& eye_p = register_primitive(creation_primitive("eye", [](const Tensor& out, const Attrs& a) {
  const int64_t n = a.shape[0];
  backend_of(out).fill(out, 0.0);
  backend_of(out).fill(make_view(out, {n}, {n + 1}, 0), 1.0);
}));

// Draws from a key (random_key): element i depends only on the key's (seed, offset + i), so a
// draw in a captured graph gives the numbers of the eager one, and a key passed in as an input
// gives new numbers on every call.
Primitive random_primitive(std::string_view name, bool normal) {
  Primitive p;
  p.name = name;
  p.cost = CostClass::transcendental;
  p.constant_inputs = {0};
  p.infer = [name](Inputs in, const Attrs& a) {
    EDDY_CHECK(in[0].dtype() == DType::i64 && in[0].shape() == Shape{2}, name,
               ": the key must be an int64 tensor of shape [2] (seed, offset) from random_key, got ",
               in[0].dtype(), in[0].shape());
    EDDY_CHECK(is_floating(a.dtype), name, ": dtype must be float32 or float64, got ", a.dtype);
    check_shape(name, a.shape);
    return OutputSpec{a.shape, a.dtype};
  };
  p.eval = [normal](Inputs in, const Attrs&, const OutputSpec& spec) {
    // The key's elements, read inside the kernel: reading them through to_vector would report a
    // host read to a trace that captured the key as an input.
    const Tensor key = host_copy(in[0]);
    const int64_t* words = key.data<int64_t>();
    Tensor out = Tensor::empty(spec.shape, spec.dtype, in[0].device());
    const auto seed = static_cast<uint64_t>(words[0]), offset = static_cast<uint64_t>(words[1]);
    if (normal) {
      backend_of(out).random_normal(out, seed, offset);
    } else {
      backend_of(out).random_uniform(out, seed, offset);
    }
    return out;
  };
  return p;
}

const Primitive& uniform_p = register_primitive(random_primitive("uniform", false));
const Primitive& normal_p = register_primitive(random_primitive("normal", true));

Attrs output_attrs(const Shape& shape, DType dtype, Device device) {
  Attrs attrs;
  attrs.shape = shape;
  attrs.dtype = dtype;
  attrs.device = device;
  return attrs;
}

// [start, start + step, ...), `count` of them.
Tensor evenly_spaced(double start, double step, int64_t count, DType dtype, Device device) {
  Attrs attrs = output_attrs({count}, dtype, device);
  attrs.value = std::complex<double>(start);
  attrs.scale = step;
  return dispatch(arange_p, Inputs{}, attrs);
}

}  // namespace

Tensor full(const Shape& shape, std::complex<double> value, DType dtype, Device device) {
  require_value_fits("full", value, dtype);
  Attrs attrs = output_attrs(shape, dtype, device);
  attrs.value = value;
  return dispatch(full_p, Inputs{}, attrs);
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor zeros_like(const Tensor& like) { return full_like(like, 0.0); }
Tensor ones_like(const Tensor& like) { return full_like(like, 1.0); }
// A distributed `like` gives a tensor laid out alike (optimiser state follows its parameter),
// except that partial sums of a value other than zero would add up to more than it: those mesh
// axes hold it replicated instead.
Tensor full_like(const Tensor& like, std::complex<double> value) {
  if (const Distribution* layout = distribution_of(like)) {
    // `over`, not a copy: the copy kept `like`'s reduced part, which the interpreter then read
    // as the new tensor's values (relu of a partial sum returned the sum itself).
    Distribution filled = layout->over(full(layout->local.shape(), value, like.dtype(), like.device()));
    for (Placement& placement : filled.placements) {
      if (value != 0.0 && placement.kind == Placement::Kind::partial_sum) placement = Placement::replicate();
    }
    return make_distributed(like.shape(), std::move(filled));
  }
  return full(like.shape(), value, like.dtype(), like.device());
}
Tensor scalar(std::complex<double> value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}

Tensor arange(double start, double stop, double step, DType dtype, Device device) {
  EDDY_CHECK(step != 0, "arange: step must be non-zero");
  // NaN gave an empty tensor; an infinite or too large span, "negative dimension in shape".
  EDDY_CHECK(std::isfinite(start) && std::isfinite(stop) && std::isfinite(step), "arange: start, stop and step must "
             "be finite, got ", start, ", ", stop, " and ", step);
  const double span = (stop - start) / step;
  EDDY_CHECK(span < 0x1p62, "arange(", start, ", ", stop, ", ", step, ") has ", span, " elements, more than any tensor "
             "can hold");
  const int64_t count = span > 0 ? static_cast<int64_t>(std::ceil(span)) : 0;
  return evenly_spaced(start, step, count, dtype, device);
}

// As NumPy computes it: start + i * step, with the last point `stop` itself (the product can miss
// it by an ulp: linspace(-1, 1, 7) ended at 0.9999999999999999), and integers the floor of the
// float64 points (truncated, linspace(-1, 1, 7) as int64 was [-1, 0, 0, 0, 0, 0, 0]).
Tensor linspace(double start, double stop, int64_t count, DType dtype, Device device) {
  EDDY_CHECK(count >= 0, "linspace: count must be non-negative, got ", count);
  const double step = count > 1 ? (stop - start) / static_cast<double>(count - 1) : 0.0;
  if (!is_inexact(dtype)) {
    std::vector<int64_t> floors;
    for (int64_t i = 0; i < count; ++i) {
      // Rounded apart from the sum, as NumPy's multiply and add are: fused into one FMA, the middle
      // of linspace(-1, 1, 7) came out -5.6e-17, whose floor is -1.
      const volatile double offset = static_cast<double>(i) * step;
      floors.push_back(static_cast<int64_t>(std::floor(i + 1 == count && count > 1 ? stop : start + offset)));
    }
    return cast(tensor(floors, {count}, device), dtype);
  }
  if (count < 2) return evenly_spaced(start, step, count, dtype, device);
  return concat({evenly_spaced(start, step, count - 1, dtype, device), full({1}, stop, dtype, device)}, 0);
}

Tensor random_key(uint64_t seed, uint64_t offset) {
  return tensor<int64_t>({static_cast<int64_t>(seed), static_cast<int64_t>(offset)});
}

Tensor uniform(const Tensor& key, const Shape& shape, DType dtype) {
  return dispatch(uniform_p, {key}, output_attrs(shape, dtype, key.device()));
}

Tensor normal(const Tensor& key, const Shape& shape, DType dtype) {
  return dispatch(normal_p, {key}, output_attrs(shape, dtype, key.device()));
}

namespace {
Tensor draw(const Shape& shape, DType dtype, Generator* generator, bool normal_draw) {
  if (TraceRecorder* recorder = active_trace_recorder()) recorder->random_draw(normal_draw ? "randn" : "rand");
  EDDY_CHECK(is_floating(dtype), normal_draw ? "randn" : "rand", ": dtype must be float32 or float64, got ",
             dtype);
  Generator& g = generator ? *generator : default_generator();
  const Tensor key = random_key(g.seed(), g.advance(static_cast<uint64_t>(numel(shape))));
  return normal_draw ? normal(key, shape, dtype) : uniform(key, shape, dtype);
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
  return dispatch(eye_p, Inputs{}, output_attrs({n, n}, dtype, device));
}

Tensor from_buffer(const void* data, const Shape& shape, DType dtype, Device device) {
  Tensor out = Tensor::empty(shape, dtype);
  if (out.numel() > 0) std::memcpy(out.raw_data(), data, out.numel() * dtype_size(dtype));
  if (dtype == DType::b8) {
    // A bool byte must hold 0 or 1: the kernels load it as C++ bool, and any other value is
    // undefined behaviour there. The bytes of an NPY '|b1' or safetensors BOOL array may hold any
    // nonzero value for true; NumPy reads them so (astype gives 1), and so does eddy.
    uint8_t* bytes = static_cast<uint8_t*>(out.raw_data());
    for (int64_t i = 0; i < out.numel(); ++i) bytes[i] = bytes[i] != 0;
  }
  return device_copy(out, device);
}

Tensor from_blob(void* data, const Shape& shape, DType dtype, std::function<void(void*)> release,
                 const Shape& strides, Device device) {
  Shape layout = strides.empty() ? contiguous_strides(shape) : strides;
  EDDY_CHECK(layout.size() == shape.size(), "from_blob: ", layout.size(), " strides for shape ", shape);
  EDDY_CHECK(data || numel(shape) == 0, "from_blob: null data for ", numel(shape), " elements of shape ", shape);
  int64_t extent = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    EDDY_CHECK(layout[d] >= 0, "from_blob: negative stride ", layout[d]);
    if (shape[d] > 0) extent += (shape[d] - 1) * layout[d];
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::wrap(data, extent * dtype_size(dtype), device, std::move(release));
  impl->shape = shape;
  impl->strides = layout;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace eddy
