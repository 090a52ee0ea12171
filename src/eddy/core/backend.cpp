// The registry of kernels by device type. Backends register theirs when they are linked in
// (backends/cpu/backend.cpp for the CPU).

#include "eddy/core/backend.h"

#include <array>

namespace eddy {
namespace {
std::array<Backend*, kNumDeviceTypes>& backends() {
  static std::array<Backend*, kNumDeviceTypes> table{};
  return table;
}
}  // namespace

Backend& backend_for(Device device) {
  Backend* backend = backends()[static_cast<int>(device.type)];
  EDDY_CHECK(backend, "no kernels are registered for device ", device,
             " (was eddy built with that backend, and its library linked whole?)");
  return *backend;
}

bool device_has(Device device, Backend::OptionalKernel kernel) {
  const Backend* backend = backends()[static_cast<int>(device.type)];
  return backend != nullptr && backend->has(kernel);
}

void register_backend(DeviceType type, Backend* backend) {
  backends()[static_cast<int>(type)] = backend;
}

std::string device_unavailable_reason(Device device) {
  Backend* backend = backends()[static_cast<int>(device.type)];
  if (!backend) return cat("this eddy was built without a backend for ", device, " (see docs/gpu.md, \"Building\")");
  return backend->unavailable_reason(device.index);
}

void Backend::causal_attention(const Tensor& q, const Tensor&, const Tensor&, double, const Tensor&) {
  throw Error(cat("causal_attention: no fused attention kernel on ", q.device(), " yet"));
}

void Backend::causal_attention_backward(const Tensor& q, const Tensor&, const Tensor&, double, const Tensor&,
                                        const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  throw Error(cat("causal_attention: no fused attention kernel on ", q.device(), " yet"));
}

void Backend::normalize_last_axis(const Tensor& x, double, bool, const Tensor&) {
  throw Error(cat("normalize_last_axis: no normalisation kernel on ", x.device(), " yet"));
}

void Backend::upload(const Tensor& host, const Tensor&) {
  throw Error(cat("upload: the ", host.device(), " backend keeps its tensors in host memory"));
}

void Backend::download(const Tensor& device_in, const Tensor&) {
  throw Error(cat("download: the ", device_in.device(), " backend keeps its tensors in host memory"));
}

std::string element_bytes(const Tensor& tensor) {
  const Tensor host = host_copy(tensor);
  return std::string(static_cast<const char*>(host.raw_data()), static_cast<size_t>(host.numel()) * dtype_size(host.dtype()));
}

Tensor host_copy(const Tensor& tensor) {
  if (tensor.device().type == DeviceType::cpu) {
    if (tensor.is_contiguous()) return tensor.detach();
    Tensor dense = Tensor::empty(tensor.shape(), tensor.dtype());
    backend_for(cpu()).copy(tensor, dense);
    return dense;
  }
  Backend& device = backend_for(tensor.device());
  Tensor source = tensor;
  if (!tensor.is_contiguous()) {
    source = Tensor::empty(tensor.shape(), tensor.dtype(), tensor.device());
    device.copy(tensor, source);
  }
  Tensor host = Tensor::empty(tensor.shape(), tensor.dtype());
  device.download(source, host);
  return host;
}

Tensor device_copy(const Tensor& tensor, Device device) {
  // For a host target host_copy is the whole copy, and it hands back a dense host tensor itself.
  const Tensor host = host_copy(tensor);
  if (device.type == DeviceType::cpu) return host;
  Tensor out = Tensor::empty(tensor.shape(), tensor.dtype(), device);
  backend_for(device).upload(host, out);
  return out;
}

}  // namespace eddy
