#include "eddy/compiler/compiled_call.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "eddy/autodiff/forward.h"
#include "eddy/autodiff/functional.h"
#include "eddy/autodiff/tape.h"
#include "eddy/core/autograd.h"
#include "eddy/ops/ops.h"

namespace eddy::compiler {
namespace {

// What the outputs of one call share (the Attrs payload of each): the program, the graph value
// each call input stands for, and the results of the program's one run.
struct CallSite {
  std::shared_ptr<const Program> program;
  size_t graph_inputs = 0;             // the call's first inputs; captured tensors follow
  std::vector<ValueId> argument_values;
  bool ran = false;
  std::vector<Tensor> results;         // each output's eval takes its own
  // The write counts (Storage::version) of the captured tensors when the call ran: derivatives
  // replay the graph from them, so one written since (a target network's averaged weights) would
  // give the derivatives of another function, where eager autodiff keeps the values it read.
  std::vector<uint64_t> captured_versions;
};

void refuse_captured_written_since(const CallSite& site) {
  const std::vector<CapturedTensor>& captured = site.program->graph().captured;
  for (size_t k = 0; k < captured.size(); ++k) {
    const Tensor& tensor = captured[k].tensor;
    EDDY_CHECK(memory_version(tensor) == site.captured_versions[k], "backward: a tensor the compiled function read "
               "(shape ", tensor.shape(), ", ", tensor.dtype(), ") was written in place after the call; its "
               "derivatives are recomputed from it, so they would be another function's. Run the backward pass "
               "before the write, or pass the tensor as an argument");
  }
}

// The latest forward-mode replays of each call input: the autodiff interpreter asks every output
// of a call for its tangent from each moving input's, and one replay of the graph gives them all.
// Kept outside the call site because a tangent's own history can lead back to this call's outputs,
// whose nodes hold the site: a cache inside it would be a cycle never freed. Each tangent is
// handed out once, to free it early.
struct ForwardReplay {
  std::weak_ptr<void> site;
  int input = -1;
  std::weak_ptr<TensorImpl> tangent;
  bool grad_mode = false;
  std::vector<Tensor> output_tangents;  // by output; taken when handed out

  bool replays(const std::shared_ptr<void>& other_site, int other_input) const {
    return site.lock() == other_site && input == other_input;
  }
};
thread_local std::vector<ForwardReplay> forward_replays;

CallSite& site_of(const Attrs& attrs) { return *static_cast<CallSite*>(attrs.payload.get()); }

ValueId output_value(const CallSite& site, const Attrs& attrs) {
  return site.program->graph().outputs.at(static_cast<size_t>(attrs.axis));
}

// Every value the `outputs` depend on, computed from `arguments` op by op through dispatch, so
// with whatever tangents and history the arguments carry; the other entries stay undefined.
std::vector<Tensor> replay(const CallSite& site, Inputs arguments, std::span<const ValueId> outputs) {
  const Graph& graph = site.program->graph();
  std::vector<bool> needed(graph.values.size(), false);
  for (ValueId output : outputs) needed[static_cast<size_t>(output)] = true;
  for (auto node = graph.nodes.rbegin(); node != graph.nodes.rend(); ++node) {
    if (!needed[static_cast<size_t>(node->output)]) continue;
    for (ValueId input : node->inputs) needed[static_cast<size_t>(input)] = true;
  }
  std::vector<Tensor> values(graph.values.size());
  for (const CapturedTensor& entry : graph.captured) values[static_cast<size_t>(entry.id)] = entry.tensor;
  for (size_t k = 0; k < arguments.size(); ++k) values[static_cast<size_t>(site.argument_values[k])] = arguments[k];
  for (const GraphNode& node : graph.nodes) {
    if (!needed[static_cast<size_t>(node.output)]) continue;
    std::vector<Tensor> inputs;
    for (ValueId input : node.inputs) inputs.push_back(values[static_cast<size_t>(input)]);
    values[static_cast<size_t>(node.output)] = dispatch(*node.primitive, inputs, node.attrs);
  }
  return values;
}

// Which of the graph's values are computed from `arguments` through differentiable inputs, so
// that derivatives can reach them (the others are constants to autodiff: a stop_gradient's
// output, an index computed from an argument).
std::vector<bool> varying_values(const Graph& graph, const std::vector<ValueId>& arguments) {
  std::vector<bool> varies(graph.values.size(), false);
  for (ValueId id : arguments) varies[static_cast<size_t>(id)] = true;
  for (const GraphNode& node : graph.nodes) {
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (varies[static_cast<size_t>(node.inputs[k])] && node.primitive->differentiable_input(static_cast<int>(k))) {
        varies[static_cast<size_t>(node.output)] = true;
      }
    }
  }
  return varies;
}

// The cotangent of every call input given the outputs' cotangents: the reverse walk the autodiff
// engine makes over a tape (autodiff/backward.cpp), made once over the graph, through the values
// of one replay. The rules are ops, so the result is differentiable again when GradMode records.
std::vector<Tensor> input_cotangents(const CallSite& site, Inputs arguments, std::span<const OutputCotangent> seeds,
                                     const std::vector<bool>& wanted) {
  const Graph& graph = site.program->graph();
  refuse_captured_written_since(site);
  std::vector<ValueId> outputs;
  for (const OutputCotangent& seed : seeds) outputs.push_back(output_value(site, *seed.attrs));
  const std::vector<Tensor> values = replay(site, arguments, outputs);
  // Only values computed from a wanted call input carry a cotangent worth computing.
  std::vector<ValueId> wanted_arguments;
  for (size_t k = 0; k < arguments.size(); ++k) {
    if (wanted[k]) wanted_arguments.push_back(site.argument_values[k]);
  }
  const std::vector<bool> varies = varying_values(graph, wanted_arguments);
  std::vector<Tensor> cotangents(graph.values.size());
  for (size_t k = 0; k < seeds.size(); ++k) {
    // Two outputs may be one value: one returned twice, or two the compiler merged (two zeros_like),
    // which are tensors of their own, as eagerly (Program::run).
    Tensor& cotangent = cotangents[static_cast<size_t>(outputs[k])];
    cotangent = cotangent.defined() ? add(cotangent, seeds[k].cotangent) : seeds[k].cotangent;
  }
  for (auto node = graph.nodes.rbegin(); node != graph.nodes.rend(); ++node) {
    const Tensor& seed = cotangents[static_cast<size_t>(node->output)];
    if (!seed.defined()) continue;
    const Primitive& primitive = *node->primitive;
    std::vector<Tensor> inputs;
    for (ValueId input : node->inputs) inputs.push_back(values[static_cast<size_t>(input)]);
    if (!primitive.has_vjp()) continue;
    std::vector<bool> wanted_inputs(inputs.size(), false);
    for (size_t k = 0; k < inputs.size(); ++k) {
      wanted_inputs[k] = varies[static_cast<size_t>(node->inputs[k])] && is_inexact(inputs[k].dtype()) &&
                  primitive.differentiable_input(static_cast<int>(k));
    }
    std::vector<Tensor> contributions =
        primitive.input_cotangents(inputs, node->attrs, values[static_cast<size_t>(node->output)], seed, wanted_inputs);
    for (size_t k = 0; k < inputs.size(); ++k) {
      const auto input = static_cast<size_t>(node->inputs[k]);
      Tensor& contribution = contributions[k];
      if (!wanted_inputs[k] || !contribution.defined()) continue;
      if (contribution.shape() != inputs[k].shape()) contribution = sum_to_shape(contribution, inputs[k].shape());
      cotangents[input] = cotangents[input].defined() ? add(cotangents[input], contribution) : contribution;
    }
  }
  // An input the output does not depend on gets none, as eagerly: its .grad stays None (it was
  // zeros, so a check for unused parameters found none).
  std::vector<Tensor> result;
  for (size_t k = 0; k < arguments.size(); ++k) {
    result.push_back(wanted[k] ? cotangents[static_cast<size_t>(site.argument_values[k])] : Tensor());
  }
  return result;
}

const Primitive& compiled_call_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "compiled_call";
  p.arity = -1;
  p.cost = CostClass::opaque;
  p.infer = [](Inputs, const Attrs& a) {
    const ValueInfo& info = site_of(a).program->graph().value(output_value(site_of(a), a));
    return OutputSpec{info.shape, info.dtype};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec&) {
    CallSite& site = site_of(a);
    if (!site.ran) {
      site.results = site.program->run(std::vector<Tensor>(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(site.graph_inputs)));
      site.ran = true;
    }
    const Tensor result = std::exchange(site.results.at(static_cast<size_t>(a.axis)), Tensor());
    EDDY_CHECK(result.defined(), "internal: output ", a.axis, " of a compiled call evaluated twice");
    // A new handle: an output that is an input (or a captured tensor) must not have autodiff
    // record this call on that tensor's own state.
    return make_view(result, result.shape(), result.strides(), result.offset());
  };
  p.jvp = [](Inputs in, const Attrs& a, int input, const Tensor& tangent) {
    const auto output = static_cast<size_t>(a.axis);
    auto cached = std::find_if(forward_replays.begin(), forward_replays.end(), [&](const ForwardReplay& entry) {
      return entry.replays(a.payload, input) && entry.tangent.lock() == tangent.impl_ptr() &&
             entry.grad_mode == GradMode::enabled() && entry.output_tangents.at(output).defined();
    });
    if (cached == forward_replays.end()) {
      std::erase_if(forward_replays, [&](const ForwardReplay& entry) {
        return entry.site.expired() || entry.replays(a.payload, input);
      });
      const CallSite& site = site_of(a);
      const std::vector<ValueId>& outputs = site.program->graph().outputs;
      const auto moving = static_cast<size_t>(input);
      std::vector<Tensor> arguments(in.begin(), in.end());
      const auto replayed = [&](const std::vector<Tensor>& x) {
        arguments[moving] = x[0];
        const std::vector<Tensor> values = replay(site, arguments, outputs);
        std::vector<Tensor> results;
        for (ValueId value : outputs) results.push_back(values[static_cast<size_t>(value)]);
        return results;
      };
      forward_replays.push_back({a.payload, input, tangent.impl_ptr(), GradMode::enabled(),
                                 jvp(replayed, {in[moving]}, {tangent}).second});
      cached = std::prev(forward_replays.end());
    }
    return std::exchange(cached->output_tangents.at(output), Tensor());
  };
  // Every output of one call is a node of its own on the tape, sharing the call site: the engine
  // hands the cotangents of all those it reached to one walk over the graph.
  p.vjp_group = [](Inputs in, std::span<const OutputCotangent> outputs, const std::vector<bool>& wanted) {
    return input_cotangents(site_of(*outputs.front().attrs), in, outputs, wanted);
  };
  return register_primitive(std::move(p));
}();

bool carries_derivatives(const Tensor& tensor) {
  return (GradMode::enabled() && tensor.requires_grad()) || innermost_level(tensor) >= 0;
}

}  // namespace

std::vector<Tensor> call_with_derivatives(const std::shared_ptr<const Program>& program,
                                          const std::vector<Tensor>& inputs) {
  const Graph& graph = program->graph();
  auto site = std::make_shared<CallSite>();
  site->program = program;
  site->graph_inputs = inputs.size();
  site->argument_values = graph.inputs;
  std::vector<Tensor> arguments = inputs;
  for (const CapturedTensor& entry : graph.captured) {
    site->captured_versions.push_back(memory_version(entry.tensor));
    if (!carries_derivatives(entry.tensor)) continue;
    arguments.push_back(entry.tensor);
    site->argument_values.push_back(entry.id);
  }
  // An output computed from no argument is a constant, which requires no grad, as eagerly (backward()
  // through one gave zeros where the eager function's refused).
  const std::vector<bool> varies = varying_values(graph, site->argument_values);
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    Attrs attrs;
    attrs.axis = static_cast<int64_t>(i);
    attrs.payload = site;
    std::optional<NoGradGuard> constant;
    if (!varies[static_cast<size_t>(graph.outputs[i])]) constant.emplace();
    outputs.push_back(dispatch(compiled_call_p, arguments, attrs));
  }
  return outputs;
}

bool needs_derivatives(const Program& program, const std::vector<Tensor>& inputs) {
  for (const Tensor& input : inputs) {
    if (carries_derivatives(input)) return true;
  }
  for (const CapturedTensor& entry : program.graph().captured) {
    if (carries_derivatives(entry.tensor)) return true;
  }
  return false;
}

}  // namespace eddy::compiler
