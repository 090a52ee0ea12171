#pragma once
// A primitive is declared once, in its op-family file, with everything every interpreter needs:
//  - infer: the output's shape and dtype, and every check on the inputs;
//  - eval:  the value, through backend kernels (or as a view of an input);
//  - jvp:   input i's contribution to the output tangent;
//  - vjp:   input i's cotangent given the output's cotangent;
//  - cost and lowering: what the compiler needs to fuse it and write its scalar code;
//  - sharding: how its inputs' placements give its output's (the auto-parallel layer's).
// Rules are written in eddy's public ops, so they are differentiable again: that is what gives
// derivatives of any order in both modes. Un-broadcasting of cotangents, broadcasting of
// tangents and accumulation over inputs happen once, in the engine.

#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy {

// Static arguments of a primitive. Each primitive documents which fields it reads.
struct Attrs {
  Shape shape;                 // reshape, expand: target shape; fft_c2r: output shape
  std::vector<int64_t> axes;   // reductions, flip: axes; permute: the permutation
  std::vector<int64_t> lo;     // slice: start per axis; pad: elements before, per axis
  std::vector<int64_t> hi;     // slice: stop per axis; pad: elements after, per axis
  std::vector<int64_t> step;   // slice: step per axis
  int64_t axis = 0;            // concat, gather, index_select, scatter_add
  bool keepdims = false;       // reductions
  bool inverse = false;        // fft_c2c: the +i (inverse) direction
  double scale = 1.0;          // fft_c2r: factor on the output (the norm's), applied in the kernel
  DType dtype = DType::f32;    // cast
  // checkpoint: the segment closure and its recomputation state (autodiff/checkpoint.cpp). A
  // primitive whose rule runs user code needs that code at backward time, and the node's Attrs
  // is the one thing that travels with it; shared, so copies of the Attrs see the same state.
  std::shared_ptr<void> payload;

  // Field by field (the payload by identity), so a field added later takes part without anyone
  // remembering to: the compiler merges nodes whose Attrs compare equal.
  bool operator==(const Attrs&) const = default;
};

// What one evaluation costs, for the compiler's choices (fusion, rematerialisation).
enum class CostClass {
  unset,           // not declared: the op-table test refuses a primitive left like this
  cheap,           // a few cycles an element (arithmetic, comparisons, selections, casts)
  transcendental,  // a libm call an element (exp, tanh, erf, pow, sqrt)
  movement,        // copies or views elements (reshape, slice, concat, gather)
  reduction,       // combines elements along axes (sum, max)
  gemm,            // matrix products
  transform,       // FFTs and other whole-array transforms
  collective,      // a rendezvous with other ranks: never dropped, merged or folded
  opaque,          // runs user code or a solver (checkpoint, darcy_solve)
};

// An elementwise primitive's scalar code, for the loops the compiler generates (C++ for the CPU,
// CUDA C++ through NVRTC). In `form`, `$0`, `$1`, `$2` stand for the inputs, `$T` for the
// output's C type and `$F` for `math_function` spelled for the operands' type (expf for float,
// exp for double), so that one form serves float32 and float64 on both targets. Complex values
// have no scalar code yet: fused loops are float32, float64 and bool only.
struct Lowering {
  std::string_view form;
  std::string_view math_function = {};  // a <math.h> function `form` calls, which the kernel declares

  bool defined() const { return !form.empty(); }
};

// How one mesh axis places a tensor (auto-parallel): whole on every rank, split along `axis`,
// or partial values that sum (or max) to the whole.
struct Placement {
  enum class Kind { replicate, shard, partial_sum, partial_max };
  Kind kind = Kind::replicate;
  int64_t axis = -1;  // shard only
  bool operator==(const Placement&) const = default;
};

// What a primitive does under one mesh axis: the placements its inputs must be given (resharded
// to, where they differ) and the placement of its output.
struct ShardingDecision {
  std::vector<Placement> inputs;
  Placement output;
};

struct OutputSpec {
  Shape shape;
  DType dtype;
};

using Inputs = std::span<const Tensor>;

struct Primitive {
  using JvpRule = std::function<Tensor(Inputs, const Attrs&, int input, const Tensor& tangent)>;
  using VjpRule = std::function<Tensor(Inputs, const Attrs&, int input, const Tensor& cotangent)>;
  using OutputRule = std::function<Tensor(Inputs, const Attrs&, const Tensor& output, const Tensor& seed)>;

  std::string_view name;
  int arity = 1;  // number of inputs; -1 for any number (concat)
  std::function<OutputSpec(Inputs, const Attrs&)> infer;
  std::function<Tensor(Inputs, const Attrs&, const OutputSpec&)> eval;
  // Null when the output has zero derivative (comparisons, sign) or is not inexact.
  JvpRule jvp;
  VjpRule vjp;
  // Optional rules of unary primitives whose derivative is cheapest from the output (tanh, exp,
  // sqrt): the engine uses them instead of jvp/vjp whenever the output is still alive, which
  // saves recomputing the function in every derivative. `seed` is the tangent or cotangent.
  OutputRule jvp_from_output;
  OutputRule vjp_from_output;
  // Optional, for unary elementwise primitives: f'(x) and f''(x) from the input and the output
  // (tanh: 1 - y^2 and -2 y (1 - y^2)). Taylor mode uses it for the activations that dominate
  // networks; without it, Taylor mode differentiates the tangent rule once more, which costs
  // several times as many ops.
  std::function<std::pair<Tensor, Tensor>(const Tensor& input, const Tensor& output)> derivatives;
  // Inputs that carry no derivative (indices, conditions).
  std::vector<int> constant_inputs;
  // Linear in its differentiable inputs: the op tests check <A x, y> = <x, A^T y>.
  bool linear = false;
  // Output element i depends only on element i of each (broadcast) input: the compiler fuses
  // chains of these into one loop, and Taylor mode applies scalar calculus to them.
  bool elementwise = false;
  // Linear in each input on its own (mul, matmul): Taylor mode's product rule applies.
  bool bilinear = false;
  // A reduction that adds its elements up from 0 (sum): the compiler may fold it into the end of
  // a fused loop, accumulating as the loop goes.
  bool additive_reduction = false;
  CostClass cost = CostClass::unset;
  Lowering lowering;  // elementwise primitives only
  // The placements of the output given the inputs' (and their shapes, through Inputs), on one
  // mesh axis; null until the auto-parallel layer declares it (issue #23).
  std::function<ShardingDecision(Inputs, const Attrs&, std::span<const Placement>)> sharding;

  bool differentiable_input(int i) const;
};

// Registers a primitive and returns the stable reference ops keep.
const Primitive& register_primitive(Primitive primitive);
// Every registered primitive, for the op-table test and the compiler.
const std::deque<Primitive>& all_primitives();

// The one dispatch point: every op, in every mode, goes through here. It checks the inputs,
// infers the output and hands the call to the installed interpreter, or evaluates it eagerly
// when none is installed (ops/dispatch.cpp).
Tensor dispatch(const Primitive& primitive, Inputs inputs, const Attrs& attrs = {});
inline Tensor dispatch(const Primitive& primitive, std::initializer_list<Tensor> inputs,
                       const Attrs& attrs = {}) {
  return dispatch(primitive, Inputs(inputs.begin(), inputs.size()), attrs);
}

// An interpreter receives every dispatched call, its inputs checked and its output inferred.
// Autodiff installs one when it is linked in (autodiff/interpreter.cpp): it propagates forward-
// mode tangents, records the reverse-mode tape, and evaluates values with eval_primitive. Ops sit
// below autodiff, so the dispatch point calls it through this pointer instead of by name.
using Interpreter = Tensor (*)(const Primitive& primitive, Inputs inputs, const Attrs& attrs,
                               const OutputSpec& spec);
void set_dispatch_interpreter(Interpreter interpreter);

// Eager evaluation on the inputs' device: the primitive's eval, reported to the active trace
// recorder (core/tracing.h) with recording paused inside, so ops an eval runs internally stay
// inside its node.
Tensor eval_primitive(const Primitive& primitive, Inputs inputs, const Attrs& attrs,
                      const OutputSpec& spec);

}  // namespace eddy
