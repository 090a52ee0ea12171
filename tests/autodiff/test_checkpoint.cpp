// checkpoint(): the same gradients as the plain graph, one recomputation per backward pass
// however many inputs want a cotangent, and clear errors. Derivatives of orders 1 to 3 in every
// mode are in the op table (checkpoint_two_outputs); memory is measured in
// tests/classical/test_checkpoint.cpp on a real rollout.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "eddy/compiler/compile.h"
#include "eddy/eddy.h"
#include "support/expect_error.h"

namespace eddy {
namespace {

using TensorList = std::vector<Tensor>;

TEST(Checkpoint, GradientsMatchThePlainGraphWithOneRecomputation) {
  Generator generator(3);
  const Tensor x0 = randn({5}, DType::f64, &generator), y0 = randn({5}, DType::f64, &generator);
  const Tensor w = randn({5}, DType::f64, &generator);
  int calls = 0;
  MultiFunction segment = [&](const TensorList& v) -> TensorList {
    ++calls;
    return {v[0] * sin(v[1]), exp(v[0])};
  };
  auto loss = [&](const TensorList& out) { return sum(out[0] * w) + sum(out[1]); };

  Tensor x = x0.detach().requires_grad_(), y = y0.detach().requires_grad_();
  TensorList plain = grad({loss(segment({x, y}))}, {x, y});
  calls = 0;
  TensorList out = checkpoint(segment, {x, y});
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(out[0].requires_grad());
  TensorList checkpointed = grad({loss(out)}, {x, y});
  EXPECT_EQ(calls, 2);  // one rerun served both inputs
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_LT(max(abs(checkpointed[i] - plain[i])).item<double>(), 1e-14) << "input " << i;
  }
}

// A single 1-D output is the node's own value, so a second backward pass with the same seed
// tensor meets the same cotangent object: it must recompute, not find the cache already spent.
TEST(Checkpoint, RepeatedBackwardWithTheSameSeedGivesTheSameGradient) {
  Tensor x = tensor<double>({0.3, -1.2, 2.0}).requires_grad_();
  const Tensor y = checkpoint([](const TensorList& v) -> TensorList { return {sin(v[0]) * v[0]}; }, {x})[0];
  const Tensor seed = ones({3}, DType::f64);
  const Tensor first = grad({y}, {x}, {seed}, true)[0];
  const Tensor second = grad({y}, {x}, {seed}, true)[0];
  ASSERT_TRUE(second.defined());
  EXPECT_EQ(max(abs(first - second)).item<double>(), 0.0);
  EXPECT_LT(max(abs(first - (cos(x) * x + sin(x)))).item<double>(), 1e-15);
}

// A rollout of segments that share a parameter: with create_graph each segment's inner backward
// pass went on into the state the segments before it made, so c's derivative through them was
// counted there and again by the outer pass (f = 2 c^6 gave f' = 202.9 for 19.3 in segments of
// one step).
TEST(Checkpoint, HigherDerivativesOfARolloutWhoseSegmentsShareAParameter) {
  const double c0 = 1.1;
  for (int64_t steps_per_segment : {0, 1, 2, 3, 6}) {
    Tensor c = scalar(c0, DType::f64).requires_grad_();
    Tensor x = ones({2}, DType::f64).requires_grad_();
    Tensor state = x;
    MultiFunction segment = [&](const TensorList& v) -> TensorList {
      Tensor s = v[0];
      for (int64_t k = 0; k < steps_per_segment; ++k) s = s * v[1];
      return {s};
    };
    for (int64_t done = 0; done < 6; done += std::max<int64_t>(steps_per_segment, 1)) {
      state = steps_per_segment == 0 ? state * c : checkpoint(segment, {state, c})[0];
    }
    const Tensor f = sum(state);  // 2 c^6, and x's gradient c^6 in each entry
    const TensorList first = grad({f}, {c, x}, {}, true);
    EXPECT_NEAR(first[0].item<double>(), 12 * std::pow(c0, 5), 1e-12) << steps_per_segment << " steps a segment";
    EXPECT_NEAR(first[1].to_vector<double>()[0], std::pow(c0, 6), 1e-12) << steps_per_segment << " steps a segment";
    const TensorList second = grad({first[0]}, {c, x});
    EXPECT_NEAR(second[0].item<double>(), 60 * std::pow(c0, 4), 1e-11) << steps_per_segment << " steps a segment";
    EXPECT_NEAR(second[1].to_vector<double>()[1], 6 * std::pow(c0, 5), 1e-12) << steps_per_segment << " steps a segment";
  }
}

// A first gradient with respect to some inputs, differentiated with respect to another: the
// input not asked for was detached in the recomputation, so d/dp of the x-gradient of sin(x p)
// came out 0 (and Burgers' d/dnu of |dL/du0|^2 half its value).
TEST(Checkpoint, MixedSecondDerivativesReachTheInputsNotAskedForFirst) {
  const Tensor x = tensor<double>({0.3, -0.7, 1.1}).requires_grad_(), p = scalar(1.3, DType::f64).requires_grad_();
  const auto body = [](const TensorList& v) { return TensorList{sin(v[0] * v[1])}; };
  const auto mixed = [&](bool checkpointed) {
    const Tensor y = checkpointed ? checkpoint(body, {x, p})[0] : body({x, p})[0];
    const Tensor gx = grad({sum(y)}, {x}, {}, true)[0];  // p cos(x p)
    return grad({sum(gx)}, {p})[0].item<double>();
  };
  EXPECT_NEAR(mixed(true), mixed(false), 1e-14);
  EXPECT_GT(std::abs(mixed(false)), 0.1);
}

// Under a jvp whose tangent reaches the segment only through a tensor its closure holds, the
// segment became a node when an input required grad, and the tangent came out 0.
TEST(Checkpoint, UnderAJvpTheSegmentRunsPlainlyAndCarriesItsClosuresTangent) {
  const Tensor x = tensor<double>({0.3, -0.7, 1.1}).requires_grad_();
  const auto f = [&](bool checkpointed) {
    return [&, checkpointed](const Tensor& z) {
      const Tensor scale = z * 2.0;
      const auto body = [scale](const TensorList& v) { return TensorList{sin(v[0]) * scale}; };
      return sum(checkpointed ? checkpoint(body, {x})[0] : body({x})[0]);
    };
  };
  const Tensor z = scalar(0.5, DType::f64), dz = scalar(1.0, DType::f64);
  const double plain = jvp(f(false), z, dz).second.item<double>();
  EXPECT_NEAR(jvp(f(true), z, dz).second.item<double>(), plain, 1e-14);
  EXPECT_GT(std::abs(plain), 0.1);
}

TEST(Checkpoint, CapturedTensorsAreConstantsAndUntrackedInputsRunPlainly) {
  Tensor x = ones({3}, DType::f64).requires_grad_(), captured = full({3}, 2.0, DType::f64).requires_grad_();
  TensorList out = checkpoint([&](const TensorList& v) -> TensorList { return {v[0] * captured}; }, {x});
  TensorList grads = grad({sum(out[0])}, {x, captured});
  EXPECT_EQ(grads[0].to_vector<double>(), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(grads[1].to_vector<double>(), (std::vector<double>{0, 0, 0}));

  int calls = 0;
  TensorList plain = checkpoint([&](const TensorList& v) -> TensorList { ++calls; return {v[0] * 3.0}; },
                                {ones({3}, DType::f64)});
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(plain[0].requires_grad());
}

// A compiled function's derivative rules replay its graph on values that track no gradient: a
// segment whose input was an intermediate value (a solver's state after its first step) gave
// that input no cotangent, so the gradient of everything before the segment was 0, silently.
TEST(Checkpoint, AGradientTakenOutsideACompiledFunctionReachesTheSegmentsInputs) {
  Tensor c = scalar(3.0, DType::f64).requires_grad_();
  const auto body = [&](const TensorList& in) {
    const Tensor y =
        checkpoint([](const TensorList& v) { return TensorList{sin(v[0]) * v[1]}; }, {in[0] * 2.0, c})[0];
    return TensorList{sum(y)};
  };
  CompiledFunction compiled = compile(body);
  Tensor x = (arange(0, 4, 1, DType::f64) * 0.3).requires_grad_();
  const TensorList eager = grad({body({x})[0]}, {x, c});
  const TensorList through_the_call = grad({compiled({x})[0]}, {x, c});
  EXPECT_EQ(through_the_call[0].to_vector<double>(), eager[0].to_vector<double>());  // 6 cos(2x), not 0
  EXPECT_EQ(through_the_call[1].item<double>(), eager[1].item<double>());
  EXPECT_NE(eager[0].to_vector<double>()[0], 0.0);
}

// A segment whose closure holds a tensor the compiled function made: the program ran the
// segment itself, later, where that tensor had no values, and failed with "data(): the tensor
// ... is abstract". Refused while the function is captured, whether the closure's tensor is made
// from nothing, a detached input (the same value as the segment's input), or returned as it is;
// passed as an input, it works.
TEST(Checkpoint, AClosureTensorMadeInsideACompiledFunctionIsRefusedAndWorksAsAnInput) {
  const std::string refusal = "checkpoint: inside a compiled function, the segment's closure holds a tensor of shape [4]";
  const auto compile_with = [](const std::function<Tensor(const Tensor&)>& closure_tensor, bool returned) {
    return compile([=](const TensorList& in) {
      const Tensor held = closure_tensor(in[0]);
      return checkpoint([held, returned](const TensorList& v) { return TensorList{returned ? held : sin(v[0]) * held}; },
                        {in[0]});
    });
  };
  const Tensor x = (arange(0, 4, 1, DType::f64) * 0.3).requires_grad_();
  for (bool returned : {false, true}) {
    CompiledFunction made = compile_with([](const Tensor&) { return cos(arange(0, 4, 1, DType::f64)); }, returned);
    expect_error([&] { made({x}); }, {refusal, "Pass it to checkpoint() as an input"});
    CompiledFunction detached = compile_with([](const Tensor& input) { return input.detach(); }, returned);
    expect_error([&] { detached({x}); }, {refusal});
  }
  const auto as_input = [](const TensorList& in) {
    const Tensor weights = cos(arange(0, 4, 1, DType::f64));
    return checkpoint([](const TensorList& v) { return TensorList{sin(v[0]) * v[1]}; }, {in[0], weights});
  };
  CompiledFunction compiled = compile(as_input);
  const Tensor g = grad({sum(square(compiled({x})[0]))}, {x}, {}, true)[0], h = grad({sum(square(as_input({x})[0]))}, {x}, {}, true)[0];
  EXPECT_LT(max(abs(g - h)).item<double>(), 1e-13);
  EXPECT_NEAR(grad({sum(g)}, {x})[0].to_vector<double>()[1], grad({sum(h)}, {x})[0].to_vector<double>()[1], 1e-12);
}

TEST(Checkpoint, RejectsOutputsOfDifferentDtypes) {
  Tensor x = ones({2}, DType::f64).requires_grad_();
  expect_error([&] { checkpoint([](const TensorList& v) -> TensorList { return {v[0], cast(v[0], DType::f32)}; }, {x}); },
               {"checkpoint", "share one dtype", "float64", "float32"});
  expect_error([&] { checkpoint([](const TensorList& v) { return v; }, {}); }, {"checkpoint", "at least one input"});
}

}  // namespace
}  // namespace eddy
