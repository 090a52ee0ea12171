// The library's composed functions and modules on tensors of another device, with no
// DefaultDeviceScope open: each makes its constants (masks, positions, grids, seeds) where its
// inputs are. On the stand-in GPU (support/host_memory_device.h) a constant left on the CPU is
// refused, and the results must equal the CPU's bit for bit.

#include <gtest/gtest.h>

#include <vector>

#include "eddy/core/backend.h"
#include "eddy/eddy.h"
#include "eddy/nn/attention.h"
#include "eddy/nn/generation.h"
#include "eddy/nn/layers.h"
#include "eddy/nn/neural_operators.h"
#include "eddy/nn/transformer.h"
#include "eddy/optim/clip.h"
#include "eddy/optim/least_squares.h"
#include "support/host_memory_device.h"

namespace eddy::nn {
namespace {

const Device kGpu = Device::cuda(0);

class OnStandIn : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::install_host_memory_device(); }
  Generator generator{3};
  Tensor draw(const Shape& shape) { return randn(shape, DType::f64, &generator); }
};

void expect_same(const Tensor& on_gpu, const Tensor& on_cpu) {
  EXPECT_EQ(on_gpu.device(), kGpu);
  EXPECT_EQ(element_bytes(on_gpu), element_bytes(on_cpu));
}

TEST_F(OnStandIn, AttentionRotaryEmbeddingAndCrossEntropy) {
  const Tensor q = draw({1, 4, 5, 8}), k = draw({1, 2, 5, 8}), v = draw({1, 2, 5, 8});
  expect_same(causal_attention(to(q, kGpu), to(k, kGpu), to(v, kGpu)), causal_attention(q, k, v));
  expect_same(composed_causal_attention(to(q, kGpu), to(k, kGpu), to(v, kGpu)), composed_causal_attention(q, k, v));
  expect_same(rotary_embedding(to(q, kGpu), 10000.0, 3), rotary_embedding(q, 10000.0, 3));
  const Tensor logits = draw({6, 7});
  const Tensor targets = tensor<int64_t>({0, 3, -100, 6, 2, -100}, {6});
  expect_same(cross_entropy(to(logits, kGpu), to(targets, kGpu)), cross_entropy(logits, targets));
}

TEST_F(OnStandIn, DropoutWithAKeyDrawsTheCpusMask) {
  Dropout dropout(0.3);
  const Tensor x = draw({4, 9});
  Tensor host_key = random_key(5), gpu_key = to(random_key(5), kGpu);
  expect_same(dropout.forward(to(x, kGpu), &gpu_key), dropout.forward(x, &host_key));
  expect_same(gpu_key, host_key);
}

TEST_F(OnStandIn, AnFnoWithGridCoordinatesAndClippedGradients) {
  FnoOptions options;
  options.modes = {3};
  options.width = 4;
  options.layers = 1;
  options.projection_width = 8;
  Fno on_cpu(options), on_gpu(options);
  on_gpu.to(kGpu);
  const Tensor x = cast(draw({2, 1, 16}), DType::f32);
  const Tensor y_cpu = on_cpu(x), y_gpu = on_gpu(to(x, kGpu));
  expect_same(y_gpu, y_cpu);
  backward(sum(square(y_cpu)));
  backward(sum(square(y_gpu)));
  EXPECT_EQ(optim::clip_grad_norm(on_gpu.parameters(), 0.01), optim::clip_grad_norm(on_cpu.parameters(), 0.01));
  expect_same(on_gpu.parameters().front().grad(), on_cpu.parameters().front().grad());
}

// A frozen parameter stays frozen when its module moves: it came back trainable.
TEST_F(OnStandIn, AMovedModuleKeepsWhichParametersAreFrozen) {
  Linear layer(3, 2, generator, DType::f64);
  layer.bias.requires_grad_(false);
  layer.to(kGpu);
  EXPECT_EQ(layer.weight.device(), kGpu);
  EXPECT_EQ(layer.bias.device(), kGpu);
  EXPECT_TRUE(layer.weight.requires_grad());
  EXPECT_FALSE(layer.bias.requires_grad());
}

TEST_F(OnStandIn, JacobiansAndLeastSquares) {
  const Function f = [](const Tensor& x) { return tanh(x) * sum(x); };
  const Tensor x = draw({3});
  for (JacobianMode mode : {JacobianMode::forward, JacobianMode::reverse}) {
    expect_same(jacobian(f, to(x, kGpu), mode), jacobian(f, x, mode));
  }
  const Tensor a = draw({5, 3}), b = draw({5, 2});
  expect_same(optim::least_squares(to(a, kGpu), to(b, kGpu)), optim::least_squares(a, b));
}

TEST_F(OnStandIn, GenerationRunsWhereTheModelIs) {
  Gpt2Options options;
  options.vocab_size = 40;
  options.context_length = 16;
  options.hidden_size = 16;
  options.layers = 1;
  options.heads = 2;
  Gpt2Model on_cpu(options), on_gpu(options);
  on_gpu.to(kGpu);
  GenerationOptions sampling;
  sampling.max_new_tokens = 8;
  sampling.temperature = 0;  // greedy: the CPU's logits come from the fused attention, the GPU's composed
  EXPECT_EQ(generate(on_gpu, {1, 2, 3}, sampling), generate(on_cpu, {1, 2, 3}, sampling));
}

}  // namespace
}  // namespace eddy::nn
