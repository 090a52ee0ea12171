// Auto-parallel: process meshes, distributed tensors, the sharding rules of the primitives and
// training with sharded data and weights, each against the same computation in one process. Run
// by ctest as a plain process and under mpirun with 2 and 4 ranks (label mpi); every rank runs
// every test in the same order, as SPMD code must.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include "eddy/compiler/compile.h"
#include "eddy/compiler/placement_search.h"
#include "eddy/dist/collectives.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/dist/dtensor.h"
#include "eddy/dist/sharded_optimizer.h"
#include "eddy/eddy.h"
#include "eddy/fft/fft.h"
#include "eddy/io/distributed_checkpoint.h"
#include "eddy/nn/attention.h"
#include "eddy/nn/neural_operators.h"
#include "eddy/nn/transformer.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/clip.h"
#include "support/expect_error.h"
#include "support/job_directory.h"
#include "tiny_llama.h"

namespace eddy::dist {
namespace {

using Meshes = std::vector<std::shared_ptr<const ProcessMesh>>;

// One axis over every rank, and two axes: 2 x size/2 where the size is even, 1 x size otherwise.
// Made once: making a mesh is collective.
const Meshes& meshes() {
  static const Meshes made = [] {
    const int64_t size = world().size();
    const Shape two_axes = size % 2 == 0 ? Shape{2, size / 2} : Shape{1, size};
    return Meshes{ProcessMesh::create({size}, {"x"}), ProcessMesh::create(two_axes, {"dp", "mp"})};
  }();
  return made;
}

// The same values on every rank.
Tensor common(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Generator generator(seed);
  return randn(shape, dtype, &generator);
}

double relative_difference(const Tensor& got, const Tensor& want) {
  const double scale = std::max(1.0, max(abs(want)).item<double>());
  return max(abs(got - want)).item<double>() / scale;
}

const Placement R = Placement::replicate();
const Placement P = Placement::partial_sum();
Placement S(int64_t axis) { return Placement::shard(axis); }

// Every placement of a tensor of `shape` over `mesh` that shard_tensor and reshard accept, with
// partial sums where `with_partial`; shards only along axes the mesh axis divides unless
// `uneven`.
std::vector<std::vector<Placement>> placements_for(const Shape& shape, const ProcessMesh& mesh, bool with_partial,
                                                   bool uneven = false) {
  std::vector<Placement> each{R};
  if (with_partial) each.push_back(P);
  for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) each.push_back(S(axis));
  std::vector<std::vector<Placement>> all{{}};
  for (int64_t mesh_axis = 0; mesh_axis < mesh.ndim(); ++mesh_axis) {
    std::vector<std::vector<Placement>> longer;
    for (const auto& start : all) {
      for (const Placement& placement : each) {
        if (placement.is_shard()) {
          if (!uneven && shape[static_cast<size_t>(placement.axis)] % mesh.size(mesh_axis) != 0) continue;
          if (std::find(start.begin(), start.end(), placement) != start.end()) continue;
        }
        auto grown = start;
        grown.push_back(placement);
        longer.push_back(grown);
      }
    }
    all = longer;
  }
  return all;
}

TEST(ProcessMesh, CoordinatesAndAxisCommunicators) {
  for (const auto& mesh : meshes()) {
    int64_t linear = 0;
    for (int64_t axis = 0; axis < mesh->ndim(); ++axis) {
      linear = linear * mesh->size(axis) + mesh->coordinate(axis);
      Communicator& along = mesh->communicator(axis);
      EXPECT_EQ(along.size(), mesh->size(axis));
      EXPECT_EQ(along.rank(), mesh->coordinate(axis));
      // The sum of the world ranks in this rank's group along the axis.
      int64_t stride = 1;
      for (int64_t later = axis + 1; later < mesh->ndim(); ++later) stride *= mesh->size(later);
      const int64_t first = world().rank() - mesh->coordinate(axis) * stride;
      double expected = 0;
      for (int64_t i = 0; i < mesh->size(axis); ++i) expected += static_cast<double>(first + i * stride);
      EXPECT_EQ(all_reduce(full({}, world().rank(), DType::f64), ReduceOp::sum, along).item<double>(), expected);
    }
    EXPECT_EQ(linear, world().rank());
  }
  EXPECT_EQ(meshes()[1]->axis("mp"), 1);
}

TEST(ProcessMesh, RefusesAShapeThatIsNotTheJob) {
  try {
    ProcessMesh::create({world().size() + 1}, {"x"});
    FAIL() << "a mesh larger than the job was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np " + std::to_string(world().size() + 1)), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ProcessMesh::create({world().size(), 1}, {"a", "a"}), Error);
  try {
    meshes()[1]->axis("tp");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(dp, mp)"), std::string::npos) << e.what();
  }
}

TEST(DistributedTensor, ShardsAndGathersBack) {
  const Tensor whole = common({4, 8}, 1);
  for (const auto& mesh : meshes()) {
    for (const auto& placements : placements_for(whole.shape(), *mesh, false)) {
      const Tensor distributed = shard_tensor(whole, mesh, placements);
      SCOPED_TRACE(to_string(placements));
      EXPECT_EQ(distributed.shape(), whole.shape());
      EXPECT_TRUE(is_distributed(distributed));
      Shape local = whole.shape();
      for (int64_t axis = 0; axis < mesh->ndim(); ++axis) {
        if (placements[static_cast<size_t>(axis)].is_shard()) local[placements[static_cast<size_t>(axis)].axis] /= mesh->size(axis);
      }
      EXPECT_EQ(to_local(distributed).shape(), local);
      EXPECT_EQ(relative_difference(full_tensor(distributed), whole), 0.0);
    }
  }
}

TEST(DistributedTensor, ReshardsBetweenEveryPairOfPlacements) {
  const Tensor whole = common({4, 8}, 2);
  for (const auto& mesh : meshes()) {
    const auto all = placements_for(whole.shape(), *mesh, true);
    const Tensor replicated = shard_tensor(whole, mesh, std::vector<Placement>(static_cast<size_t>(mesh->ndim())));
    for (const auto& from : all) {
      const Tensor source = reshard(replicated, from);
      for (const auto& to : all) {
        SCOPED_TRACE(to_string(from) + " -> " + to_string(to));
        const Tensor moved = reshard(source, to);
        EXPECT_EQ(placements_of(moved), to);
        EXPECT_LT(relative_difference(full_tensor(moved), whole), 1e-15);
      }
    }
  }
}

// A shard moving from one axis to another goes through one all-to-all, which sends each rank's
// part once (a gather would send the whole tensor to every rank), and lands every element where
// its new placement puts it, whichever two of three axes it moves between.
TEST(DistributedTensor, MovesAShardBetweenAxesWithOneAllToAll) {
  const auto& line = meshes()[0];
  const Tensor whole = common({4, 4, 8}, 14);
  for (int64_t from = 0; from < 3; ++from) {
    const Tensor source = shard_tensor(whole, line, {S(from)});
    for (int64_t to = 0; to < 3; ++to) {
      if (to == from) continue;
      SCOPED_TRACE("Shard(" + std::to_string(from) + ") -> Shard(" + std::to_string(to) + ")");
      const CollectiveTraffic before = collective_traffic();
      const Tensor moved = reshard(source, {S(to)});
      const CollectiveTraffic after = collective_traffic();
      EXPECT_EQ(to_local(moved).shape(), to_local(shard_tensor(whole, line, {S(to)})).shape());
      EXPECT_EQ(relative_difference(full_tensor(moved), whole), 0.0);
      if (line->size(0) > 1) {
        EXPECT_EQ(after.calls - before.calls, 1);
        EXPECT_EQ(after.bytes - before.bytes, to_local(source).numel() * 8);
      }
    }
  }
}

// copy_ of an ordinary tensor (every rank's whole value) into a distributed one keeps each
// rank's part: how a checkpoint of one process loads into sharded parameters.
TEST(DistributedTensor, CopyOfTheWholeKeepsEachRanksPart) {
  for (const auto& mesh : meshes()) {
    const Tensor whole = common({4, 8}, 11);
    for (const auto& placements : placements_for(whole.shape(), *mesh, false)) {
      Tensor target = shard_tensor(zeros({4, 8}, DType::f64), mesh, placements);
      target.copy_(whole);
      EXPECT_EQ(relative_difference(full_tensor(target), whole), 0.0) << to_string(placements);
      target.copy_(common({8}, 12));  // broadcast along axis 0
      EXPECT_EQ(relative_difference(full_tensor(target), expand(common({8}, 12), {4, 8})), 0.0);
    }
  }
  Tensor partial = reshard(shard_tensor(zeros({4, 8}, DType::f64), meshes()[0], {R}), {P});
  EXPECT_THROW(partial.copy_(common({4, 8}, 13)), Error);
  Tensor sharded = shard_tensor(zeros({4, 8}, DType::f64), meshes()[0], {S(0)});
  EXPECT_THROW(sharded.copy_(common({8, 4}, 13)), Error);
}

TEST(DistributedTensor, ErrorsNameTheShapeAndPlacement) {
  const auto& mesh = meshes()[0];
  if (mesh->size(0) > 1) {
    const Tensor sharded = shard_tensor(common({4, 8}, 4), mesh, {S(0)});
    try {
      sharded.to_vector<double>();
      FAIL() << "a sharded tensor was read as a whole";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dist::full_tensor"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(shard_tensor(common({4, 8}, 5), mesh, {P}), Error);
  EXPECT_THROW(shard_tensor(common({4, 8}, 5), mesh, {S(0), R}), Error);
  const Tensor on_first = shard_tensor(common({4, 8}, 6), meshes()[0], {R});
  const Tensor on_second = shard_tensor(common({4, 8}, 6), meshes()[1], {R, R});
  EXPECT_THROW(on_first + on_second, Error);
}

// A compiled training step of distributed inputs: the graph is each rank's local program, with
// its collectives, and gives the eager step's loss and gradients.
TEST(DistributedTensor, CompiledStepsMatchEagerOnes) {
  const auto& mesh = meshes()[0];
  const Tensor x = shard_tensor(common({16, 4}, 8), mesh, {S(0)});
  const Tensor w1 = shard_tensor(common({4, 8}, 9).requires_grad_(), mesh, {S(1)});
  const Tensor w2 = shard_tensor(common({8, 2}, 10).requires_grad_(), mesh, {S(0)});
  const compiler::TensorFunction step = [](const std::vector<Tensor>& in) {
    const Tensor loss = mean(square(matmul(tanh(matmul(in[0], in[1])), in[2])));
    std::vector<Tensor> out{loss};
    for (const Tensor& g : grad({loss}, {in[1], in[2]})) out.push_back(g);
    return out;
  };
  const std::vector<Tensor> want = step({x, w1, w2});
  CompiledFunction compiled = compile(step);
  for (int call = 0; call < 2; ++call) {  // the trace, then the compiled program
    const std::vector<Tensor> got = compiled({x, w1, w2});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(placements_of(got[i]), placements_of(want[i])) << "output " << i;
      EXPECT_LT(relative_difference(full_tensor(got[i]), full_tensor(want[i])), 1e-12) << "output " << i;
    }
  }
  EXPECT_EQ(compiled.stats().traces, 1);
  const compiler::Program* program = compiled.program_for({x, w1, w2});
  ASSERT_NE(program, nullptr);
  // Rows of x with columns of w1: the rules gather w1 and keep the rows split, which the
  // backward pass reduces and scatters again.
  const std::string graph = program->graph().to_string();
  const bool several_ranks = mesh->size(0) > 1;
  EXPECT_EQ(graph.find("allgather") != std::string::npos, several_ranks) << graph;
  EXPECT_EQ(graph.find("reduce_scatter") != std::string::npos, several_ranks) << graph;
}

// A partial sum read by several ops is summed once, by the first that needs it whole, and its
// cotangents from all the readers once in the backward pass: a norm and two projections of one
// residual branch cost one all-reduce each way, as in Megatron-LM. A sum made without autodiff
// is not reused where autodiff records. (Seeded with an ordinary tensor, which the backward pass
// cannot vouch for: seeded with ones, the cotangents are every rank's and their sum sends nothing.)
TEST(DistributedTensor, APartialValueIsReducedOnceForAllItsReaders) {
  const auto& mesh = meshes()[0];
  const Tensor a_whole = common({8, 4}, 30), b_whole = common({4, 6}, 31);
  const Tensor w1 = common({6, 3}, 32), w2 = common({6, 5}, 33);
  const Tensor a = shard_tensor(a_whole.detach().requires_grad_(), mesh, {S(1)});
  const Tensor b = shard_tensor(b_whole.detach().requires_grad_(), mesh, {S(0)});
  auto readers = [&](const Tensor& h) {  // the square first: it needs h whole
    const Tensor squares = sum(h * h);
    const Tensor first = squares + sum(matmul(h, w1));
    return first + sum(matmul(h, w2));
  };

  const Tensor h = matmul(a, b);
  ASSERT_EQ(placements_of(h), std::vector<Placement>{P});
  {
    NoGradGuard no_grad;
    readers(h);
  }
  const CollectiveTraffic before = collective_traffic();
  const Tensor y = readers(h);
  const CollectiveTraffic after_forward = collective_traffic();
  const std::vector<Tensor> grads = grad({y}, {a, b}, {ones({}, DType::f64)});
  const CollectiveTraffic after_backward = collective_traffic();
  const int64_t expected_calls = mesh->size(0) > 1 ? 1 : 0;
  EXPECT_EQ(after_forward.calls - before.calls, expected_calls);
  EXPECT_EQ(after_backward.calls - after_forward.calls, expected_calls);
  const std::vector<Tensor> grads_seeded_with_ones = grad({y}, {a, b});
  EXPECT_EQ(collective_traffic().calls, after_backward.calls);
  EXPECT_LT(relative_difference(full_tensor(grads_seeded_with_ones[0]), full_tensor(grads[0])), 1e-12);

  const Tensor a_one = a_whole.detach().requires_grad_(), b_one = b_whole.detach().requires_grad_();
  const Tensor y_one = readers(matmul(a_one, b_one));
  const std::vector<Tensor> grads_one = grad({y_one}, {a_one, b_one});
  EXPECT_LT(relative_difference(full_tensor(y), y_one), 1e-12);
  EXPECT_LT(relative_difference(full_tensor(grads[0]), grads_one[0]), 1e-12);
  EXPECT_LT(relative_difference(full_tensor(grads[1]), grads_one[1]), 1e-12);

  // A gradient laid out as the partial value it differentiates holds other values: it reduces
  // its own, not the value's kept reduction.
  const Tensor cotangent = grad({sum(h * h)}, {h})[0];
  const Tensor cotangent_whole = full_tensor(cotangent);
  EXPECT_LT(relative_difference(full_tensor(cotangent * cotangent), cotangent_whole * cotangent_whole), 1e-12);

  // zeros_like and ones_like of the reduced partial value are zeros and ones: they took its kept
  // reduction as their values, so relu(h) returned h.
  const Tensor h_whole = matmul(a_whole, b_whole);
  EXPECT_LT(relative_difference(full_tensor(zeros_like(h)), zeros_like(h_whole)), 1e-12);
  EXPECT_LT(relative_difference(full_tensor(ones_like(h)), ones_like(h_whole)), 1e-12);
  EXPECT_LT(relative_difference(full_tensor(relu(h)), relu(h_whole)), 1e-12);

  // A partial maximum alike: one all_reduce(max) however many ops read it.
  const Tensor row_max = max(a.detach(), {1});
  ASSERT_EQ(placements_of(row_max), std::vector<Placement>{Placement::partial_max()});
  const CollectiveTraffic before_max = collective_traffic();
  const Tensor squares = row_max * row_max;
  const Tensor shifted = squares + row_max;
  EXPECT_EQ(collective_traffic().calls - before_max.calls, expected_calls);
  const Tensor max_one = max(a_whole, {1});
  EXPECT_LT(relative_difference(full_tensor(shifted), max_one * max_one + max_one), 1e-12);
}

// Megatron's MLP, compiled: the all_reduce of the second layer's partial products stays, and the
// backward pass's all_reduces (of the loss's cotangent there and of the replicated bias's
// gradient) act on values every rank holds alike, so they send nothing. Values and gradients
// are the eager step's. The bias is a replicated distributed tensor, whose gradient is summed over
// the mesh axis, or an ordinary one, whose gradient is summed over the world: the axis's
// knowledge serves the world's sum, both spanning every rank.
TEST(DistributedTensor, CompiledTensorParallelStepSendsOnlyTheForwardSum) {
  const auto& mesh = meshes()[0];
  const int64_t batch = 8, width = 4, hidden = 8;
  const Tensor x = common({batch, width}, 20), target = common({batch, width}, 21);
  for (const bool ordinary_bias : {false, true}) {
    SCOPED_TRACE(ordinary_bias ? "ordinary bias" : "replicated bias");
    const Tensor bias = common({width}, 25).requires_grad_();
    const std::vector<Tensor> params{shard_tensor(common({width, hidden}, 22).requires_grad_(), mesh, {S(1)}),
                                     shard_tensor(common({hidden}, 23).requires_grad_(), mesh, {S(0)}),
                                     shard_tensor(common({hidden, width}, 24).requires_grad_(), mesh, {S(0)}),
                                     ordinary_bias ? bias : shard_tensor(bias, mesh, {R})};
    const compiler::TensorFunction step = [&](const std::vector<Tensor>& in) {
      const Tensor y = matmul(tanh(matmul(x, in[0]) + in[1]), in[2]) + in[3];
      const Tensor loss = mean(square(y - target));
      std::vector<Tensor> out{loss};
      for (const Tensor& g : grad({loss}, in)) out.push_back(g);
      return out;
    };
    const std::vector<Tensor> want = step(params);
    CompiledFunction compiled = compile(step);
    setenv("EDDY_COMPILER_VERBOSE", "1", 1);
    ::testing::internal::CaptureStderr();
    compiled(params);  // the trace, which says what the compiled step sends
    const std::string printed = ::testing::internal::GetCapturedStderr();
    unsetenv("EDDY_COMPILER_VERBOSE");
    const bool several_ranks = mesh->size(0) > 1;
    if (several_ranks && world().rank() == 0) {
      EXPECT_NE(printed.find(cat("2 all_reduces of replicated values (288 bytes) need no communication; the step's "
                                 "collectives: allreduce_sum of 256 bytes over ", world().size(),
                                 " ranks, 256 bytes in all")),
                std::string::npos)
          << printed;
    }
    const int64_t bytes_before = collective_traffic().bytes;
    const std::vector<Tensor> got = compiled(params);
    const int64_t bytes = collective_traffic().bytes - bytes_before;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(is_distributed(got[i]), is_distributed(want[i])) << "output " << i;
      if (is_distributed(want[i])) {
        EXPECT_EQ(placements_of(got[i]), placements_of(want[i])) << "output " << i;
      }
      EXPECT_LT(relative_difference(full_tensor(got[i]), full_tensor(want[i])), 1e-12) << "output " << i;
    }
    EXPECT_EQ(bytes, several_ranks ? batch * width * 8 : 0);
    const std::string graph = compiled.program_for(params)->graph().to_string();
    auto count = [&](const std::string& what) {
      int64_t found = 0;
      for (size_t at = graph.find(what); at != std::string::npos; at = graph.find(what, at + 1)) ++found;
      return found;
    };
    EXPECT_EQ(count("allreduce_sum("), several_ranks ? 1 : 0) << graph;
    EXPECT_EQ(count("allreduce_sum_of_replicated("), several_ranks ? 2 : 0) << graph;
  }
}

// Megatron's MLP, eagerly: the backward pass knows the loss's cotangent is every rank's (its seed
// and each value it passes through are replicated), so the transpose of the forward all_reduce
// and the bias's gradient sum send nothing, as in the compiled step above; an ordinary bias's sum
// over the whole job too, the mesh axis spanning it. A loss each rank makes its own way from a
// replicated value (to_local) gets the full sum.
TEST(DistributedTensor, EagerTensorParallelStepSendsOnlyTheForwardSum) {
  const auto& mesh = meshes()[0];
  const int64_t batch = 8, width = 4, hidden = 8;
  const bool several_ranks = mesh->size(0) > 1;
  const Tensor x = common({batch, width}, 20), target = common({batch, width}, 21);
  const std::vector<Tensor> whole{common({width, hidden}, 22), common({hidden}, 23), common({hidden, width}, 24),
                                  common({width}, 25)};
  auto mlp = [&](const std::vector<Tensor>& in) { return matmul(tanh(matmul(x, in[0]) + in[1]), in[2]) + in[3]; };
  std::vector<Tensor> one_process;
  for (const Tensor& w : whole) one_process.push_back(w.detach().requires_grad_());
  const Tensor loss_one = mean(square(mlp(one_process) - target));
  const std::vector<Tensor> grads_one = grad({loss_one}, one_process);

  for (const bool ordinary_bias : {false, true}) {
    SCOPED_TRACE(ordinary_bias ? "ordinary bias" : "replicated bias");
    const Tensor bias = whole[3].detach().requires_grad_();
    const std::vector<Tensor> params{shard_tensor(whole[0].detach().requires_grad_(), mesh, {S(1)}),
                                     shard_tensor(whole[1].detach().requires_grad_(), mesh, {S(0)}),
                                     shard_tensor(whole[2].detach().requires_grad_(), mesh, {S(0)}),
                                     ordinary_bias ? bias : shard_tensor(bias, mesh, {R})};
    const CollectiveTraffic before = collective_traffic();
    const Tensor loss = mean(square(mlp(params) - target));
    const CollectiveTraffic after_forward = collective_traffic();
    const std::vector<Tensor> grads = grad({loss}, params);
    const CollectiveTraffic after_backward = collective_traffic();
    EXPECT_EQ(after_forward.bytes - before.bytes, several_ranks ? batch * width * 8 : 0);
    EXPECT_EQ(after_backward.bytes - after_forward.bytes, 0);
    EXPECT_LT(relative_difference(full_tensor(loss), loss_one), 1e-12);
    for (size_t i = 0; i < grads.size(); ++i) {
      const Tensor got = is_distributed(grads[i]) ? full_tensor(grads[i]) : grads[i];
      EXPECT_LT(relative_difference(got, grads_one[i]), 1e-12) << "gradient " << i;
    }
  }

  // Rank r's loss is (r + 1) times the sum of the output: the differentiated quantity (the sum over
  // ranks) is size (size + 1) / 2 times it, which only summing the cotangents gives.
  const std::vector<Tensor> params{shard_tensor(whole[0].detach().requires_grad_(), mesh, {S(1)}),
                                   shard_tensor(whole[1].detach().requires_grad_(), mesh, {S(0)}),
                                   shard_tensor(whole[2].detach().requires_grad_(), mesh, {S(0)}),
                                   shard_tensor(whole[3].detach().requires_grad_(), mesh, {R})};
  const double size = world().size();
  const Tensor own_loss = sum(to_local(mlp(params))) * static_cast<double>(world().rank() + 1);
  const CollectiveTraffic before = collective_traffic();
  const std::vector<Tensor> grads = grad({own_loss}, params);
  EXPECT_EQ(collective_traffic().bytes > before.bytes, several_ranks);
  const std::vector<Tensor> sum_grads_one = grad({sum(mlp(one_process)) * (size * (size + 1) / 2)}, one_process);
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_LT(relative_difference(full_tensor(grads[i]), sum_grads_one[i]), 1e-12) << "gradient " << i;
  }

  // Second order through the sums that send nothing: the gradient of the squared gradient norm.
  auto gradient_norm_gradient = [&](const std::vector<Tensor>& ps) {
    const std::vector<Tensor> first = grad({mean(square(mlp(ps) - target))}, ps, {}, true);
    Tensor norm = sum(square(first[0]));
    for (size_t i = 1; i < first.size(); ++i) norm = norm + sum(square(first[i]));
    return grad({norm}, ps);
  };
  const std::vector<Tensor> second = gradient_norm_gradient(params);
  const std::vector<Tensor> second_one = gradient_norm_gradient(one_process);
  for (size_t i = 0; i < second.size(); ++i) {
    EXPECT_LT(relative_difference(full_tensor(second[i]), second_one[i]), 1e-12) << "second order, parameter " << i;
  }
}

// Each rank's graph alone cannot tell that a constant it made is every rank's: a sum over the ranks
// of one that depends on the rank still communicates, and of one that does not, does not.
TEST(DistributedTensor, CompiledSumsOfConstantsCommunicateWhereTheRanksDiffer) {
  const auto& mesh = meshes()[0];
  const Tensor x = shard_tensor(common({4}, 26), mesh, {R});
  const double rank = world().rank(), size = world().size();
  const compiler::TensorFunction sums = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] + all_reduce(full({4}, rank, DType::f64), ReduceOp::sum, world()),
                               in[0] + all_reduce(tensor<double>({rank, 1, 2, 3}), ReduceOp::sum, world()),
                               in[0] + all_reduce(full({4}, 2.0, DType::f64), ReduceOp::sum, world())};
  };
  CompiledFunction compiled = compile(sums);
  for (int call = 0; call < 2; ++call) {  // the trace, then the compiled program
    const std::vector<Tensor> got = compiled({x});
    const Tensor whole = full_tensor(x);
    EXPECT_LT(relative_difference(full_tensor(got[0]), whole + size * (size - 1) / 2), 1e-15) << "call " << call;
    EXPECT_LT(relative_difference(full_tensor(got[1]), whole + tensor<double>({size * (size - 1) / 2, size, 2 * size,
                                                                                3 * size})),
              1e-15) << "call " << call;
    EXPECT_LT(relative_difference(full_tensor(got[2]), whole + 2 * size), 1e-15) << "call " << call;
  }
  const std::string graph = compiled.program_for({x})->graph().to_string();
  if (world().size() > 1) {
    EXPECT_NE(graph.find("allreduce_sum("), std::string::npos) << graph;
  }
  EXPECT_NE(graph.find("allreduce_sum_of_replicated("), std::string::npos) << graph;
}

// Saved sharded and partial, loaded into other layouts; and what a load refuses (the N-to-M loads
// of a whole model: tests/dist/checkpoint_on_ranks.sh).
TEST(DistributedCheckpoint, LoadsIntoAnyLayoutAndRefusesAMismatch) {
  JobDirectory directory("eddy_distributed_checkpoint_");
  const std::string path = (directory.path() / "state").string();
  const auto& mesh = meshes()[0];
  const Tensor w = common({4, 8}, 60), m = common({8}, 61), step = full({}, 3.0, DType::f64);
  const Tensor partial_w = reshard(shard_tensor(w, mesh, {R}), {P});
  io::save_distributed_state(path, {{"w", shard_tensor(w, mesh, {S(1)})}, {"m", shard_tensor(m, mesh, {S(0)})},
                                    {"p", partial_w}, {"step", step}});
  const nn::StateDict into{{"w", shard_tensor(zeros({4, 8}, DType::f64), mesh, {S(0)})},
                           {"m", zeros({8}, DType::f64)},
                           {"p", shard_tensor(zeros({4, 8}, DType::f64), mesh, {R})},
                           {"step", zeros({}, DType::f64)}};
  io::load_distributed_state(path, into);
  EXPECT_EQ(relative_difference(full_tensor(into.at("w")), w), 0.0);
  EXPECT_EQ(relative_difference(into.at("m"), m), 0.0);
  EXPECT_LT(relative_difference(full_tensor(into.at("p")), w), 1e-15);
  EXPECT_EQ(into.at("step").item<double>(), 3.0);

  nn::StateDict wrong = into;
  wrong["w"] = zeros({8, 4}, DType::f64);
  try {
    io::load_distributed_state(path, wrong);
    FAIL() << "a checkpoint loaded into the wrong shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"w\" was saved [4, 8] float64 but is loaded into [8, 4]"), std::string::npos)
        << e.what();
  }
  wrong = into;
  wrong.erase("p");
  EXPECT_THROW(io::load_distributed_state(path, wrong), Error);
  EXPECT_THROW(io::load_distributed_state((directory.path() / "nothing").string(), into), Error);
}

// An op on distributed inputs against the op in one process: the value, and the gradients of
// sum(op(inputs) * weight) with respect to every input, for every placement of the inputs.
struct OpCase {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(const std::vector<Tensor>&)> op;
};

std::vector<OpCase> op_cases() {
  return {
      {"add (broadcast)", {{4, 8}, {8}}, [](const auto& x) { return x[0] + x[1]; }},
      {"mul", {{4, 8}, {4, 8}}, [](const auto& x) { return x[0] * x[1]; }},
      {"div", {{4, 8}, {4, 8}}, [](const auto& x) { return x[0] / (square(x[1]) + 1.0); }},
      {"tanh * x", {{4, 8}, {4, 8}}, [](const auto& x) { return tanh(x[0]) * x[1]; }},
      {"matmul", {{4, 8}, {8, 4}}, [](const auto& x) { return matmul(x[0], x[1]); }},
      {"batched matmul", {{2, 4, 8}, {8, 4}}, [](const auto& x) { return matmul(x[0], x[1]); }},
      {"matmul_add (bias)", {{4, 8}, {8, 4}, {4}}, [](const auto& x) { return matmul_add(x[0], x[1], x[2]); }},
      {"matmul_add", {{4, 8}, {8, 4}, {4, 4}}, [](const auto& x) { return matmul_add(x[0], x[1], x[2]); }},
      {"sum over axis 1", {{4, 8}}, [](const auto& x) { return sum(x[0], {1}); }},
      {"max over axis 0", {{4, 8}}, [](const auto& x) { return max(x[0], {0}); }},
      {"mean", {{4, 8}}, [](const auto& x) { return mean(x[0]); }},
      {"transpose", {{4, 8}}, [](const auto& x) { return transpose(x[0]); }},
      {"reshape (merge)", {{4, 8}}, [](const auto& x) { return reshape(x[0], {32}); }},
      {"reshape (split)", {{8, 4}}, [](const auto& x) { return reshape(x[0], {4, 2, 4}); }},
      {"expand", {{1, 8}, {4, 8}}, [](const auto& x) { return expand(x[0], {4, 8}) * x[1]; }},
      {"softmax", {{4, 8}}, [](const auto& x) { return softmax(x[0], 1); }},
      {"slice", {{4, 8}}, [](const auto& x) { return slice(x[0], 1, 2, 6); }},
      {"pad", {{4, 8}}, [](const auto& x) { return pad(x[0], {0, 1}, {0, 2}); }},
      {"concat", {{4, 8}, {4, 8}}, [](const auto& x) { return concat({x[0], x[1]}, 1); }},
      {"rfft, scale, irfft", {{4, 8}}, [](const auto& x) { return fft::irfft(fft::rfft(x[0]) * 2.0, 8); }},
      {"abs of fft", {{4, 8}}, [](const auto& x) { return abs(fft::fft(cast(x[0], DType::c128))); }},
      {"abs of fft along axis 0", {{4, 8}}, [](const auto& x) {
         return abs(fft::fft(cast(x[0], DType::c128), -1, 0));
       }},
      {"rfft2, scale, irfft2", {{4, 4, 8}}, [](const auto& x) {
         return fft::irfft2(fft::rfft2(x[0]) * 2.0, {4, 8});
       }},
      {"index_select", {{4, 8}}, [](const auto& x) {
         return index_select(x[0], 1, arange(0, 6, 2, DType::i64));
       }},
      {"gather", {{4, 8}}, [](const auto& x) {
         return gather(x[0], 1, tensor(std::vector<int64_t>{1, 7, 3, 4, 0, 5, 6, 2}, {4, 2}));
       }},
      {"cross_entropy", {{4, 8}}, [](const auto& x) {
         return cross_entropy(x[0], tensor(std::vector<int64_t>{1, 7, 3, 0}));
       }},
  };
}

void check_op_case(const OpCase& c, const std::shared_ptr<const ProcessMesh>& mesh, bool uneven = false) {
  std::vector<Tensor> wholes;
  for (size_t i = 0; i < c.shapes.size(); ++i) wholes.push_back(common(c.shapes[i], 10 + i).requires_grad_());
  const Tensor want = c.op(wholes);
  const Tensor weight = common(want.shape(), 99);
  backward(sum(want * weight));
  std::vector<Tensor> want_grads;
  for (Tensor& whole : wholes) want_grads.push_back(whole.grad());

  // Every combination of the inputs' placements.
  std::vector<std::vector<std::vector<Placement>>> choices;
  for (const Shape& shape : c.shapes) choices.push_back(placements_for(shape, *mesh, true, uneven));
  std::vector<size_t> pick(c.shapes.size(), 0);
  for (bool more = true; more;) {
    std::vector<Tensor> leaves, inputs;
    std::string described;
    for (size_t i = 0; i < pick.size(); ++i) {
      const auto& placements = choices[i][pick[i]];
      // A partial input is resharded from a replicated leaf, whose gradient is then whole.
      leaves.push_back(shard_tensor(wholes[i].detach().requires_grad_(), mesh,
                                    std::vector<Placement>(placements.size())));
      inputs.push_back(reshard(leaves.back(), placements));
      described += (i ? " " : "") + to_string(placements);
    }
    SCOPED_TRACE(c.name + " on " + mesh->describe() + " with " + described);
    const Tensor got = c.op(inputs);
    EXPECT_LT(relative_difference(full_tensor(got), want.detach()), 1e-12);
    backward(sum(got * weight));
    for (size_t i = 0; i < leaves.size(); ++i) {
      EXPECT_LT(relative_difference(full_tensor(leaves[i].grad()), want_grads[i]), 1e-12) << "input " << i;
    }
    more = false;
    for (size_t i = 0; i < pick.size() && !more; ++i) {
      more = ++pick[i] < choices[i].size();
      if (!more) pick[i] = 0;
    }
  }
}

TEST(ShardingRules, EveryPlacementGivesTheOneProcessValueAndGradient) {
  for (const auto& mesh : meshes()) {
    for (const OpCase& c : op_cases()) check_op_case(c, mesh);
  }
}

// Axes of 5, 7 and 3 split over 2 or 4 ranks in parts a row apart (on 4 ranks, 3 rows leave one
// rank none): the rules keep such splits where the parts still line up (elementwise ops, matmul,
// reductions, a reshape that adds or drops unit axes), gather where they would not (a merge
// whose leading axis splits unevenly, a lookup in an unevenly split table, an FFT axis), and the
// collectives move parts of different sizes.
std::vector<OpCase> uneven_op_cases() {
  return {
      {"add (broadcast)", {{5, 7}, {7}}, [](const auto& x) { return x[0] + x[1]; }},
      {"tanh * x", {{5, 7}, {5, 7}}, [](const auto& x) { return tanh(x[0]) * x[1]; }},
      {"matmul", {{5, 7}, {7, 3}}, [](const auto& x) { return matmul(x[0], x[1]); }},
      {"batched matmul", {{3, 5, 7}, {7, 3}}, [](const auto& x) { return matmul(x[0], x[1]); }},
      {"matmul_add", {{5, 7}, {7, 3}, {5, 3}}, [](const auto& x) { return matmul_add(x[0], x[1], x[2]); }},
      {"sum over axis 1", {{5, 7}}, [](const auto& x) { return sum(x[0], {1}); }},
      {"max over axis 0", {{5, 7}}, [](const auto& x) { return max(x[0], {0}); }},
      // On 4 ranks one holds none of the 3 rows: a maximum over them is gathered first.
      {"max over a short axis", {{3, 7}}, [](const auto& x) { return max(x[0], {0}); }},
      {"softmax over a short axis", {{3, 7}}, [](const auto& x) { return softmax(x[0], 0); }},
      {"sum over a short axis", {{3, 7}}, [](const auto& x) { return sum(x[0], {0}); }},
      {"mean", {{5, 7}}, [](const auto& x) { return mean(x[0]); }},
      {"transpose", {{5, 7}}, [](const auto& x) { return transpose(x[0]); }},
      {"reshape (unit axis added)", {{5, 3}}, [](const auto& x) { return reshape(x[0], {5, 1, 3}); }},
      {"reshape (merge)", {{5, 3}}, [](const auto& x) { return reshape(x[0], {15}); }},
      {"reshape (split)", {{15}}, [](const auto& x) { return reshape(x[0], {5, 3}); }},
      {"expand", {{1, 7}, {5, 7}}, [](const auto& x) { return expand(x[0], {5, 7}) * x[1]; }},
      {"softmax", {{5, 7}}, [](const auto& x) { return softmax(x[0], 1); }},
      {"slice", {{5, 7}}, [](const auto& x) { return slice(x[0], 1, 2, 6); }},
      {"concat", {{5, 7}, {5, 3}}, [](const auto& x) { return concat({x[0], x[1]}, 1); }},
      {"rfft, scale, irfft", {{5, 6}}, [](const auto& x) { return fft::irfft(fft::rfft(x[0]) * 2.0, 6); }},
      {"index_select", {{5, 7}}, [](const auto& x) { return index_select(x[0], 1, arange(0, 6, 2, DType::i64)); }},
      {"cross_entropy", {{5, 7}}, [](const auto& x) {
         return cross_entropy(x[0], tensor(std::vector<int64_t>{1, 6, 3, 0, 2}));
       }},
  };
}

TEST(ShardingRules, UnevenSplitsGiveTheOneProcessValueAndGradient) {
  for (const auto& mesh : meshes()) {
    for (const OpCase& c : uneven_op_cases()) check_op_case(c, mesh, true);
  }
}

// Each rank's part of an unevenly split tensor is its shard_range, whichever way it got there.
TEST(DistributedTensor, UnevenPartsAreEachRanksShardRange) {
  const auto& mesh = meshes()[0];
  const int64_t ranks = mesh->size(0), coordinate = mesh->coordinate(0);
  for (const int64_t rows : {int64_t{3}, int64_t{5}, int64_t{7}}) {
    SCOPED_TRACE(cat(rows, " rows over ", ranks, " ranks"));
    const Tensor whole = common({rows, 2}, 60);
    const ShardRange mine = shard_range(rows, ranks, coordinate);
    const Tensor want = slice(whole, 0, mine.first, mine.last);
    const Tensor sharded = shard_tensor(whole, mesh, {S(0)});
    EXPECT_EQ(to_local(sharded).shape(), (Shape{mine.size(), 2}));
    // (3 rows on 4 ranks: one holds none.)
    if (mine.size() > 0) {
      EXPECT_LT(relative_difference(to_local(sharded), want), 1e-15);
    }
    // From the columns, through an exchange that cannot be one all-to-all.
    const Tensor by_columns = shard_tensor(common({rows, 4}, 61), mesh, {S(1)});
    EXPECT_LT(relative_difference(full_tensor(reshard(by_columns, {S(0)})), common({rows, 4}, 61)), 1e-15);
    // from_local with the global shape; without it, the parts must be alike.
    const Tensor rebuilt = from_local(want, mesh, {S(0)}, {rows, 2});
    EXPECT_LT(relative_difference(full_tensor(rebuilt), whole), 1e-15);
    try {
      from_local(common({mine.size() + 1, 2}, 62), mesh, {S(0)}, {rows, 2});
      FAIL() << "a part of the wrong size was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("part has shape [" + std::to_string(mine.size() + 1) + ", 2]"),
                std::string::npos)
          << e.what();
    }
    // Without the global shape, each rank took its own part's size times the ranks: rank 0 of
    // 3 rows on 2 ranks made a [4, 2] tensor and rank 1 a [2, 2] one.
    if (rows % ranks != 0) {
      try {
        from_local(want, mesh, {S(0)});
        FAIL() << "uneven parts without the global shape were accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("from_local: the ranks' parts differ in shape"), std::string::npos)
            << e.what();
      }
    }
  }
}

// Forward mode on split inputs: the tangents ride on the distributed tensors, so every tangent
// rule (of primitives with and without a second-order rule) and a tangent of a tangent (the
// second derivatives Taylor mode takes from nested forward levels) are one process's.
TEST(DistributedTensor, ForwardModeTangentsOfSplitInputsMatchOneProcess) {
  const auto& mesh = meshes()[0];
  const auto f = [](const Tensor& x) {
    return log(1.0 + exp(-abs(x))) + maximum(x, zeros_like(x)) + sqrt(square(x) + 1.0) + pow(abs(x) + 1.0, 1.5) +
           erf(x) / (square(x) + 2.0);
  };
  const auto second = [&](const Tensor& x, const Tensor& v) {
    return jvp([&](const Tensor& y) { return jvp(f, y, v).second; }, x, v).second;
  };
  const Tensor x = common({5, 3}, 80), v = common({5, 3}, 81);
  const auto [value, tangent] = jvp(f, x, v);
  const Tensor curvature = second(x, v);
  for (const Placement& placement : {S(0), S(1)}) {
    SCOPED_TRACE(to_string(placement));
    const Tensor split_x = shard_tensor(x, mesh, {placement}), split_v = shard_tensor(v, mesh, {placement});
    const auto [split_value, split_tangent] = jvp(f, split_x, split_v);
    ASSERT_TRUE(is_distributed(split_tangent));
    EXPECT_LT(relative_difference(full_tensor(split_value), value), 1e-14);
    EXPECT_LT(relative_difference(full_tensor(split_tangent), tangent), 1e-14);
    EXPECT_LT(relative_difference(full_tensor(second(split_x, split_v)), curvature), 1e-14);
  }
}

// Second derivatives of distributed inputs: hvp and hessian take them in reverse mode, where
// forward over reverse returned zeros (a backward pass over local parts drops tangents), and a
// jvp around a gradient of distributed tensors is refused rather than read as zeros.
TEST(DistributedTensor, SecondDerivativesOfSplitInputsMatchOneProcess) {
  const auto& mesh = meshes()[0];
  const Tensor weights = common({4, 6}, 82);
  const auto f = [&](const Tensor& x) { return sum(square(tanh(matmul(x, weights)))) + sum(exp(x) * x); };
  const Tensor x = common({8, 4}, 83), v = common({8, 4}, 84), small = common({2, 3}, 85);
  const auto g = [](const Tensor& y) { return sum(sin(y) * square(y)); };
  const Tensor curvature = hvp(f, x, v), hessian_of_g = hessian(g, small);
  for (const Placement& placement : {S(0), S(1), R}) {
    SCOPED_TRACE(to_string(placement));
    const Tensor split_x = shard_tensor(x, mesh, {placement}), split_v = shard_tensor(v, mesh, {placement});
    EXPECT_LT(relative_difference(full_tensor(hvp(f, split_x, split_v)), curvature), 1e-12);
    EXPECT_LT(relative_difference(full_tensor(hvp(f, split_x, v)), curvature), 1e-12);
    expect_error([&] { jvp(grad(Function(f)), split_x, split_v); },
                 {"is a distributed tensor moving with a forward-mode tangent", "reverse mode"});
    const auto weights_on_split_points = [&](const Tensor& w) { return sum(square(tanh(matmul(split_x, w)))); };
    expect_error([&] { hvp(weights_on_split_points, weights, common({4, 6}, 86)); },
                 {"is a distributed tensor moving with a forward-mode tangent"});
    const Tensor split_small = shard_tensor(small, mesh, {placement.is_shard() ? S(1) : R});
    EXPECT_LT(relative_difference(full_tensor(hessian(g, split_small)), hessian_of_g), 1e-12);
  }
}

// A broadcast axis of one element split over two ranks leaves one of them an empty part, whose
// views carried strides that were not contiguous: its gradient sum was refused by MPI on that
// rank while the others waited in the collective.
TEST(ShardingRules, AnEmptyPartOfABroadcastAxisTakesPartInTheGradientSums) {
  const Tensor x = common({6, 5}, 87), y = common({6, 1}, 88), weights = common({6, 5}, 89);
  const Tensor x_one = x.detach().requires_grad_(), y_one = y.detach().requires_grad_();
  backward(sum(x_one * y_one * weights));
  for (const auto& mesh : meshes()) {
    for (std::vector<Placement> placements : {std::vector<Placement>{S(1)}, std::vector<Placement>{R}}) {
      if (mesh->ndim() == 2) placements.push_back(R);
      SCOPED_TRACE(mesh->describe() + " " + to_string(placements));
      const Tensor split_x = shard_tensor(x.detach().requires_grad_(), mesh, std::vector<Placement>(mesh->ndim(), R));
      const Tensor split_y = shard_tensor(y.detach().requires_grad_(), mesh, placements);
      backward(sum(split_x * split_y * weights));
      EXPECT_LT(relative_difference(full_tensor(split_x.grad()), x_one.grad()), 1e-12);
      EXPECT_LT(relative_difference(full_tensor(split_y.grad()), y_one.grad()), 1e-12);
    }
  }
}

// Sharded leaves (not resharded from replicated ones) take their own gradient's part.
TEST(ShardingRules, ShardedLeavesGetTheirPartOfTheGradient) {
  const auto& mesh = meshes()[0];
  const Tensor a = common({4, 8}, 20).requires_grad_(), b = common({8, 4}, 21).requires_grad_();
  backward(sum(square(matmul(a, b))));
  const Tensor da = shard_tensor(a.detach().requires_grad_(), mesh, {S(1)});
  const Tensor db = shard_tensor(b.detach().requires_grad_(), mesh, {S(0)});
  const Tensor product = matmul(da, db);
  EXPECT_EQ(placements_of(product), std::vector<Placement>{P});
  backward(sum(square(product)));
  EXPECT_EQ(placements_of(da.grad()), std::vector<Placement>{S(1)});
  EXPECT_LT(relative_difference(full_tensor(da.grad()), a.grad()), 1e-12);
  EXPECT_LT(relative_difference(full_tensor(db.grad()), b.grad()), 1e-12);
}

// A two-layer tanh network trained with Adam: parameters and data placed as a strategy says.
struct Strategy {
  std::string name;
  std::shared_ptr<const ProcessMesh> mesh;  // null: one process
  std::vector<Placement> data, w1, b1, w2, b2;
};

std::vector<double> train(const Strategy& s, DType dtype, std::vector<Tensor>* trained = nullptr) {
  auto place = [&](const Tensor& whole, const std::vector<Placement>& placements) {
    if (!s.mesh || placements.empty()) return whole;
    return shard_tensor(whole, s.mesh, placements);
  };
  const Tensor x = place(common({16, 4}, 30, dtype), s.data), target = place(common({16, 2}, 31, dtype), s.data);
  std::vector<Tensor> params{place(common({4, 8}, 32, dtype).requires_grad_(), s.w1),
                             place(common({8}, 33, dtype).requires_grad_(), s.b1),
                             place(common({8, 2}, 34, dtype).requires_grad_(), s.w2),
                             place(common({2}, 35, dtype).requires_grad_(), s.b2)};
  optim::AdamOptions options;
  options.learning_rate = 1e-2;
  optim::Adam adam(params, options);
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    adam.zero_grad();
    const Tensor hidden = tanh(matmul(x, params[0]) + params[1]);
    const Tensor loss = mean(square(matmul(hidden, params[2]) + params[3] - target));
    backward(loss);
    adam.step();
    losses.push_back(full_tensor(loss).item<double>());
  }
  if (trained) {
    for (const Tensor& p : params) trained->push_back(full_tensor(p));
  }
  return losses;
}

TEST(Training, DataTensorAndBothParallelLossesEqualOneProcess) {
  const auto &line = meshes()[0], &grid = meshes()[1];
  const std::vector<Strategy> strategies{
      {"data parallel: the batch sharded, parameters ordinary tensors", line, {S(0)}, {}, {}, {}, {}},
      {"tensor parallel: column then row parallel layers", line, {}, {S(1)}, {S(0)}, {S(0)}, {R}},
      {"data x tensor parallel", grid, {S(0), R}, {R, S(1)}, {R, S(0)}, {R, S(0)}, {R, R}},
  };
  for (const auto& [dtype, tolerance] : {std::pair{DType::f64, 1e-10}, std::pair{DType::f32, 1e-5}}) {
    std::vector<Tensor> want_params;
    const std::vector<double> want = train({"one process", nullptr, {}, {}, {}, {}, {}}, dtype, &want_params);
    for (const Strategy& strategy : strategies) {
      SCOPED_TRACE(strategy.name + " " + std::string(dtype_name(dtype)));
      std::vector<Tensor> params;
      const std::vector<double> losses = train(strategy, dtype, &params);
      for (size_t step = 0; step < want.size(); ++step) {
        EXPECT_NEAR(losses[step], want[step], tolerance * std::abs(want[step])) << "step " << step;
      }
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_LT(relative_difference(params[i], want_params[i]), tolerance * 10) << "parameter " << i;
      }
    }
  }
}

// A small Llama trained with Adam, its weights placed by name: Megatron's tensor parallelism
// (attention heads and the MLP's hidden units split over "mp"), with the batch split over "dp".
std::vector<double> train_llama(const std::shared_ptr<const ProcessMesh>& mesh, const ShardingPlan& plan,
                                const std::vector<Placement>& batch) {
  nn::LlamaModel model(testing::tiny_llama_options());
  auto [inputs, targets] = testing::tiny_llama_batch(testing::tiny_llama_options().vocab_size);
  if (mesh) {
    EXPECT_EQ(shard_module(model, mesh, plan), static_cast<int64_t>(2 * plan.size()));
    if (!batch.empty()) {
      inputs = shard_tensor(inputs, mesh, batch);
      targets = shard_tensor(targets, mesh, batch);
    }
  }
  optim::AdamOptions adam_options;
  adam_options.learning_rate = 1e-2;
  optim::Adam adam(model.parameters(), adam_options);
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad();
    const Tensor loss = cross_entropy(model.forward(inputs), targets);
    backward(loss);
    adam.step();
    losses.push_back(full_tensor(loss).item<double>());
  }
  return losses;
}

TEST(Training, TransformerTensorAndDataParallelLossesEqualOneProcess) {
  const std::vector<double> want = train_llama(nullptr, {}, {});
  const std::vector<std::pair<std::string, std::vector<double>>> runs{
      {"tensor parallel", train_llama(meshes()[0], testing::megatron_plan({S(0)}, {S(1)}), {})},
      {"data x tensor parallel", train_llama(meshes()[1], testing::megatron_plan({R, S(0)}, {R, S(1)}), {S(0), R})},
  };
  for (const auto& [name, losses] : runs) {
    for (size_t step = 0; step < want.size(); ++step) {
      EXPECT_NEAR(losses[step], want[step], 1e-10 * want[step]) << name << ", step " << step;
    }
  }
  nn::LlamaOptions options;
  options.vocab_size = 8;
  options.hidden_size = 8;
  options.intermediate_size = 8;
  options.layers = 1;
  options.heads = 2;
  nn::LlamaModel model(options);
  try {
    shard_module(model, meshes()[0], {{"model.layers.*.attn.q_proj.weight", {S(0)}}});
    FAIL() << "a pattern matching nothing was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << e.what();
  }
}

// ZeRO stage 1 beside tensor parallelism: on a [dp, mp] mesh the first layer's weights split over
// mp, the state of every parameter (its local part, for the split ones) sharded over dp. The steps
// are plain AdamW's, and the gathered state is laid out as the parameters are.
TEST(Training, ZeroStage1ShardsTensorParallelStateOverDp) {
  const auto& mesh = meshes()[1];
  Communicator& dp = mesh->communicator(0);
  const Tensor x = shard_tensor(common({16, 4}, 80), mesh, {S(0), R});
  const Tensor target = shard_tensor(common({16, 2}, 81), mesh, {S(0), R});
  auto make = [&] {
    return std::vector<Tensor>{shard_tensor(common({4, 8}, 82).requires_grad_(), mesh, {R, S(1)}),
                               shard_tensor(common({8}, 83).requires_grad_(), mesh, {R, S(0)}),
                               common({8, 2}, 84).requires_grad_()};
  };
  optim::AdamOptions options;
  options.learning_rate = 1e-2;
  options.weight_decay = 0.1;
  auto adamw = [&](std::vector<Tensor> parameters) {
    return std::make_unique<optim::AdamW>(std::move(parameters), options);
  };
  std::vector<Tensor> plain = make(), sharded = make();
  const std::unique_ptr<optim::Optimizer> whole = adamw(plain);
  ShardedOptimizer zero(sharded, adamw, RankGradients::identical, dp);
  auto step = [&](std::vector<Tensor>& p, optim::Optimizer& optimizer) {
    optimizer.zero_grad();
    const Tensor loss = mean(square(matmul(tanh(matmul(x, p[0]) + p[1]), p[2]) - target));
    backward(loss);
    optimizer.step();
    return full_tensor(loss).item<double>();
  };
  for (int k = 0; k < 4; ++k) EXPECT_EQ(step(plain, *whole), step(sharded, zero)) << "step " << k;
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(relative_difference(full_tensor(sharded[i]), full_tensor(plain[i])), 0.0) << "parameter " << i;
  }
  const nn::StateDict want = full_state(whole->state_dict()), got = full_state(zero.state_dict());
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [key, value] : want) EXPECT_EQ(relative_difference(got.at(key), value), 0.0) << key;
  // A whole state (a checkpoint's) loads back into this rank's parts.
  ShardedOptimizer reloaded(make(), adamw, RankGradients::identical, dp);
  reloaded.load_state_dict(want);
  for (const auto& [key, value] : full_state(reloaded.state_dict())) {
    EXPECT_EQ(relative_difference(value, want.at(key)), 0.0) << key;
  }
}

// DeferGradientSums: the backward pass leaves each parameter's gradient as this dp rank's part,
// summed once per step, after two micro-batches, by sum_gradients (one message) or by ZeRO-1's
// reduce-scatter (RankGradients::to_sum, clipped on the reduced slices). The steps are those of
// summing in every backward pass, with clipping active.
TEST(Training, DeferredGradientSumsGiveTheSameSteps) {
  for (const auto& mesh : meshes()) {
    SCOPED_TRACE(mesh->describe());
    Communicator& dp = mesh->communicator(0);
    const bool grid = mesh->ndim() == 2, several_ranks = dp.size() > 1;
    const std::vector<Placement> rows = grid ? std::vector<Placement>{S(0), R} : std::vector<Placement>{S(0)};
    const Tensor x = shard_tensor(common({16, 4}, 90), mesh, rows);
    const Tensor target = shard_tensor(common({16, 2}, 91), mesh, rows);
    auto make = [&] {
      std::vector<Tensor> p{common({4, 8}, 92).requires_grad_(), common({8}, 93).requires_grad_(),
                            common({8, 2}, 94).requires_grad_()};
      if (grid) {  // the first layer split over mp, as tensor parallelism does
        p[0] = shard_tensor(p[0], mesh, {R, S(1)});
        p[1] = shard_tensor(p[1], mesh, {R, S(0)});
      }
      return p;
    };
    optim::AdamOptions options;
    options.learning_rate = 1e-2;
    auto adamw = [&](std::vector<Tensor> parameters) {
      return std::make_unique<optim::AdamW>(std::move(parameters), options);
    };
    constexpr double kClip = 0.05;
    // Two micro-batches' gradients accumulated; the backward passes' bytes.
    auto accumulate = [&](const std::vector<Tensor>& p, bool deferred) {
      std::optional<DeferGradientSums> parts;
      if (deferred) parts.emplace(dp);
      int64_t bytes = 0;
      for (double k : {1.0, 2.0}) {
        const Tensor loss = 0.5 * mean(square(matmul(tanh(matmul(x, p[0]) + p[1]), p[2]) - k * target));
        const int64_t before = collective_traffic().bytes;
        backward(loss);
        bytes += collective_traffic().bytes - before;
      }
      return bytes;
    };
    std::vector<Tensor> plain = make(), summed = make(), zero_parameters = make();
    const std::unique_ptr<optim::Optimizer> plain_adamw = adamw(plain), summed_adamw = adamw(summed);
    ShardedOptimizer zero(zero_parameters, adamw, RankGradients::to_sum, dp);
    for (int step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      for (optim::Optimizer* o : {plain_adamw.get(), summed_adamw.get(), static_cast<optim::Optimizer*>(&zero)}) {
        o->zero_grad();
      }
      const int64_t plain_bytes = accumulate(plain, false);
      const double plain_norm = optim::clip_grad_norm(plain, kClip);
      EXPECT_GT(plain_norm, kClip);  // clipping is at work
      plain_adamw->step();

      const int64_t deferred_bytes = accumulate(summed, true);
      const CollectiveTraffic before_sum = collective_traffic();
      sum_gradients(summed, dp);
      EXPECT_EQ(collective_traffic().calls - before_sum.calls, several_ranks ? 1 : 0);  // one message
      optim::clip_grad_norm(summed, kClip);
      summed_adamw->step();
      // Only tensor parallelism's sums are left in the backward pass; without it, none.
      if (several_ranks) {
        EXPECT_LT(deferred_bytes, plain_bytes);
      }
      if (!grid) {
        EXPECT_EQ(deferred_bytes, 0);
      }

      accumulate(zero_parameters, true);
      zero.reduce_gradients();
      EXPECT_NEAR(clip_reduced_grad_norm({&zero}, kClip), plain_norm, 1e-12 * plain_norm);
      zero.step();
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_LT(relative_difference(full_tensor(summed[i]), full_tensor(plain[i])), 1e-12) << "parameter " << i;
        EXPECT_LT(relative_difference(full_tensor(zero_parameters[i]), full_tensor(plain[i])), 1e-12)
            << "parameter " << i << " (ZeRO-1)";
      }
    }
  }
}

TEST(Training, DeferringTheSumsOfAnotherMeshsAxisIsRefused) {
  const auto &line = meshes()[0], &grid = meshes()[1];
  const Tensor x = shard_tensor(common({4, 3}, 96), line, {S(0)});
  const Tensor w = shard_tensor(common({3, 2}, 97).requires_grad_(), line, {R});
  DeferGradientSums parts(grid->communicator(1));
  try {
    matmul(x, w);
    FAIL() << "an op on the line mesh accepted the grid's communicator";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DeferGradientSums: its communicator is none of the axes of the mesh [" +
                                         std::to_string(line->size(0)) + "] (x)"),
              std::string::npos)
        << e.what();
  }
}

// An FNO of `modes` trained on `fields` placed as `placements` on the 1-D mesh: the gradients of
// an MSE loss are the one-process ones, and the prediction is placed as the fields are.
void expect_fno_matches_one_process(std::vector<int64_t> modes, const Tensor& fields, const Placement& placement) {
  nn::FnoOptions options;
  options.modes = std::move(modes);
  options.width = 4;
  options.layers = 2;
  options.projection_width = 8;
  options.dtype = DType::f64;
  nn::Fno fno(options);
  auto loss_of = [&](const Tensor& batch) { return mean(square(fno.forward(batch) - batch)); };
  backward(loss_of(fields));
  std::vector<Tensor> want;
  for (const Tensor& p : fno.parameters()) {
    want.push_back(p.grad());
    Tensor(p).zero_grad();
  }
  const Tensor placed = shard_tensor(fields, meshes()[0], {placement});
  EXPECT_EQ(placements_of(fno.forward(placed)), std::vector<Placement>{placement});
  backward(loss_of(placed));
  const auto parameters = fno.parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    EXPECT_LT(relative_difference(parameters[i].grad(), want[i]), 1e-12) << "parameter " << i;
  }
}

// A batch of fields split over the ranks: the FFTs keep the split.
TEST(Training, FnoOnASplitBatchMatchesOneProcess) { expect_fno_matches_one_process({4}, common({4, 1, 16}, 70), S(0)); }
// Batches of 13 and 3 samples: parts a sample apart, on 4 ranks one of them empty.
TEST(Training, FnoOnAnUnevenlySplitBatchMatchesOneProcess) {
  expect_fno_matches_one_process({4}, common({13, 1, 16}, 72), S(0));
  expect_fno_matches_one_process({4}, common({3, 1, 16}, 73), S(0));
}

// Fields whose grid is split along its first axis: each FFT along a split axis exchanges the
// shard for another axis, so the activations stay split from the lift to the projection.
TEST(Training, FnoOnASplitGridMatchesOneProcess) {
  expect_fno_matches_one_process({2, 2}, common({2, 1, 8, 8}, 71), S(2));
}

// a split by rows and b by columns: the smaller operand is gathered, the larger keeps its split.
TEST(ShardingRules, MatmulGathersTheSmallerOperand) {
  const auto& mesh = meshes()[0];
  const Tensor narrow = shard_tensor(common({4, 8}, 90), mesh, {S(0)});
  const Tensor wide = shard_tensor(common({8, 64}, 91), mesh, {S(1)});
  const Tensor tall = shard_tensor(common({64, 8}, 92), mesh, {S(0)});
  const Tensor thin = shard_tensor(common({8, 4}, 93), mesh, {S(1)});
  EXPECT_EQ(placements_of(matmul(narrow, wide)), std::vector<Placement>{S(1)});
  EXPECT_EQ(placements_of(matmul(tall, thin)), std::vector<Placement>{S(0)});
  EXPECT_LT(relative_difference(full_tensor(matmul(narrow, wide)), matmul(common({4, 8}, 90), common({8, 64}, 91))),
            1e-12);
}

// An elementwise op on inputs split along different axes keeps the split that moves fewer bytes:
// a [1, 8] row split by columns beside a [64, 8] matrix split by rows is gathered (8 numbers)
// rather than the matrix exchanged, in either order. Between equal costs the first input's split
// wins, which on one rank (where nothing moves) is every case.
TEST(ShardingRules, ElementwiseKeepsTheSplitThatMovesFewerBytes) {
  const auto& line = meshes()[0];
  const bool several = line->size(0) > 1;
  const Tensor row = common({1, 8}, 94), matrix = common({64, 8}, 95);
  const Tensor split_row = shard_tensor(row, line, {S(1)}), split_matrix = shard_tensor(matrix, line, {S(0)});
  const CollectiveTraffic before = collective_traffic();
  const Tensor sum = split_row + split_matrix;
  const CollectiveTraffic after = collective_traffic();
  EXPECT_EQ(placements_of(sum), std::vector<Placement>{several ? S(0) : S(1)});
  if (several) {
    EXPECT_EQ(after.bytes - before.bytes, to_local(split_row).numel() * 8);
  }
  EXPECT_EQ(placements_of(split_matrix + split_row), std::vector<Placement>{S(0)});
  EXPECT_EQ(relative_difference(full_tensor(sum), row + matrix), 0.0);
  const Tensor a = shard_tensor(common({8, 8}, 96), line, {S(0)}), b = shard_tensor(common({8, 8}, 97), line, {S(1)});
  EXPECT_EQ(placements_of(a * b), std::vector<Placement>{S(0)});
  EXPECT_EQ(placements_of(b * a), std::vector<Placement>{S(1)});
}

// Megatron's layout from annotations on the weights only: the column-parallel layer's output
// stays sharded and the row-parallel product is a partial sum, so no weight is ever gathered.
TEST(Training, TensorParallelKeepsActivationsSharded) {
  const auto& mesh = meshes()[0];
  const Tensor x = common({16, 4}, 40);
  const Tensor w1 = shard_tensor(common({4, 8}, 41), mesh, {S(1)});
  const Tensor w2 = shard_tensor(common({8, 2}, 42), mesh, {S(0)});
  const Tensor hidden = tanh(matmul(x, w1));
  EXPECT_EQ(placements_of(hidden), std::vector<Placement>{S(1)});
  EXPECT_EQ(placements_of(matmul(hidden, w2)), std::vector<Placement>{P});
}

// Data parallelism of a PINN-style loss, with derivatives of the network in its input: the
// second-order terms flow through the same rules.
TEST(Training, SecondDerivativesOfShardedPointsMatchOneProcess) {
  const auto& mesh = meshes()[0];
  Tensor w = common({1, 8}, 50).requires_grad_(), v = common({8, 1}, 51).requires_grad_();
  auto residual_loss = [&](const Tensor& points) {
    const Tensor u = matmul(tanh(matmul(points, w)), v);
    const Tensor du = grad({u}, {points}, {ones_like(u)}, true)[0];
    const Tensor d2u = grad({du}, {points}, {ones_like(du)}, true)[0];
    return mean(square(d2u + u));
  };
  const Tensor points = common({16, 1}, 52);
  backward(residual_loss(points.detach().requires_grad_()));
  const Tensor want_w = w.grad(), want_v = v.grad();
  w.zero_grad();
  v.zero_grad();
  const Tensor sharded = shard_tensor(points.detach().requires_grad_(), mesh, {S(0)});
  const Tensor loss = residual_loss(sharded);
  backward(loss);
  EXPECT_LT(relative_difference(w.grad(), want_w), 1e-12);
  EXPECT_LT(relative_difference(v.grad(), want_v), 1e-12);
}

// The fused attention primitive on q, k and v split alike by batch or by heads (grouped-query: 8
// query heads over 4 key/value heads) runs on each rank's parts with nothing gathered, compiled
// and eagerly; one input split alone has the others sliced to match (no communication), and
// a split along time or a partial sum is gathered first. Values and gradients are one process's
// in every case.
TEST(ShardingRules, FusedAttentionKeepsBatchAndHeadSplits) {
  const auto& mesh = meshes()[0];
  const std::vector<Tensor> wholes{common({4, 8, 8, 4}, 130), common({4, 4, 8, 4}, 131), common({4, 4, 8, 4}, 132)};
  const Tensor weight = common({4, 8, 8, 4}, 133);
  auto loss_of = [&](const std::vector<Tensor>& qkv) {
    return sum(nn::causal_attention(qkv[0], qkv[1], qkv[2]) * weight);
  };
  std::vector<Tensor> leaves;
  for (const Tensor& whole : wholes) leaves.push_back(whole.detach().requires_grad_());
  const Tensor want = loss_of(leaves);
  const std::vector<Tensor> want_grads = grad({want}, leaves);
  const std::vector<std::vector<Placement>> cases{{S(0), S(0), S(0)}, {S(1), S(1), S(1)}, {S(2), S(2), S(2)},
                                                  {S(1), R, R},       {R, S(1), R},       {P, R, R}};
  for (const auto& placements : cases) {
    SCOPED_TRACE(to_string(placements));
    std::vector<Tensor> replicated, inputs;
    for (size_t i = 0; i < 3; ++i) {
      replicated.push_back(shard_tensor(wholes[i].detach().requires_grad_(), mesh, {R}));
      inputs.push_back(reshard(replicated.back(), {placements[i]}));
    }
    const Tensor output = nn::causal_attention(inputs[0], inputs[1], inputs[2]);
    const auto split =
        std::find_if(placements.begin(), placements.end(), [](const Placement& p) { return p.is_shard(); });
    EXPECT_EQ(placements_of(output), std::vector<Placement>{split != placements.end() && split->axis < 2 ? *split : R});
    const Tensor loss = loss_of(inputs);
    EXPECT_LT(relative_difference(full_tensor(loss), want), 1e-12);
    const std::vector<Tensor> grads = grad({loss}, replicated);
    for (size_t i = 0; i < 3; ++i) EXPECT_LT(relative_difference(full_tensor(grads[i]), want_grads[i]), 1e-12) << i;
  }
  // Compiled on head-split inputs: the fused primitive on the parts, and no collective but the
  // loss's sum.
  std::vector<Tensor> split;
  for (const Tensor& whole : wholes) split.push_back(shard_tensor(whole.detach().requires_grad_(), mesh, {S(1)}));
  CompiledFunction compiled = compile([&](const std::vector<Tensor>& in) {
    const Tensor loss = loss_of(in);
    std::vector<Tensor> out{loss};
    for (const Tensor& g : grad({loss}, in)) out.push_back(g);
    return out;
  });
  const std::vector<Tensor> got = compiled(split);
  EXPECT_LT(relative_difference(full_tensor(got[0]), want), 1e-12);
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(relative_difference(full_tensor(got[i + 1]), want_grads[i]), 1e-12) << i;
  const std::string graph = compiled.program_for(split)->graph().to_string();
  EXPECT_NE(graph.find("causal_attention("), std::string::npos) << graph;
  EXPECT_NE(graph.find("causal_attention_backward("), std::string::npos) << graph;
  EXPECT_EQ(graph.find("allgather"), std::string::npos) << graph;
}

// Rows of x beside columns of w: the rule's own choice (gather the smaller w, keep the rows) and
// the other (gather x, keep the columns) are both open under a PlacementChoices, and either
// gives the product; the points are noted in order with their alternatives. On one rank, where
// nothing moves either way, nothing is open.
TEST(PlacementChoices, TakeTheAlternativeTheyNameAndNoteEachOpenPoint) {
  const auto& mesh = meshes()[0];
  const bool several_ranks = mesh->size(0) > 1;
  const Tensor x = common({8, 4}, 100), w = common({4, 4}, 101);
  const Tensor rows = shard_tensor(x, mesh, {S(0)}), columns = shard_tensor(w, mesh, {S(1)});
  for (const size_t pick : {size_t{0}, size_t{1}}) {
    PlacementChoices choices({pick});
    const Tensor product = matmul(rows, columns);
    EXPECT_EQ(placements_of(product), std::vector<Placement>{pick == 1 && several_ranks ? S(1) : S(0)});
    EXPECT_LT(relative_difference(full_tensor(product), matmul(x, w)), 1e-12);
    ASSERT_EQ(choices.points().size(), several_ranks ? 1u : 0u);
    if (!several_ranks) continue;
    const PlacementChoices::Point& point = choices.points()[0];
    EXPECT_EQ(point.op, "matmul on x");
    EXPECT_EQ(point.picked, pick);
    ASSERT_EQ(point.alternatives.size(), 2u);
    EXPECT_EQ(point.alternatives[0], "[Shard(0), Replicate()] -> Shard(0)");
    EXPECT_EQ(point.alternatives[1], "[Replicate(), Shard(1)] -> Shard(1)");
    EXPECT_EQ(&mesh->world(), choices.world());
  }
  // Inputs split alike leave nothing open; without a PlacementChoices nothing is noted or offered.
  PlacementChoices choices({1});
  EXPECT_EQ(placements_of(rows + rows), std::vector<Placement>{S(0)});
  EXPECT_TRUE(choices.points().empty());
}

// A batch split by rows meets a column-split weight whose product then meets a row-split one.
// The matmul rule gathers the first weight, smaller than the batch, and keeps the rows; over the
// whole step that costs the weights' gathers and their gradients' reduce-scatters. Gathering the
// batch instead keeps the columns, makes the second product a partial sum of 64 x 2 numbers and
// leaves both weight gradients where they lie: (1,024 + 2 x 128) x (n - 1) / n numbers a rank
// sends against 2 x (768 + 96) x (n - 1) / n. The compiled step's placement search finds it, and
// its values and gradients are the eager step's. On the two-axis mesh the split is over its
// last axis (mp), everything whole over dp; a mesh axis of one rank leaves nothing to search.
TEST(PlacementSearch, CompiledStepGathersTheBatchWhenTheWeightsCostMoreOverTheStep) {
  for (const auto& mesh : meshes()) {
    SCOPED_TRACE(mesh->describe());
    const int64_t last = mesh->ndim() - 1, ranks = mesh->size(last);
    auto on_last_axis = [&](const Placement& placement) {
      std::vector<Placement> placements(static_cast<size_t>(mesh->ndim()), R);
      placements.back() = placement;
      return placements;
    };
    const Tensor x = shard_tensor(common({64, 16}, 110), mesh, on_last_axis(S(0)));
    const std::vector<Tensor> weights{
        shard_tensor(common({16, 48}, 111).requires_grad_(), mesh, on_last_axis(S(1))),
        shard_tensor(common({48, 2}, 112).requires_grad_(), mesh, on_last_axis(S(0)))};
    const compiler::TensorFunction step = [&](const std::vector<Tensor>& in) {
      const Tensor loss = mean(square(matmul(tanh(matmul(x, in[0])), in[1])));
      std::vector<Tensor> out{loss};
      for (const Tensor& g : grad({loss}, in)) out.push_back(g);
      return out;
    };
    const std::vector<Tensor> want = step(weights);
    auto compiled_graph = [&](const char* disabled) {
      if (disabled) setenv("EDDY_COMPILER_DISABLE", disabled, 1);
      setenv("EDDY_COMPILER_VERBOSE", "1", 1);
      CompiledFunction compiled = compile(step);
      ::testing::internal::CaptureStderr();
      const std::vector<Tensor> got = compiled(weights);
      const std::string printed = ::testing::internal::GetCapturedStderr();
      unsetenv("EDDY_COMPILER_VERBOSE");
      unsetenv("EDDY_COMPILER_DISABLE");
      for (int call = 0; call < 2; ++call) {  // the trace's values, then the compiled program's
        const std::vector<Tensor> values = call == 0 ? got : compiled(weights);
        for (size_t i = 1; i < values.size(); ++i) {
          EXPECT_EQ(placements_of(values[i]), placements_of(want[i])) << "gradient " << i;
        }
        for (size_t i = 0; i < values.size(); ++i) {
          EXPECT_LT(relative_difference(full_tensor(values[i]), full_tensor(want[i])), 1e-12) << "output " << i;
        }
      }
      return std::make_pair(compiled.program_for(weights)->graph(), printed);
    };
    const auto [searched, printed] = compiled_graph(nullptr);
    const auto [rules_own, unsearched_print] = compiled_graph("placement_search");
    EXPECT_EQ(unsearched_print.find("placement search"), std::string::npos) << unsearched_print;
    if (ranks == 1) {
      EXPECT_EQ(printed.find("placement search"), std::string::npos) << printed;
      continue;
    }
    EXPECT_LT(compiler::bytes_sent_per_rank(searched), compiler::bytes_sent_per_rank(rules_own));
    EXPECT_EQ(searched.to_string().find("reduce_scatter"), std::string::npos) << searched.to_string();
    EXPECT_NE(rules_own.to_string().find("reduce_scatter"), std::string::npos) << rules_own.to_string();
    const std::string axis = mesh->names().back();
    if (world().rank() == 0) {
      EXPECT_NE(printed.find(cat("matmul on ", axis, ": [Replicate(), Shard(1)] -> Shard(1) instead of the rule's "
                                 "[Shard(0), Replicate()] -> Shard(0)")),
                std::string::npos)
          << printed;
    }
    if (mesh->ndim() > 1) continue;
    const double share = static_cast<double>(ranks - 1) / static_cast<double>(ranks);
    EXPECT_DOUBLE_EQ(compiler::bytes_sent_per_rank(searched), 8 * (1024 + 2 * 128) * share);
    EXPECT_DOUBLE_EQ(compiler::bytes_sent_per_rank(rules_own), 8 * 2 * (768 + 96) * share);
    if (world().rank() == 0) {
      EXPECT_NE(printed.find(cat("the step sends ", std::llround(8 * (1024 + 2 * 128) * share), " bytes per rank per "
                                 "call, against ", std::llround(8 * 2 * (768 + 96) * share))),
                std::string::npos)
          << printed;
    }
  }
}

// A budget of no trial traces keeps every rule's choice and says so; a budget that is not a
// count is refused naming the variable. One process has nothing to search and reads neither.
TEST(PlacementSearch, TheTrialBudgetBoundsTheSearch) {
  const auto& mesh = meshes()[0];
  const bool several_ranks = mesh->size(0) > 1;
  const Tensor x = shard_tensor(common({64, 16}, 120), mesh, {S(0)});
  const Tensor w = shard_tensor(common({16, 48}, 121).requires_grad_(), mesh, {S(1)});
  const compiler::TensorFunction step = [&](const std::vector<Tensor>& in) {
    const Tensor loss = mean(square(matmul(x, in[0])));
    return std::vector<Tensor>{loss, grad({loss}, {in[0]})[0]};
  };
  setenv("EDDY_PLACEMENT_SEARCH_TRACES", "0", 1);
  setenv("EDDY_COMPILER_VERBOSE", "1", 1);
  ::testing::internal::CaptureStderr();
  CompiledFunction within_budget = compile(step);
  within_budget({w});
  const std::string printed = ::testing::internal::GetCapturedStderr();
  unsetenv("EDDY_COMPILER_VERBOSE");
  if (world().rank() == 0) {
    EXPECT_EQ(printed.find("0 trial traces (the budget of EDDY_PLACEMENT_SEARCH_TRACES; choices from 0 on are the "
                           "rules' own)") != std::string::npos,
              several_ranks)
        << printed;
  }
  setenv("EDDY_PLACEMENT_SEARCH_TRACES", "many", 1);
  CompiledFunction refused = compile(step);
  try {
    refused({w});
    EXPECT_FALSE(several_ranks) << "a budget of 'many' traces was accepted";
  } catch (const Error& error) {
    EXPECT_TRUE(several_ranks) << error.what();
    EXPECT_NE(std::string(error.what()).find("EDDY_PLACEMENT_SEARCH_TRACES='many': expected a whole number"),
              std::string::npos)
        << error.what();
  }
  unsetenv("EDDY_PLACEMENT_SEARCH_TRACES");
}

}  // namespace
}  // namespace eddy::dist
