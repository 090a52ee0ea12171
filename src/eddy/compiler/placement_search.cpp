#include "eddy/compiler/placement_search.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "eddy/compiler/passes.h"
#include "eddy/dist/collectives.h"
#include "eddy/dist/dtensor.h"
#include "eddy/ops/ops.h"

namespace eddy::compiler {
namespace {

constexpr int64_t kDefaultTrialTraces = 64;
constexpr std::string_view kTrialTracesVariable = "EDDY_PLACEMENT_SEARCH_TRACES";

int64_t trial_trace_budget() {
  const char* value = std::getenv(std::string(kTrialTracesVariable).c_str());
  if (!value || !*value) return kDefaultTrialTraces;
  char* end = nullptr;
  const long long budget = std::strtoll(value, &end, 10);
  EDDY_CHECK(*end == '\0' && budget >= 0, kTrialTracesVariable, "='", value, "': expected a whole number of trial "
             "traces, 0 or more");
  return budget;
}

struct Outcome {
  double bytes = 0;
  std::vector<dist::PlacementChoices::Point> points;
};

Outcome trace_under(const TensorFunction& function, const std::vector<Tensor>& inputs, std::vector<size_t> picks) {
  dist::PlacementChoices choices(std::move(picks), /*quiet=*/true);
  const Trace trial = trace(function, inputs, Evaluation::abstract);
  return Outcome{bytes_sent_per_rank(trial.graph), choices.points()};
}

// Rank 0's picks, on every rank.
std::vector<size_t> agreed(std::vector<size_t> picks, dist::Communicator& world) {
  const Tensor count = tensor<int64_t>({static_cast<int64_t>(picks.size())}, {1}, cpu());
  world.broadcast(count, 0);
  const int64_t length = count.item<int64_t>();
  const Tensor values = world.rank() == 0
      ? tensor<int64_t>(std::vector<int64_t>(picks.begin(), picks.end()), {length}, cpu())
      : zeros({length}, DType::i64, cpu());
  world.broadcast(values, 0);
  std::vector<size_t> result;
  for (const int64_t pick : values.to_vector<int64_t>()) result.push_back(static_cast<size_t>(pick));
  return result;
}

void report(const std::vector<dist::PlacementChoices::Point>& rules_own, const Outcome& chosen, double rules_bytes,
            int64_t trials, const std::string& stopped) {
  std::string text = cat("eddy compile: placement search: ", rules_own.size(), " open choices, ", trials,
                         " trial traces", stopped, "; ");
  bool changed = false;
  for (size_t k = 0; k < chosen.points.size(); ++k) {
    const dist::PlacementChoices::Point& point = chosen.points[k];
    if (point.picked == 0) continue;
    if (!changed) text += "chose\n";
    changed = true;
    text += cat("  choice ", k, ", ", point.op, ": ", point.alternatives[point.picked], " instead of the rule's ",
                point.alternatives[0], "\n");
  }
  if (changed) {
    text += cat("  the step sends ", std::llround(chosen.bytes), " bytes per rank per call, against ",
                std::llround(rules_bytes), " with the rules' own choices\n");
  } else {
    text += cat("the rules' own choices send the fewest bytes (", std::llround(rules_bytes), " per rank per call)\n");
  }
  std::fputs(text.c_str(), stderr);
}

}  // namespace

double bytes_sent_per_rank(const Graph& graph) {
  double bytes = 0;
  for (const GraphNode& node : graph.nodes) {
    const CollectiveTraits& traits = node.primitive->collective;
    if (!node.primitive->is_collective() || !traits.sends || !traits.sent_per_operand_byte) continue;
    const ValueInfo& operand = graph.value(node.inputs[0]);
    const int64_t operand_bytes = numel(operand.shape) * static_cast<int64_t>(dtype_size(operand.dtype));
    bytes += static_cast<double>(operand_bytes) * traits.sent_per_operand_byte(dist::communicator_of(node.attrs).size());
  }
  return bytes;
}

Trace trace_choosing_placements(const TensorFunction& function, const std::vector<Tensor>& inputs,
                                Evaluation evaluation) {
  if (!pass_enabled("placement_search")) return trace(function, inputs, evaluation);
  std::vector<dist::PlacementChoices::Point> rules_own;
  dist::Communicator* world = nullptr;
  Trace first = [&] {
    dist::PlacementChoices notes({});
    Trace traced = trace(function, inputs, evaluation);
    rules_own = notes.points();
    world = notes.world();
    return traced;
  }();
  if (rules_own.empty() || world->size() == 1) return first;

  const double rules_bytes = bytes_sent_per_rank(first.graph);
  Outcome best{rules_bytes, rules_own};
  std::vector<size_t> picks;
  const int64_t budget = trial_trace_budget();
  int64_t trials = 0;
  std::string stopped;
  for (size_t k = 0; k < best.points.size() && stopped.empty(); ++k) {
    for (size_t alternative = 1; alternative < best.points[k].alternatives.size(); ++alternative) {
      if (trials == budget) {
        stopped = cat(" (the budget of ", kTrialTracesVariable, "; choices from ", k, " on are the rules' own)");
        break;
      }
      std::vector<size_t> trial = picks;
      trial.resize(k + 1, 0);
      trial[k] = alternative;
      ++trials;
      Outcome outcome;
      try {
        outcome = trace_under(function, inputs, trial);
      } catch (const Error& error) {
        stopped = cat(" (stopped: an abstract trace failed: ", error.what(), ")");
        break;
      }
      if (outcome.bytes < best.bytes) {
        best = std::move(outcome);
        picks = std::move(trial);
      }
    }
  }
  picks = agreed(std::move(picks), *world);
  if (compiler_verbose() && world->rank() == 0) report(rules_own, best, rules_bytes, trials, stopped);
  if (trials == 0) return first;
  // Traced again even where the rules' own choices won: what the function keeps of its latest
  // call (a distributed step's output layouts) must be of the trace that is compiled.
  first = Trace{};
  dist::PlacementChoices chosen(picks);
  return trace(function, inputs, evaluation);
}

}  // namespace eddy::compiler
