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

#include <complex>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "eddy/core/distribution.h"
#include "eddy/core/tensor.h"

namespace eddy {

// A complex number that compares equal only to the same bytes: -0 and +0 are different fill
// values (x + -0 is x for every x, x + +0 is not for x = -0), which the compiler's merging of
// equal nodes must not confuse.
struct ExactComplex {
  std::complex<double> number;

  ExactComplex(std::complex<double> value = 0.0) : number(value) {}  // NOLINT: converts implicitly
  operator std::complex<double>() const { return number; }           // NOLINT: converts implicitly
  bool operator==(const ExactComplex& other) const {
    return std::memcmp(&number, &other.number, sizeof(number)) == 0;
  }
};

// Static arguments of a primitive. Each primitive documents which fields it reads.
struct Attrs {
  Shape shape;                 // reshape, expand: target shape; fft_c2r, creation: output shape
  std::vector<int64_t> axes;   // reductions, flip: axes; permute: the permutation
  std::vector<int64_t> lo;     // slice: start per axis; pad: elements before, per axis
  std::vector<int64_t> hi;     // slice: stop per axis; pad: elements after, per axis
  std::vector<int64_t> step;   // slice: step per axis
  int64_t axis = 0;            // concat, gather, index_select, scatter_add
  bool keepdims = false;       // reductions
  bool inverse = false;        // fft_c2c: the +i (inverse) direction
  double scale = 1.0;          // fft_c2r: factor on the output (the norm's), applied in the kernel;
                               // arange: the spacing; layer_normalize, rms_normalize: eps
  DType dtype = DType::f32;    // cast; creation and random draws: the output's
  Device device;               // creation: where the output lives (the other ops: their inputs')
  ExactComplex value;          // full: the fill value; arange: the first element
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
// CUDA C++ through NVRTC). In a form, `$0`, `$1`, `$2` stand for the inputs, `$T` for the
// output's C++ type and `$F` for `math_function` spelled for the operands' type (expf for float,
// exp for double), so that one form serves float32 and float64 on both targets. `form` is the
// spelling for real and bool operands, `complex_form` the one for complex operands, which the
// loop holds as std::complex<float> and std::complex<double> (on the CPU only: NVRTC has no
// std::complex). Either may be empty where the op has no such spelling; a node whose operands'
// kind has none is not fused and runs as a primitive call. The output's kind may differ from the
// operands' (`complex` makes complex values of real ones, `abs` real values of complex ones); a
// complex form may call complex_cast<T>(z), which converts as eager casts do.
struct Lowering {
  std::string_view form;
  std::string_view math_function = {};  // a <math.h> function `form` calls, which the kernel declares
  std::string_view complex_form = {};

  // The spelling for operands of this kind, empty when there is none.
  std::string_view form_for(bool complex_operands) const { return complex_operands ? complex_form : form; }
  bool defined() const { return !form.empty(); }
};

// What a primitive does under one mesh axis: the placements its inputs must be given (resharded
// to, where they differ) and the placement of its output. The inputs seen by a rule have their
// global shapes.
struct ShardingDecision {
  std::vector<Placement> inputs;
  Placement output;
  // Where the op's Attrs name sizes along a sharded axis (a reshape's target shape, a slice's
  // stop), how they read on the part of the rank at `coordinate` (shard_range, core/distribution.h):
  // applied to the Attrs once per mesh axis.
  std::function<void(Attrs&, int64_t ranks, int64_t coordinate)> localize{};
  // Where a rank's part of the output is not the primitive applied to its inputs' parts, what the
  // rank computes instead, in eddy ops (so it is differentiable), from those parts, the localized
  // Attrs and its coordinate along the mesh axis: a lookup in a table split along the looked-up
  // axis finds the indices in its own rows and gives zeros for the others.
  std::function<Tensor(std::span<const Tensor> locals, const Attrs&, int64_t coordinate)> run_locally{};
};

struct Primitive;

// What a collective (CostClass::collective) lets a rank conclude about the other ranks' values,
// for the compiler's pass over collectives of values every rank holds alike (compiler/passes.h).
struct CollectiveTraits {
  bool sends = true;            // communicates when it runs (false: only its derivatives do)
  bool output_alike = false;    // every rank of the communicator gets the same output
  bool forwards_input = false;  // the output is the input: alike wherever the input is
  // The primitive that gives the same output without communicating when every rank holds the
  // same operand (an all-reduce's sum: the operand times the ranks); null where there is none.
  const Primitive* given_alike_operand = nullptr;
  // Of each byte of the operand, how many one rank sends on `ranks` ranks by the ring algorithms
  // MPI and NCCL use: what the compiler's placement search weighs (compiler/placement_search.h).
  double (*sent_per_operand_byte)(int64_t ranks) = nullptr;
};

struct OutputSpec {
  Shape shape;
  DType dtype;
  // Set by the one primitive whose output is not on its inputs' device (to_device).
  std::optional<Device> device = std::nullopt;
};

using Inputs = std::span<const Tensor>;

// One output's cotangent for a rule over a group of outputs (Primitive::vjp_group): the Attrs of
// the call that gave the output, which say which output it is.
struct OutputCotangent {
  const Attrs* attrs;
  Tensor cotangent;
};

struct Primitive {
  using JvpRule = std::function<Tensor(Inputs, const Attrs&, int input, const Tensor& tangent)>;
  using VjpRule = std::function<Tensor(Inputs, const Attrs&, int input, const Tensor& cotangent)>;
  using OutputRule = std::function<Tensor(Inputs, const Attrs&, const Tensor& output, const Tensor& seed)>;

  std::string_view name;
  int arity = 1;  // number of inputs; -1 for any number (concat); 0 for creation ops
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
  // Optional, instead of vjp, where the inputs' cotangents share their work (a fused backward
  // pass that gives them all, a recomputed segment): every input's cotangent from one call, the
  // entries of inputs not `wanted` left undefined. `output` is the node's value, or undefined
  // where it is no longer alive.
  std::function<std::vector<Tensor>(Inputs, const Attrs&, const Tensor& output, const Tensor& cotangent,
                                    const std::vector<bool>& wanted)>
      vjp_all;
  // Optional, instead of vjp, for primitives whose calls are the outputs of one computation: the
  // calls that share an Attrs::payload ran on the same inputs, and this rule gives every wanted
  // input's cotangent from the cotangents of all those outputs that the backward pass reached, in
  // one call, where a rule per output would repeat the computation's reverse pass once per output
  // (a compiled function's outputs: compiler/compiled_call.cpp).
  std::function<std::vector<Tensor>(Inputs, std::span<const OutputCotangent>, const std::vector<bool>& wanted)>
      vjp_group;
  // Inputs that carry no derivative (indices, conditions).
  std::vector<int> constant_inputs;
  // Linear in its differentiable inputs: the op tests check <A x, y> = <x, A^T y>.
  bool linear = false;
  // Output element i depends only on element i of each (broadcast) input: the compiler fuses
  // chains of these into one loop, and Taylor mode applies scalar calculus to them.
  bool elementwise = false;
  // Linear in each input on its own (mul, matmul): Taylor mode's product rule applies.
  bool bilinear = false;
  // Only moves axes (permute): applied to an input that broadcasts along some axes, it gives the
  // output broadcasting along the same axes, moved. Taylor mode keeps such coefficients broadcast.
  bool moves_axes = false;
  // A reduction that adds its elements up from 0 (sum): the compiler may fold it into the end of
  // a fused loop, accumulating as the loop goes.
  bool additive_reduction = false;
  // The primitive that gives this one's output plus one more input, the addend, in the same
  // kernel (matmul: matmul_add): the compiler's rewrite of a sum that nothing fuses with.
  const Primitive* plus_addend = nullptr;
  // The output is input 0 with terms from the other inputs added in (scatter_add): added to
  // zeros and then to another value, the terms can go onto that value directly.
  bool adds_onto_first_input = false;
  CostClass cost = CostClass::unset;
  Lowering lowering;  // elementwise primitives only
  // The placements of the output given the inputs' (and their global shapes, through Inputs), on
  // one mesh axis of `ranks` ranks (ops/sharding.h). Null: every input is gathered whole and the
  // output replicated, which is right for any op and cheap for none.
  std::function<ShardingDecision(Inputs, const Attrs&, std::span<const Placement>, int64_t ranks)> sharding;
  CollectiveTraits collective;  // collectives only

  bool differentiable_input(int i) const;
  bool has_vjp() const { return vjp || vjp_from_output || vjp_all || vjp_group; }
  // The cotangents of the `wanted` inputs (undefined for the others) through whichever reverse
  // rule the primitive declares; `output` may be undefined where it is no longer alive, and then
  // vjp_from_output is not used (vjp_all is told).
  std::vector<Tensor> input_cotangents(Inputs inputs, const Attrs& attrs, const Tensor& output,
                                       const Tensor& cotangent, const std::vector<bool>& wanted) const;
  bool is_collective() const { return cost == CostClass::collective; }
};

// Registers a primitive and returns the stable reference ops keep.
const Primitive& register_primitive(Primitive primitive);
// Every registered primitive, for the op-table test and the compiler.
const std::deque<Primitive>& all_primitives();
// The registered primitive of that name, or null.
const Primitive* find_primitive(std::string_view name);

// The one dispatch point: every op, in every mode, goes through here. It checks the inputs,
// infers the output and hands the call to the top of the calling thread's interpreter stack.
Tensor dispatch(const Primitive& primitive, Inputs inputs, const Attrs& attrs = {});
inline Tensor dispatch(const Primitive& primitive, std::initializer_list<Tensor> inputs,
                       const Attrs& attrs = {}) {
  return dispatch(primitive, Inputs(inputs.begin(), inputs.size()), attrs);
}

// One op call as dispatch hands it on: inputs checked, output inferred.
struct OpCall {
  const Primitive& primitive;
  Inputs inputs;
  const Attrs& attrs;
  const OutputSpec& spec;

  // The inputs' device, or for a creation op (no inputs) the one its Attrs name.
  Device device() const;
};

// What dispatch does with an op call. Interpreters form a stack per thread, and each handles
// what it is for and hands the call on with interpret_below. From the top:
//  - autodiff's (autodiff/interpreter.cpp), over every stack once it is linked in: tangents at
//    every open forward level, the reverse tape, and the value asked of the interpreters below;
//  - those pushed with InterpreterScope, last pushed on top: a graph recorder over its own
//    evaluator while a function is captured (compiler/trace.cpp);
//  - the kernel evaluator at the bottom.
// So tracing sees every op autodiff emits (a traced training step holds its backward pass), and
// a capture nested in another is invisible to the outer one. The other order, derivatives of a
// captured function, is the compiled-call primitive's rules (compiler/compiled_call.cpp).
class Interpreter {
 public:
  virtual ~Interpreter() = default;
  virtual Tensor interpret(const OpCall& call) = 0;
};

// Installs the interpreter over every thread's stack (autodiff does, while the program starts).
void set_top_interpreter(Interpreter* interpreter);

// Pushes `interpreter` on the calling thread's stack for a scope.
class InterpreterScope {
 public:
  explicit InterpreterScope(Interpreter& interpreter);
  ~InterpreterScope();
  InterpreterScope(const InterpreterScope&) = delete;
  InterpreterScope& operator=(const InterpreterScope&) = delete;
};

// Where dispatch sends a call with a distributed input (core/distribution.h), before the stack:
// eddy::dist installs it when linked in. It runs the op as local ops and collectives, which go
// through dispatch again, so autodiff and tracing see the local program only.
void set_distributed_interpreter(Interpreter* interpreter);

// Hands `call` to the interpreter below `self` on the calling thread's stack.
Tensor interpret_below(const Interpreter& self, const OpCall& call);

// The bottom of every stack: the primitive's eval, on the inputs' device. Trace hooks
// (core/tracing.h) are paused inside, so ops an eval runs internally stay inside its node.
Interpreter& kernel_evaluator();
// Shapes, dtypes and devices from infer and nothing else: each call gives an abstract tensor
// (Tensor::abstract) and no kernel runs. Abstract tracing evaluates with it.
Interpreter& abstract_evaluator();
// How many primitive evaluations the kernel evaluator has run, in every thread since start-up:
// tests count them to show that abstract tracing runs none.
uint64_t kernel_evaluations();

}  // namespace eddy
