#include "eddy/compiler/program.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <numeric>
#include <queue>
#include <sstream>
#include <unordered_set>

#include <unistd.h>

#include "eddy/backends/backend.h"
#include "eddy/backends/cpu/loops.h"
#include "eddy/compiler/fusion.h"
#include "eddy/compiler/passes.h"
#include "eddy/dist/communicator.h"
#include "eddy/ops/ops.h"

namespace eddy::compiler {
namespace {

// A dense buffer that only the program's value table refers to can be overwritten once its value
// is dead: no caller, captured tensor or view can see the write.
bool exclusively_held(const Tensor& tensor) {
  return tensor.impl_ptr().use_count() == 1 && tensor.storage().use_count() == 1 && tensor.is_contiguous() &&
         tensor.offset() == 0;
}

}  // namespace

Program::Program(Graph graph, Device device) : graph_(std::move(graph)), device_(device) {
  static std::atomic<int> built{0};
  name_ = "program-" + std::to_string(::getpid()) + "-" + std::to_string(++built);
  // Fused kernels read captured tensors in place: they must live where the kernels run.
  for (const CapturedTensor& entry : graph_.captured) {
    EDDY_CHECK(entry.tensor.device() == device_, "compiled function: a tensor it captured (%", entry.id, ", shape ",
               entry.tensor.shape(), ") is on ", entry.tensor.device(), " but the program runs on ", device_,
               "; move it there first");
  }
  if (pass_enabled("replicated_collectives")) drop_collectives_of_replicated_values(graph_);
  optimize(graph_);
  const bool on_gpu = device_.type == DeviceType::cuda;
  const std::vector<FusionGroup> groups =
      pass_enabled("fusion") ? plan_fusion(graph_, {.reduction_epilogues = pass_enabled("reduction_epilogue"),
                                                    .multi_output = pass_enabled("multi_output"),
                                                    .rematerialize = pass_enabled("rematerialize"),
                                                    .complex_values = !on_gpu})
                             : std::vector<FusionGroup>{};

  std::vector<int> kernel_at_root(graph_.nodes.size(), -1);
  std::vector<bool> inside_kernel(graph_.nodes.size(), false);
  std::vector<KernelPlan> plans;
  std::vector<std::vector<std::string_view>> fused_primitives;
  for (const FusionGroup& group : groups) {
    kernel_at_root[group.nodes.back()] = static_cast<int>(plans.size());
    fused_primitives.emplace_back();
    for (size_t n : group.nodes) {
      inside_kernel[n] = true;
      fused_primitives.back().push_back(graph_.nodes[n].primitive->name);
    }
    plans.push_back(plan_kernel(graph_, group, "eddy_fused_" + std::to_string(plans.size())));
    stats_.fused_nodes += group.nodes.size();
    if (group.epilogue != Epilogue::none) ++stats_.reduction_epilogues;
  }
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    if (kernel_at_root[i] >= 0) {
      steps_.push_back(Step{nullptr, kernel_at_root[i], fused_primitives[static_cast<size_t>(kernel_at_root[i])], {}});
    } else if (!inside_kernel[i]) {
      steps_.push_back(Step{&graph_.nodes[i], -1, {}, {}});
    }
  }
  if (on_gpu && !plans.empty()) {
    cuda_kernels_ = std::make_unique<CudaKernelSet>(plans, device_);
    for (KernelPlan& plan : plans) kernels_.push_back(FusedKernel{std::move(plan), nullptr});
  } else if (!plans.empty()) {
    // Generated loops go parallel where the CPU backend's own kernels do.
    cpu_source_ = render_cpu_source(plans, cpu_kernels::kParallelGrain);
    LoadedKernels loaded = load_cpu_kernels(cpu_source_);
    library_ = loaded.library;
    stats_.compile_seconds = loaded.compile_seconds;
    stats_.kernels_from_cache = loaded.from_cache;
    for (KernelPlan& plan : plans) {
      auto function = reinterpret_cast<Function>(library_->symbol(plan.name));
      kernels_.push_back(FusedKernel{std::move(plan), function});
    }
  }

  order_steps();

  // Liveness: each value is dropped after the step that reads it last (outputs never are).
  std::vector<int> last_use(graph_.values.size(), -1);
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (ValueId id : step_inputs(steps_[s])) last_use[static_cast<size_t>(id)] = static_cast<int>(s);
  }
  for (ValueId id : graph_.outputs) last_use[static_cast<size_t>(id)] = -1;
  for (size_t id = 0; id < last_use.size(); ++id) {
    if (last_use[id] >= 0) steps_[static_cast<size_t>(last_use[id])].release.push_back(static_cast<ValueId>(id));
  }
  reuse_buffers_ = pass_enabled("buffer_reuse");
  // A GPU's steps return before their kernels finish: timing them would time the launches.
  if (const char* profile = std::getenv("EDDY_COMPILER_PROFILE"); profile && *profile && std::string_view(profile) != "0" &&
                                                                   !on_gpu) {
    profile_ = std::make_unique<Profile>();
    profile_->first_run.assign(steps_.size(), 0.0);
    profile_->later_runs.assign(steps_.size(), 0.0);
    // Ranks report at once: the header says whose report it is.
    if (dist::launcher_world_size() > 1) {
      const dist::Communicator& world = dist::default_communicator();
      profile_->rank = cat("rank ", world.rank(), " of ", world.size());
    }
  }
  stats_.graph_nodes = graph_.nodes.size();
  stats_.steps = steps_.size();
  stats_.fused_kernels = kernels_.size();
}

std::vector<ValueId> Program::step_inputs(const Step& step) const {
  if (step.node) return step.node->inputs;
  std::vector<ValueId> inputs;
  for (const KernelInput& input : kernels_[static_cast<size_t>(step.kernel)].plan.inputs) inputs.push_back(input.value);
  return inputs;
}

std::vector<ValueId> Program::step_outputs(const Step& step) const {
  if (step.node) return {step.node->output};
  const KernelPlan& plan = kernels_[static_cast<size_t>(step.kernel)].plan;
  std::vector<ValueId> outputs{plan.output};
  for (const KernelSideOutput& side : plan.side_outputs) outputs.push_back(side.value);
  return outputs;
}

void Program::order_steps() {
  std::vector<int> computed_by(graph_.values.size(), -1);
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (ValueId id : step_outputs(steps_[s])) computed_by[static_cast<size_t>(id)] = static_cast<int>(s);
  }
  std::vector<int> waiting(steps_.size(), 0);
  std::vector<std::vector<int>> readers(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (ValueId id : step_inputs(steps_[s])) {
      const int producer = computed_by[static_cast<size_t>(id)];
      if (producer < 0) continue;
      ++waiting[s];
      readers[static_cast<size_t>(producer)].push_back(static_cast<int>(s));
    }
  }
  // Of the steps whose inputs are ready, the one that came first in graph order runs next, so
  // an unmerged program keeps its order.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (waiting[s] == 0) ready.push(static_cast<int>(s));
  }
  std::vector<Step> ordered;
  while (!ready.empty()) {
    const int s = ready.top();
    ready.pop();
    ordered.push_back(std::move(steps_[static_cast<size_t>(s)]));
    for (int reader : readers[static_cast<size_t>(s)]) {
      if (--waiting[static_cast<size_t>(reader)] == 0) ready.push(reader);
    }
  }
  EDDY_CHECK(ordered.size() == steps_.size(), "compiler: the fused groups of a graph depend on each other in a "
             "cycle; EDDY_COMPILER_DISABLE=multi_output avoids it (please report the graph)");
  steps_ = std::move(ordered);
}

const std::string& Program::cuda_source() const {
  static const std::string none;
  return cuda_kernels_ ? cuda_kernels_->source() : none;
}

void Program::run_kernel(size_t k, std::vector<Tensor>& values, const Step& step) const {
  const KernelPlan& plan = kernels_[k].plan;
  const bool on_gpu = device_.type == DeviceType::cuda;
  std::vector<Tensor> operands;
  std::vector<void*> pointers;
  operands.reserve(plan.inputs.size());
  Tensor output;
  for (const KernelInput& input : plan.inputs) {
    Tensor& value = values[static_cast<size_t>(input.value)];
    // An input read at the index it is written, whose value dies here, can hold the output. A sum's
    // output is smaller than its inputs: it gets a buffer of its own size.
    const bool dies_here = std::find(step.release.begin(), step.release.end(), input.value) != step.release.end();
    // Not on a GPU, whose generated kernels declare their output __restrict__ (codegen.cpp).
    if (reuse_buffers_ && !on_gpu && plan.epilogue == Epilogue::none && !output.defined() && dies_here &&
        input.access == Access::dense && value.dtype() == plan.output_dtype && exclusively_held(value)) {
      output = value;
      pointers.push_back(element_address(output));
      continue;
    }
    Tensor operand = kernel_operand(plan, input, value);
    pointers.push_back(element_address(operand));
    operands.push_back(std::move(operand));
  }
  if (!output.defined()) output = Tensor::empty(plan.output_shape, plan.output_dtype, device_);
  std::vector<Tensor> outputs{output};
  for (const KernelSideOutput& side : plan.side_outputs) {
    outputs.push_back(Tensor::empty(plan.domain, side.dtype, device_));
  }
  if (on_gpu) {
    // A GPU's sums add into their outputs (codegen.cpp, cuda_loops), which start at zero.
    if (plan.epilogue != Epilogue::none) {
      for (Tensor& tensor : outputs) tensor.fill_(0.0);
    }
    for (const Tensor& tensor : outputs) pointers.push_back(element_address(tensor));
    cuda_kernels_->launch(k, plan, pointers);
  } else if (output.numel() > 0) {  // a sum of an empty domain still writes its zeros
    std::vector<void*> output_pointers;
    for (const Tensor& tensor : outputs) output_pointers.push_back(tensor.raw_data());
    kernels_[k].function(pointers.data(), output_pointers.data(), plan.outer, plan.inner);
  }
  values[static_cast<size_t>(plan.output)] = std::move(outputs[0]);
  for (size_t k = 0; k < plan.side_outputs.size(); ++k) {
    values[static_cast<size_t>(plan.side_outputs[k].value)] = std::move(outputs[k + 1]);
  }
}

std::string Program::listing() const {
  std::ostringstream out;
  auto describe = [&](ValueId id) { out << "%" << id << " : " << dtype_name(graph_.value(id).dtype) << graph_.value(id).shape; };
  for (const Step& step : steps_) {
    if (step.node) {
      out << step.node->primitive->name << "(";
      for (size_t i = 0; i < step.node->inputs.size(); ++i) out << (i ? ", %" : "%") << step.node->inputs[i];
      out << ") -> ";
      describe(step.node->output);
    } else {
      const KernelPlan& plan = kernels_[static_cast<size_t>(step.kernel)].plan;
      out << plan.name << "[";
      for (size_t i = 0; i < step.fused_primitives.size(); ++i) out << (i ? " " : "") << step.fused_primitives[i];
      out << "](";
      for (size_t i = 0; i < plan.inputs.size(); ++i) out << (i ? ", %" : "%") << plan.inputs[i].value;
      out << ") -> ";
      describe(plan.output);
      for (const KernelSideOutput& side : plan.side_outputs) {
        out << ", ";
        describe(side.value);
      }
    }
    out << "\n";
  }
  return out.str();
}

Program::~Program() {
  if (profile_ && profile_->runs > 0) std::cerr << profile_report() << std::flush;
}

std::string Program::profile_report() const {
  // The runs after the first, where there are some: the first pays one-time costs (a 512 x 512
  // product's first oneDNN call took 25 ms, its later ones 2) that would swamp a short run's mean.
  const bool later = profile_->runs > 1;
  const std::vector<double>& seconds = later ? profile_->later_runs : profile_->first_run;
  const auto runs = static_cast<double>(later ? profile_->runs - 1 : 1);
  const auto sum = [](const std::vector<double>& values) { return std::accumulate(values.begin(), values.end(), 0.0); };
  const double total = sum(seconds);
  std::vector<std::string> lines;
  std::istringstream listed(listing());
  for (std::string line; std::getline(listed, line);) lines.push_back(line);
  // By operation: a primitive's calls together, the fused kernels together.
  std::map<std::string, std::pair<double, int64_t>> by_operation;
  for (size_t s = 0; s < steps_.size(); ++s) {
    auto& [time, calls] = by_operation[steps_[s].node ? std::string(steps_[s].node->primitive->name) : "fused kernels"];
    time += seconds[s];
    ++calls;
  }
  std::vector<std::pair<double, std::string>> operations;
  for (const auto& [name, entry] : by_operation) operations.emplace_back(entry.first, name);
  std::sort(operations.rbegin(), operations.rend());
  std::vector<size_t> slowest(steps_.size());
  for (size_t s = 0; s < slowest.size(); ++s) slowest[s] = s;
  std::sort(slowest.begin(), slowest.end(), [&](size_t a, size_t b) { return seconds[a] > seconds[b]; });
  slowest.resize(std::min<size_t>(slowest.size(), 20));

  const auto share = [&](double time) { return total > 0 ? 100 * time / total : 0.0; };
  std::ostringstream out;
  out << std::fixed << std::setprecision(3) << "eddy compiler profile of " << name_ << ": " << steps_.size() << " steps, "
      << profile_->runs << (profile_->runs == 1 ? " run, " : " runs, ") << 1e3 * total / runs << " ms a run";
  if (later) out << " after the first (the first, with one-time costs: " << 1e3 * sum(profile_->first_run) << " ms)";
  out << "\n  by operation (share, ms a run, steps):\n";
  for (const auto& [time, name] : operations) {
    out << "    " << std::setprecision(1) << std::setw(5) << share(time) << "%  " << std::setprecision(3)
        << std::setw(9) << 1e3 * time / runs << "  " << std::setw(4) << by_operation[name].second << "  " << name << "\n";
  }
  out << "  the slowest steps (share, ms a run, step):\n";
  for (size_t s : slowest) {
    out << "    " << std::setprecision(1) << std::setw(5) << share(seconds[s]) << "%  " << std::setprecision(3)
        << std::setw(9) << 1e3 * seconds[s] / runs << "  " << lines[s] << "\n";
  }
  if (profile_->rank.empty()) return out.str();
  // mpirun passes the ranks' output on in pieces, which interleave: every line names its rank.
  std::string prefixed;
  std::istringstream report(out.str());
  for (std::string line; std::getline(report, line);) prefixed += "[" + profile_->rank + "] " + line + "\n";
  return prefixed;
}

std::vector<Tensor> Program::run(const std::vector<Tensor>& inputs) const {
  EDDY_CHECK(inputs.size() == graph_.inputs.size(), "compiled function: expected ", graph_.inputs.size(),
             " inputs, got ", inputs.size());
  std::vector<Tensor> values(graph_.values.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EDDY_CHECK(inputs[i].device() == device_, "compiled function: input ", i, " is on ", inputs[i].device(),
               " but the program was built for ", device_);
    values[static_cast<size_t>(graph_.inputs[i])] = inputs[i];
  }
  for (const CapturedTensor& entry : graph_.captured) values[static_cast<size_t>(entry.id)] = entry.tensor;

  std::vector<Tensor> operands;
  std::vector<double> step_seconds(profile_ ? steps_.size() : 0);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    const auto started = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    if (step.kernel >= 0) {
      run_kernel(static_cast<size_t>(step.kernel), values, step);
    } else {
      const GraphNode& node = *step.node;
      operands.clear();
      for (ValueId id : node.inputs) operands.push_back(values[static_cast<size_t>(id)]);
      const ValueInfo& info = graph_.value(node.output);
      values[static_cast<size_t>(node.output)] = node.primitive->eval(operands, node.attrs, OutputSpec{info.shape, info.dtype});
      operands.clear();  // a held operand would keep its buffer from being reused
    }
    for (ValueId id : step.release) values[static_cast<size_t>(id)] = Tensor();
    if (profile_) step_seconds[s] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  if (profile_) {
    const std::lock_guard lock(profile_->mutex);
    std::vector<double>& into = profile_->runs == 0 ? profile_->first_run : profile_->later_runs;
    for (size_t s = 0; s < steps_.size(); ++s) into[s] += step_seconds[s];
    ++profile_->runs;
  }
  // The caller may write into a result, so none may share memory with the program's own buffers
  // (a folded constant, returned again by every call), with the caller's inputs or parameters
  // (x * 1 simplified to x) or with another result (two zeros_like merged into one value): eager
  // returns a fresh tensor for each of those.
  std::unordered_set<const Storage*> reachable;
  for (const Tensor& input : inputs) reachable.insert(input.storage().get());
  for (const CapturedTensor& entry : graph_.captured) reachable.insert(entry.tensor.storage().get());
  std::vector<Tensor> outputs;
  for (ValueId id : graph_.outputs) {
    Tensor output = values[static_cast<size_t>(id)];
    if (!reachable.insert(output.storage().get()).second) {
      Tensor fresh = Tensor::empty(output.shape(), output.dtype(), output.device());
      fresh.copy_(output);
      output = std::move(fresh);
    }
    outputs.push_back(std::move(output));
  }
  return outputs;
}

}  // namespace eddy::compiler
