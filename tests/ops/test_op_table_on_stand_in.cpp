// Every row of the op table on the stand-in GPU (support/host_memory_device.h), against the CPU:
// the same kernels run on both, so values and first and second derivatives must agree bit for
// bit. A primitive whose evaluation reads its inputs' host memory directly instead of going
// through its device's kernels fails here (as it would on a real GPU, where the memory is not
// the host's); the op tests on a real GPU (cuda_tests) check the CUDA kernels themselves.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "eddy/core/backend.h"
#include "eddy/eddy.h"
#include "ops/op_table.h"
#include "support/host_memory_device.h"

namespace eddy {
namespace {

using testing::OpCase;
using TensorList = std::vector<Tensor>;

const Device kGpu = Device::cuda(0);

TensorList on(const TensorList& tensors, Device device) {
  TensorList moved;
  for (const Tensor& t : tensors) moved.push_back(to(t, device));
  return moved;
}

// The value of f(x) and the gradients of Re<w, f(x)> and of the gradients' sum with `probes`,
// each as host bytes.
std::vector<std::string> results_on(Device device, const OpCase& op, const TensorList& inputs, const Tensor& w,
                                    const TensorList& probes) {
  const std::vector<size_t> diff = testing::differentiable_inputs(inputs);
  TensorList x = on(inputs, device);
  for (size_t i : diff) x[i] = x[i].detach().requires_grad_();
  const Tensor out = op.fn(x);
  std::vector<std::string> results = {element_bytes(out)};
  if (op.max_order == 0 || !is_inexact(out.dtype()) || diff.empty()) return results;
  TensorList targets;
  for (size_t i : diff) targets.push_back(x[i]);
  const TensorList first = grad({sum(real(conj(to(w, device)) * out))}, targets, {}, op.max_order > 1);
  Tensor probed = zeros({}, DType::f64, device);
  for (size_t j = 0; j < diff.size(); ++j) {
    results.push_back(element_bytes(first[j]));
    probed = probed + sum(real(conj(to(probes[j], device)) * first[j]));
  }
  if (op.max_order > 1 && probed.requires_grad()) {
    for (const Tensor& second : grad({probed}, targets)) results.push_back(element_bytes(second));
  }
  return results;
}

class OpTableOnStandIn : public ::testing::TestWithParam<OpCase> {
 protected:
  static void SetUpTestSuite() { testing::install_host_memory_device(); }
};

// Left out: the distributed FFT (FFTW-MPI plans on host memory; the GPU refuses it, cuda_tests)
// and compiled calls (a program for a cuda device runs CUDA kernels, which need a real GPU).
bool runs_on_stand_in(const OpCase& op) {
  for (const std::string& primitive : op.primitives) {
    if (primitive.starts_with("dist_") || primitive == "compiled_call") return false;
  }
  return true;
}

TEST_P(OpTableOnStandIn, ValuesAndDerivativesEqualTheCpus) {
  const OpCase& op = GetParam();
  for (DType dtype : op.dtypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Generator gen(31);
    const TensorList inputs = op.make_inputs(dtype, gen);
    const Tensor value = op.fn(inputs);
    const Tensor w = is_inexact(value.dtype()) ? testing::random_like(value, gen) : Tensor();
    TensorList probes;
    for (size_t i : testing::differentiable_inputs(inputs)) probes.push_back(testing::random_like(inputs[i], gen));
    EXPECT_EQ(results_on(kGpu, op, inputs, w, probes), results_on(cpu(), op, inputs, w, probes));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTableOnStandIn, ::testing::ValuesIn(testing::rows_where(&runs_on_stand_in)),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace eddy
