// The FFT primitives and the numpy.fft API built on them.
//
// Three unnormalised primitives, each with rules in eddy ops:
//   fft_c2c  (complex -> complex over several axes): its transpose is the opposite direction;
//   fft_r2c  (real -> half spectrum over several axes, halved along the last listed one): its
//            transpose is c2r of the spectrum with the entries that stand for two frequencies
//            (all but DC and Nyquist along the halved axis) halved;
//   fft_c2r  (half spectrum -> real over several axes, times a scale factor): its transpose is
//            the scale times r2c with those entries doubled. The factor is the inverse norm's
//            1/n (or 1/sqrt(n)): applied by the kernel while it copies its input, it costs no
//            extra pass over the output (docs/benchmarks.md).
// The halving/doubling is the Hermitian-symmetry bookkeeping: c2r counts each middle entry twice
// (for k and n - k), and ignores the imaginary parts of DC and Nyquist. Over several axes c2r is
// the full backward transforms along the other axes followed by the one-axis c2r, and the weights
// act along the halved axis only, so they commute with the full transforms and the same rules hold.
// The real transforms take all their axes at once so FFTW runs them as one multi-dimensional plan:
// as separate passes, the strided column pass of a 1024^2 rfft2 alone took twice as long as
// FFTW's whole 2-D transform (docs/benchmarks.md).

#include "eddy/fft/fft.h"

#include <algorithm>
#include <cmath>

#include "eddy/fft/fft_backend.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/sharding.h"

namespace eddy::fft {
namespace {
using eddy::detail::dense;

Tensor c2c(const Tensor& x, const std::vector<int64_t>& axes, bool inverse);
Tensor r2c(const Tensor& x, const std::vector<int64_t>& axes);
Tensor c2r(const Tensor& x, const std::vector<int64_t>& axes, int64_t n, double scale = 1);

// Weights along `axis` of a half spectrum of a length-n signal: `scale` at DC (and at Nyquist
// when n is even), scale * middle elsewhere; shaped to broadcast against `like`.
Tensor hermitian_weights(const Tensor& like, int64_t axis, int64_t n, double middle, double scale = 1) {
  const int64_t m = like.shape()[axis];
  std::vector<double> w(m, scale * middle);
  w[0] = scale;
  if (n % 2 == 0 && m == n / 2 + 1) w[m - 1] = scale;
  Shape shape(like.dim(), 1);
  shape[axis] = m;
  return to(cast(tensor(w, shape), real_dtype(like.dtype())), like.device());
}

const Primitive& c2c_p = []() -> const Primitive& {
  Primitive p;
  p.name = "fft_c2c";
  p.cost = CostClass::transform;
  p.sharding = sharding::transform();
  p.linear = true;
  p.infer = [](Inputs in, const Attrs&) {
    detail::check_dtype("fft_c2c", in[0], is_complex(in[0].dtype()), "a complex tensor");
    return OutputSpec{in[0].shape(), in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = detail::new_output(spec, in[0]);
    if (out.numel() > 0) fft_backend_for(out.device()).c2c(dense(in[0]), out, a.axes, !a.inverse);
    return out;
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return c2c(t, a.axes, a.inverse); };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) { return c2c(g, a.axes, !a.inverse); };
  return register_primitive(std::move(p));
}();

const Primitive& r2c_p = []() -> const Primitive& {
  Primitive p;
  p.name = "fft_r2c";
  p.cost = CostClass::transform;
  p.sharding = sharding::transform();
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    const DType dtype = in[0].dtype();
    detail::check_dtype("fft_r2c", in[0], dtype == DType::f32 || dtype == DType::f64, "a float32 or float64 tensor");
    Shape shape = in[0].shape();
    shape[a.axes.back()] = shape[a.axes.back()] / 2 + 1;
    return OutputSpec{shape, complex_dtype(in[0].dtype())};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = detail::new_output(spec, in[0]);
    if (in[0].numel() > 0) fft_backend_for(out.device()).r2c(dense(in[0]), out, a.axes);
    return out;
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return r2c(t, a.axes); };
  p.vjp = [](Inputs in, const Attrs& a, int, const Tensor& g) {
    const int64_t n = in[0].shape()[a.axes.back()];
    return c2r(g * hermitian_weights(g, a.axes.back(), n, 0.5), a.axes, n);
  };
  return register_primitive(std::move(p));
}();

const Primitive& c2r_p = []() -> const Primitive& {
  Primitive p;
  p.name = "fft_c2r";
  p.cost = CostClass::transform;
  p.sharding = sharding::transform();
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    detail::check_dtype("fft_c2r", in[0], is_complex(in[0].dtype()), "a complex tensor");
    return OutputSpec{a.shape, real_dtype(in[0].dtype())};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = detail::new_output(spec, in[0]);
    if (out.numel() > 0) fft_backend_for(out.device()).c2r(dense(in[0]), out, a.axes, a.scale);
    return out;
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) {
    return c2r(t, a.axes, a.shape[a.axes.back()], a.scale);
  };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) {
    Tensor spectrum = r2c(g, a.axes);
    return spectrum * hermitian_weights(spectrum, a.axes.back(), a.shape[a.axes.back()], 2.0, a.scale);
  };
  return register_primitive(std::move(p));
}();

Tensor c2c(const Tensor& x, const std::vector<int64_t>& axes, bool inverse) {
  Attrs attrs;
  attrs.axes = axes;
  attrs.inverse = inverse;
  return dispatch(c2c_p, {x}, attrs);
}

// The half spectrum is taken along axes.back().
Tensor r2c(const Tensor& x, const std::vector<int64_t>& axes) {
  Attrs attrs;
  attrs.axes = axes;
  return dispatch(r2c_p, {x}, attrs);
}

// `x` must hold exactly n / 2 + 1 entries along axes.back(), where the output has n.
Tensor c2r(const Tensor& x, const std::vector<int64_t>& axes, int64_t n, double scale) {
  Attrs attrs;
  attrs.axes = axes;
  attrs.shape = x.shape();
  attrs.shape[axes.back()] = n;
  attrs.scale = scale;
  return dispatch(c2r_p, {x}, attrs);
}

// ---- the numpy.fft layer: argument checks, lengths, norms ----

enum class Norm { backward, ortho, forward };

Norm parse_norm(std::string_view op, std::string_view norm) {
  if (norm == "backward") return Norm::backward;
  if (norm == "ortho") return Norm::ortho;
  if (norm == "forward") return Norm::forward;
  throw Error(cat(op, ": norm must be \"backward\", \"ortho\" or \"forward\", got \"", norm, "\""));
}

std::string_view swapped(std::string_view op, std::string_view norm) {
  switch (parse_norm(op, norm)) {
    case Norm::backward: return "forward";
    case Norm::forward: return "backward";
    case Norm::ortho: return "ortho";
  }
  return norm;
}

// The norm's factor for a transform of `count` points in the given direction.
double norm_factor(Norm norm, double count, bool inverse) {
  if (norm == Norm::ortho) return 1 / std::sqrt(count);
  if ((norm == Norm::forward) != inverse) return 1 / count;
  return 1;
}

Tensor scaled(const Tensor& x, Norm norm, double count, bool inverse) {
  const double factor = norm_factor(norm, count, inverse);
  return factor == 1 ? x : x * factor;
}

void check_input(std::string_view op, const Tensor& x) {
  EDDY_CHECK(x.defined(), op, ": undefined tensor");
  detail::check_dtype(op, x, is_inexact(x.dtype()), "a floating or complex tensor");
}

// Truncates or zero-pads `axis` to length n.
Tensor resized(const Tensor& x, int64_t axis, int64_t n) {
  const int64_t length = x.shape()[axis];
  if (n == length) return x;
  if (n < length) return slice(x, axis, 0, n);
  std::vector<int64_t> before(x.dim(), 0), after(x.dim(), 0);
  after[axis] = n - length;
  return pad(x, before, after);
}

struct Plan {
  std::vector<int64_t> axes;     // normalised, in the caller's order
  std::vector<int64_t> lengths;  // per axis; -1 means "keep" until resolved
};

// Resolves NumPy's (s, axes) conventions and checks them.
Plan plan_axes(std::string_view op, const Tensor& x, const std::vector<int64_t>& s,
               const std::vector<int64_t>& axes) {
  Plan plan;
  std::vector<int64_t> chosen = axes;
  if (chosen.empty()) {
    const int64_t count = s.empty() ? x.dim() : static_cast<int64_t>(s.size());
    EDDY_CHECK(count <= x.dim(), op, ": s has ", s.size(), " entries but the tensor has shape ", x.shape());
    for (int64_t d = x.dim() - count; d < x.dim(); ++d) chosen.push_back(d);
  }
  EDDY_CHECK(s.empty() || s.size() == chosen.size(), op, ": s has ", s.size(), " entries but ",
             chosen.size(), " axes are transformed");
  EDDY_CHECK(!chosen.empty(), op, ": no axes to transform (tensor of shape ", x.shape(), ")");
  for (size_t i = 0; i < chosen.size(); ++i) {
    int64_t axis = normalize_axis(chosen[i], x.dim(), op);
    EDDY_CHECK(std::find(plan.axes.begin(), plan.axes.end(), axis) == plan.axes.end(), op, ": axis ",
               chosen[i], " is repeated");
    int64_t n = s.empty() ? -1 : s[i];
    EDDY_CHECK(n == -1 || n > 0, op, ": transform length must be positive, got ", n, " for axis ", chosen[i]);
    plan.axes.push_back(axis);
    plan.lengths.push_back(n);
  }
  return plan;
}

// The transform length along the plan's i-th axis: the requested one, else the input's.
int64_t length_along(std::string_view op, const Plan& plan, size_t i, const Tensor& x) {
  const int64_t n = plan.lengths[i] < 0 ? x.shape()[plan.axes[i]] : plan.lengths[i];
  EDDY_CHECK(n > 0, op, ": axis ", plan.axes[i], " of the tensor of shape ", x.shape(),
             " is empty; pass a positive length in n or s to zero-pad it");
  return n;
}

std::vector<int64_t> sorted(std::vector<int64_t> axes) {
  std::sort(axes.begin(), axes.end());
  return axes;
}

Tensor complex_fftn(std::string_view op, const Tensor& x, const std::vector<int64_t>& s,
                    const std::vector<int64_t>& axes, std::string_view norm, bool inverse) {
  check_input(op, x);
  Norm mode = parse_norm(op, norm);
  Plan plan = plan_axes(op, x, s, axes);
  Tensor z = is_complex(x.dtype()) ? x : cast(x, complex_dtype(x.dtype()));
  double count = 1;
  for (size_t i = 0; i < plan.axes.size(); ++i) {
    const int64_t n = length_along(op, plan, i, z);
    z = resized(z, plan.axes[i], n);
    count *= static_cast<double>(n);
  }
  return scaled(c2c(z, sorted(plan.axes), inverse), mode, count, inverse);
}

Tensor real_fftn(std::string_view op, const Tensor& x, const std::vector<int64_t>& s,
                 const std::vector<int64_t>& axes, std::string_view norm) {
  check_input(op, x);
  detail::check_dtype(op, x, !is_complex(x.dtype()), "a real tensor (use fft for complex input)");
  Norm mode = parse_norm(op, norm);
  Plan plan = plan_axes(op, x, s, axes);
  // Half floats are transformed in float32, as the complex transforms take them.
  Tensor z = is_half(x.dtype()) ? cast(x, DType::f32) : x;
  double count = 1;
  for (size_t i = 0; i < plan.axes.size(); ++i) {
    const int64_t n = length_along(op, plan, i, z);
    z = resized(z, plan.axes[i], n);
    count *= static_cast<double>(n);
  }
  // The half spectrum is taken along the last listed axis; the others are full transforms.
  std::vector<int64_t> order = sorted(std::vector<int64_t>(plan.axes.begin(), plan.axes.end() - 1));
  order.push_back(plan.axes.back());
  return scaled(r2c(z, order), mode, count, false);
}

Tensor inverse_real_fftn(std::string_view op, const Tensor& x, const std::vector<int64_t>& s,
                         const std::vector<int64_t>& axes, std::string_view norm) {
  check_input(op, x);
  Norm mode = parse_norm(op, norm);
  Plan plan = plan_axes(op, x, s, axes);
  Tensor z = is_complex(x.dtype()) ? x : cast(x, complex_dtype(x.dtype()));
  const int64_t last = plan.axes.back();
  const int64_t n_last = plan.lengths.back() < 0 ? 2 * (z.shape()[last] - 1) : plan.lengths.back();
  EDDY_CHECK(n_last > 0, op, ": output length along axis ", last, " would be ", n_last,
             " (the input has ", z.shape()[last], " entries there); pass n or s");
  double count = static_cast<double>(n_last);
  std::vector<int64_t> rest;
  for (size_t i = 0; i + 1 < plan.axes.size(); ++i) {
    const int64_t n = length_along(op, plan, i, z);
    z = resized(z, plan.axes[i], n);
    count *= static_cast<double>(n);
    rest.push_back(plan.axes[i]);
  }
  z = resized(z, last, n_last / 2 + 1);
  std::vector<int64_t> order = sorted(rest);
  order.push_back(last);
  return c2r(z, order, n_last, norm_factor(mode, count, true));
}

}  // namespace

Tensor fft(const Tensor& x, int64_t n, int64_t axis, std::string_view norm) {
  return complex_fftn("fft", x, {n}, {axis}, norm, false);
}
Tensor ifft(const Tensor& x, int64_t n, int64_t axis, std::string_view norm) {
  return complex_fftn("ifft", x, {n}, {axis}, norm, true);
}
Tensor fft2(const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& axes, std::string_view norm) {
  return complex_fftn("fft2", x, s, axes, norm, false);
}
Tensor ifft2(const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& axes, std::string_view norm) {
  return complex_fftn("ifft2", x, s, axes, norm, true);
}
Tensor fftn(const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& axes, std::string_view norm) {
  return complex_fftn("fftn", x, s, axes, norm, false);
}
Tensor ifftn(const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& axes, std::string_view norm) {
  return complex_fftn("ifftn", x, s, axes, norm, true);
}
Tensor rfft(const Tensor& x, int64_t n, int64_t axis, std::string_view norm) {
  return real_fftn("rfft", x, {n}, {axis}, norm);
}
Tensor irfft(const Tensor& x, int64_t n, int64_t axis, std::string_view norm) {
  return inverse_real_fftn("irfft", x, {n}, {axis}, norm);
}
Tensor rfft2(const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& axes, std::string_view norm) {
  return real_fftn("rfft2", x, s, axes, norm);
}
Tensor irfft2(const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& axes, std::string_view norm) {
  return inverse_real_fftn("irfft2", x, s, axes, norm);
}
Tensor rfftn(const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& axes, std::string_view norm) {
  return real_fftn("rfftn", x, s, axes, norm);
}
Tensor irfftn(const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& axes, std::string_view norm) {
  return inverse_real_fftn("irfftn", x, s, axes, norm);
}

Tensor hfft(const Tensor& x, int64_t n, int64_t axis, std::string_view norm) {
  check_input("hfft", x);
  return inverse_real_fftn("hfft", conj(x), {n}, {axis}, swapped("hfft", norm));
}

Tensor ihfft(const Tensor& x, int64_t n, int64_t axis, std::string_view norm) {
  return conj(real_fftn("ihfft", x, {n}, {axis}, swapped("ihfft", norm)));
}

Tensor fftfreq(int64_t n, double d, DType dtype) {
  EDDY_CHECK(n > 0, "fftfreq: n must be positive, got ", n);
  EDDY_CHECK(d != 0, "fftfreq: sample spacing d must be non-zero");
  std::vector<double> f(n);
  for (int64_t k = 0; k < n; ++k) f[k] = static_cast<double>(k < (n + 1) / 2 ? k : k - n) / (d * n);
  return cast(tensor(f), dtype);
}

Tensor rfftfreq(int64_t n, double d, DType dtype) {
  EDDY_CHECK(n > 0, "rfftfreq: n must be positive, got ", n);
  EDDY_CHECK(d != 0, "rfftfreq: sample spacing d must be non-zero");
  std::vector<double> f(n / 2 + 1);
  for (size_t k = 0; k < f.size(); ++k) f[k] = static_cast<double>(k) / (d * n);
  return cast(tensor(f), dtype);
}

namespace {
Tensor shift_axes(const Tensor& x, const std::vector<int64_t>& axes, bool inverse) {
  Tensor out = x;
  for (int64_t axis : normalize_axes(axes, x.dim(), inverse ? "ifftshift" : "fftshift")) {
    const int64_t n = x.shape()[axis];
    out = roll(out, inverse ? -(n / 2) : n / 2, axis);
  }
  return out;
}
}  // namespace

Tensor fftshift(const Tensor& x, const std::vector<int64_t>& axes) { return shift_axes(x, axes, false); }
Tensor ifftshift(const Tensor& x, const std::vector<int64_t>& axes) { return shift_axes(x, axes, true); }

}  // namespace eddy::fft
