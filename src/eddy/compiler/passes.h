#pragma once
// Graph-to-graph optimisations, run between capture and code generation. Every pass keeps the
// graph valid (verify) and every graph output's value; input ids stay the same, and no value id
// is reused, so ids a caller kept still name what they named (output ids may be redirected to an
// equal value: read them from graph.outputs again). Each pass is linear in the graph's size, up
// to hashing: PINN training steps capture thousands of nodes. Each returns whether it changed
// the graph.

#include <string_view>

#include "eddy/compiler/graph.h"

namespace eddy::compiler {

// Drops the nodes no graph output needs, and the captured tensors nothing uses any more.
// Collectives are kept (see is_collective in passes.cpp).
bool eliminate_dead_code(Graph& graph);

// Keeps the first of the nodes that apply the same primitive with equal Attrs to the same
// inputs, and of the small constants with identical shape, dtype and bytes.
bool eliminate_common_subexpressions(Graph& graph);

// Evaluates now the nodes whose inputs are all constants, when their inputs and output are small
// enough (see kMaxFoldedElements), making each a new constant.
bool fold_constants(Graph& graph);

// Rewrites with identities that are exact in the node's dtype: x * 1, x / 1, x - (+0),
// x + (-0), neg(neg(x)), x * -1 -> neg(x), pow(x, 1), pow(x, 2) -> x * x, reshapes of reshapes,
// reshape, expand and cast to what x already is. See simplify.cpp for what is left out and why.
bool simplify_algebra(Graph& graph);

// Rewrites each all_reduce (sum) whose operand every rank of its communicator holds alike into
// allreduce_sum_of_replicated: the operand times the number of ranks, computed where it lies (see
// replicated_collectives.cpp for how a rank learns what the others hold). A collective call at
// compile time: every rank of the step's communicators must compile it together, as they run it
// together. The values stay; derivatives through the graph are still all_reduce's.
bool drop_collectives_of_replicated_values(Graph& graph);

// Whether the pass `name` should run: false when the comma-separated list in the environment
// variable EDDY_COMPILER_DISABLE names it. Read on every call, so tests and users can change it
// between compilations. Throws eddy::Error when `name` or a name in the variable is not one of
// dce, cse, fold, simplify, pad_sum, scatter_sum, gemm_addend, fusion, reduction_epilogue,
// multi_output, rematerialize, buffer_reuse, replicated_collectives, placement_search,
// fused_interior (the PINN solver's fused pass, solvers/pinn/fused_interior.h).
bool pass_enabled(std::string_view name);

// Rewrites each sum of zero-padded values whose parts tile one axis into the concatenation of
// the parts: the cotangent of a value split into slices (an attention's q, k and v), which
// reverse mode sums from each slice's zero-padded cotangent, without the padded arrays. Sums of
// parts that leave gaps combine into the next sum; parts that overlap stay sums. Exact but for
// the sign of zero: a part's -0 is kept, where -0 + 0 gave +0.
bool concatenate_padded_sums(Graph& graph);

// Rewrites x + scatter_add(zeros, axis, index, src), where the scatter has no other use and x
// has the sum's shape, into scatter_add(x, axis, index, src), for every primitive that declares
// adds_onto_first_input (Primitive): the cotangent of a gather (a cross-entropy's picked logits,
// an embedding lookup) summed with another term, without the zero-filled array and the copy of
// it. Exact but for the sign of zero where no index repeats; where one does, the sum is
// reordered, so equal to rounding.
bool scatter_into_sums(Graph& graph);

// Rewrites each add of a product, where the product has no other use and nothing elementwise
// reads the sum (fusion would take the add into its loop), into the primitive its producer names
// as plus_addend (Primitive): matmul's is matmul_add, whose GEMM sums onto the addend as it
// writes its output, instead of a pass that reads the product back. A linear layer's bias before
// a reshape, a gradient summed from two products. Not bit for bit: the GEMM adds the addend to
// its running sums, not to the finished product.
bool fuse_gemm_addends(Graph& graph);

// The registered primitive named `name`, for passes that write nodes of it; an eddy::Error when
// there is none.
const Primitive& registered_primitive(std::string_view name);

// Whether EDDY_COMPILER_VERBOSE (set and not "0") asks the compiler to report what it did.
bool compiler_verbose();

// simplify, fold and cse, repeated while one of them still finds something (a fold can expose a
// constant a rule matches, a rule can make two nodes equal), then pad_sum, scatter_sum,
// gemm_addend and dce; each skipped when disabled. Verifies the graph at the end.
void optimize(Graph& graph);

}  // namespace eddy::compiler
