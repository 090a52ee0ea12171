// Backend registry and the CPU backend's registration and thread control.

#include <array>
#include <cblas.h>
#include <omp.h>

#include "eddy/backends/cpu/cpu_backend.h"

namespace eddy {
namespace {
std::array<Backend*, kNumDeviceTypes>& backends() {
  static cpu_kernels::CpuBackend cpu_backend;
  static std::array<Backend*, kNumDeviceTypes> table{&cpu_backend, nullptr};
  return table;
}
}  // namespace

Backend& backend_for(Device device) {
  Backend* backend = backends()[static_cast<int>(device.type)];
  EDDY_CHECK(backend, "no kernels are registered for device ", device,
             " (was eddy built with that backend?)");
  return *backend;
}

void register_backend(DeviceType type, Backend* backend) {
  backends()[static_cast<int>(type)] = backend;
}

void set_num_threads(int threads) {
  EDDY_CHECK(threads >= 1, "set_num_threads: need at least 1 thread, got ", threads);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace eddy
