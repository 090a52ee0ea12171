// drop_collectives_of_replicated_values (passes.h): which values every rank of a communicator
// holds alike, over the whole traced step, and the all_reduces that need no communication.
//
// A value is replicated over a communicator when every rank of it holds the same elements:
//  - the distributed interpreter said so (a part placed Replicate on that mesh axis, or an
//    ordinary tensor meeting distributed ones, which counts as replicated: Graph::replicated);
//  - a collective over it whose output every rank gets alike made the value (an all_reduce,
//    all_gather or broadcast: Primitive::collective declares it);
//  - a constant the function created holds the same bytes on every rank, or a node without
//    payload computed it with the same Attrs from replicated inputs.
// The last needs the other ranks' graphs: a rank's constants and Attrs may depend on its rank (a
// slice of a replicated tensor at the rank's offset, a count of its own points), so each rank
// sends a digest of each node's Attrs and each constant to the others once, at compile time.
// Every rank reaches this pass together: it compiles the same step, with the same collectives.
//
// Under the SPMD convention (dist/collectives.h) the cotangent a replicated loss seeds on each
// rank is the same, and so is every cotangent computed from it and replicated values alone: the
// backward pass of a tensor-parallel layer's all_reduce, and the gradient sum of a replicated
// bias after it, then cost no communication, as Megatron-LM's "g" operator knows by construction.

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "eddy/compiler/passes.h"
#include "eddy/compiler/serialize.h"
#include "eddy/core/backend.h"
#include "eddy/core/tracing.h"
#include "eddy/dist/collectives.h"
#include "eddy/ops/ops.h"

namespace eddy::compiler {
namespace {

// Bit c: replicated over the step's c-th communicator. Steps use one per mesh axis, a handful.
using Mask = uint64_t;
constexpr size_t kMaxCommunicators = 64;

dist::Communicator& communicator_of(const GraphNode& node) { return dist::communicator_of(node.attrs); }

int64_t digest(std::string_view bytes) { return static_cast<int64_t>(std::hash<std::string_view>{}(bytes)); }

int64_t tensor_digest(const Tensor& tensor) {
  return digest(cat(dtype_name(tensor.dtype()), tensor.shape(), ":") + element_bytes(tensor));
}

class ReplicationAnalysis {
 public:
  explicit ReplicationAnalysis(const Graph& graph) : graph_(graph) {
    for (const GraphNode& node : graph.nodes) {
      if (node.primitive->is_collective()) index_of(communicator_of(node));
    }
    for (const ReplicatedValue& fact : graph.replicated) {
      if (fact.communicator->size() == job_size_ && whole_job_ >= 0) index_.emplace(fact.communicator, whole_job_);
    }
  }

  const std::vector<dist::Communicator*>& communicators() const { return communicators_; }

  // The bit of a communicator the graph's collectives use; none past the first 64.
  Mask bit_of(dist::Communicator& communicator) const { return bit(static_cast<size_t>(index_.at(&communicator))); }

  // For every value, the communicators over which every rank holds it alike. Exchanges digests
  // over each communicator of more than one rank: a collective call, on every rank together.
  std::vector<Mask> run() {
    const std::vector<int64_t> items = item_digests();
    const int64_t structure = structure_digest();
    Mask usable = 0, alone = 0;  // alone: communicators of one rank, over which every value is alike
    std::vector<Mask> item_alike(items.size(), 0);
    for (size_t c = 0; c < communicators_.size(); ++c) {
      if (communicators_[c]->size() == 1) alone |= bit(c);
      const std::optional<std::vector<bool>> alike = compare(*communicators_[c], structure, items);
      if (!alike) continue;
      usable |= bit(c);
      for (size_t i = 0; i < items.size(); ++i) {
        if ((*alike)[i]) item_alike[i] |= bit(c);
      }
    }

    std::vector<Mask> replicated(graph_.values.size(), 0);
    for (const ReplicatedValue& fact : graph_.replicated) {
      if (auto found = index_.find(fact.communicator); found != index_.end()) {
        replicated[static_cast<size_t>(fact.id)] |= bit(static_cast<size_t>(found->second));
      }
    }
    size_t item = graph_.nodes.size();
    for (const CapturedTensor& entry : graph_.captured) {
      if (!entry.constant) continue;
      // An abstract capture's constants have no bytes to compare.
      if (!entry.tensor.is_abstract()) replicated[static_cast<size_t>(entry.id)] |= item_alike[item];
      ++item;
    }
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      const GraphNode& node = graph_.nodes[n];
      Mask mask = 0;
      if (node.primitive->is_collective()) {
        const CollectiveTraits& traits = node.primitive->collective;
        if (traits.forwards_input) mask = replicated[static_cast<size_t>(node.inputs[0])];
        if (traits.output_alike) mask = bit_of(communicator_of(node));
      } else if (!node.attrs.payload) {
        mask = item_alike[n];
        for (ValueId input : node.inputs) mask &= replicated[static_cast<size_t>(input)];
      }
      replicated[static_cast<size_t>(node.output)] |= mask;
    }
    // What the whole job holds alike, every group of its ranks does; and only where every rank's
    // graph is this one does every rank decide alike.
    const Mask everywhere = whole_job_ >= 0 ? bit(static_cast<size_t>(whole_job_)) : 0;
    for (Mask& mask : replicated) mask = (((mask & everywhere) != 0 ? ~Mask{0} : mask) | alone) & usable;
    return replicated;
  }

 private:
  static Mask bit(size_t c) { return c < kMaxCommunicators ? Mask{1} << c : 0; }

  // Communicators of every rank of the job (the world, a one-axis mesh's axis) are one group, and
  // share an index: what a mesh axis holds alike, the world's all_reduce may rely on.
  int index_of(dist::Communicator& communicator) {
    if (communicator.size() == job_size_ && whole_job_ >= 0) return index_.emplace(&communicator, whole_job_).first->second;
    auto [found, inserted] = index_.emplace(&communicator, static_cast<int>(communicators_.size()));
    if (inserted) {
      communicators_.push_back(&communicator);
      if (communicator.size() == job_size_) whole_job_ = found->second;
    }
    return found->second;
  }

  // One per node (its Attrs) and one per constant (its bytes), in that order; parameters and
  // inputs get none: their values change after compiling.
  std::vector<int64_t> item_digests() const {
    std::vector<int64_t> items;
    for (const GraphNode& node : graph_.nodes) items.push_back(digest(cat(node.primitive->name, attrs_text(node.attrs))));
    for (const CapturedTensor& entry : graph_.captured) {
      if (entry.constant) items.push_back(entry.tensor.is_abstract() ? 0 : tensor_digest(entry.tensor));
    }
    return items;
  }

  // Everything but the Attrs and the constants' values: ranks whose structures agree number their
  // items and values alike.
  int64_t structure_digest() const {
    std::string text;
    for (const ValueInfo& info : graph_.values) {
      text += cat(dtype_name(info.dtype), info.shape, static_cast<int>(info.source), ";");
    }
    for (ValueId id : graph_.inputs) text += cat("in", id, ";");
    for (ValueId id : graph_.outputs) text += cat("out", id, ";");
    for (const CapturedTensor& entry : graph_.captured) text += cat("cap", entry.id, entry.constant, ";");
    for (const GraphNode& node : graph_.nodes) {
      text += cat(node.primitive->name, "(");
      for (ValueId input : node.inputs) text += cat(input, ",");
      text += cat(")", node.output, node.primitive->is_collective() ? cat("@", index_.at(&communicator_of(node))) : "", ";");
    }
    for (const ReplicatedValue& fact : graph_.replicated) {
      auto found = index_.find(fact.communicator);
      if (found != index_.end()) text += cat("rep", fact.id, "@", found->second, ";");
    }
    return digest(text);
  }

  // Per item, whether every rank of `communicator` has the same digest; nothing when their
  // structures differ (then no value is known alike there). A one-rank communicator sends nothing.
  static std::optional<std::vector<bool>> compare(dist::Communicator& communicator, int64_t structure,
                                                  const std::vector<int64_t>& items) {
    const int ranks = communicator.size();
    if (ranks == 1) return std::vector<bool>(items.size(), true);
    const Tensor shape_here = tensor<int64_t>({structure, static_cast<int64_t>(items.size())}, {2}, cpu());
    const Tensor shapes = Tensor::empty({2 * ranks}, DType::i64);
    communicator.allgather(shape_here, shapes);
    const std::vector<int64_t> all_shapes = shapes.to_vector<int64_t>();
    for (int r = 0; r < ranks; ++r) {
      if (all_shapes[2 * r] != structure || all_shapes[2 * r + 1] != static_cast<int64_t>(items.size())) {
        return std::nullopt;
      }
    }
    if (items.empty()) return std::vector<bool>{};
    const Tensor all_items = Tensor::empty({ranks * static_cast<int64_t>(items.size())}, DType::i64);
    communicator.allgather(tensor<int64_t>(items, {static_cast<int64_t>(items.size())}, cpu()), all_items);
    const std::vector<int64_t> gathered = all_items.to_vector<int64_t>();
    std::vector<bool> alike(items.size(), true);
    for (int r = 0; r < ranks; ++r) {
      for (size_t i = 0; i < items.size(); ++i) alike[i] = alike[i] && gathered[r * items.size() + i] == items[i];
    }
    return alike;
  }

  const Graph& graph_;
  std::vector<dist::Communicator*> communicators_;
  std::unordered_map<const dist::Communicator*, int> index_;
  const int job_size_ = dist::default_communicator().size();
  int whole_job_ = -1;  // the index of the job's ranks, once a communicator of them appeared
};

int64_t bytes_of(const Graph& graph, ValueId id) {
  const ValueInfo& info = graph.value(id);
  return numel(info.shape) * static_cast<int64_t>(dtype_size(info.dtype));
}

// What the step sends per call, for EDDY_COMPILER_VERBOSE: every communicating collective with
// the bytes of its operand, after the all-reduces that send nothing (this pass's, and those the
// eager backward pass already knew to be of alike cotangents).
void print_collectives(const Graph& graph) {
  int64_t silent = 0, silent_bytes = 0, total = 0;
  std::string sent;
  for (const GraphNode& node : graph.nodes) {
    if (!node.primitive->is_collective()) continue;
    const int64_t bytes = bytes_of(graph, node.inputs[0]);
    if (!node.primitive->collective.sends) {
      if (node.primitive->collective.output_alike) {
        ++silent;
        silent_bytes += bytes;
      }
      continue;
    }
    total += bytes;
    sent += cat(" ", node.primitive->name, " of ", bytes, " bytes over ", communicator_of(node).size(), " ranks,");
  }
  const std::string line = cat("eddy compile: ", silent, " all_reduces of replicated values (", silent_bytes,
                               " bytes) need no communication; the step's collectives:", sent, " ", total,
                               " bytes in all\n");
  std::fputs(line.c_str(), stderr);
}

}  // namespace

bool drop_collectives_of_replicated_values(Graph& graph) {
  ReplicationAnalysis analysis(graph);
  if (analysis.communicators().empty()) return false;
  // The digests below run kernels that belong to no traced function.
  TraceRecorderScope not_traced(nullptr);
  const std::vector<Mask> replicated = analysis.run();
  bool dropped = false;
  for (GraphNode& node : graph.nodes) {
    const Primitive* without_communication = node.primitive->collective.given_alike_operand;
    if (!without_communication ||
        !(replicated[static_cast<size_t>(node.inputs[0])] & analysis.bit_of(communicator_of(node)))) {
      continue;
    }
    node.primitive = without_communication;
    dropped = true;
  }
  if (compiler_verbose() && dist::default_communicator().rank() == 0) print_collectives(graph);
  return dropped;
}

}  // namespace eddy::compiler
