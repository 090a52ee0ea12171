#include "eddy/compiler/compile.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "eddy/autodiff/forward.h"
#include "eddy/autodiff/tape.h"
#include "eddy/compiler/compiled_call.h"
#include "eddy/compiler/passes.h"
#include "eddy/compiler/placement_search.h"
#include "eddy/compiler/trace.h"
#include "eddy/core/distribution.h"
#include "eddy/core/tracing.h"
#include "eddy/dist/communicator.h"
#include "eddy/ops/autocast.h"

namespace eddy {
namespace {

// Appended, not streamed: the PINN solver's fused interior calls a compiled function per chunk of
// points, tens of times a step, and a stream's formatting was a third of such a call.
std::string signature(const std::vector<Tensor>& inputs) {
  std::string key = GradMode::enabled() ? "grad" : "nograd";
  // Autocast changes the dtypes the traced ops give, so a program traced under it answers only
  // calls under the same autocast.
  if (const std::optional<DType> autocast = autocast_dtype()) {
    key += ";autocast ";
    key += dtype_name(*autocast);
  }
  for (const Tensor& t : inputs) {
    key += ';';
    key += to_string(t.shape());
    key += dtype_name(t.dtype());
    key += to_string(t.device());
    if (t.requires_grad()) {
      key += 'r';
    } else if (innermost_level(t) >= 0) {
      key += 't';  // traced as requiring grad, so that the graph knows where derivatives stop
    }
  }
  return key;
}

// Each rank's parts of distributed tensors; ordinary ones as they are.
std::vector<Tensor> local_parts(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(local_part(t));
  return parts;
}

// The signature of the local parts and where each input lies.
std::string layout_signature(const std::vector<Tensor>& inputs) {
  std::ostringstream key;
  key << signature(local_parts(inputs));
  for (const Tensor& t : inputs) {
    const Distribution* layout = distribution_of(t);
    // The global shape too: where parts differ by a row, one local shape comes of several (3 rows
    // are rank 0's of 13 over 4 ranks, and rank 1's of 11), and the program bakes the whole in.
    if (!layout) {
      key << ";ordinary";
      continue;
    }
    key << ";" << to_string(layout->placements) << "@" << reinterpret_cast<uintptr_t>(layout->mesh.get()) << " of "
        << cat(t.shape());
  }
  return key.str();
}

// Where a traced function's program runs: where its inputs are (the signature names their
// device), or for a function of captured tensors alone (a training step over a model's
// weights), where those are.
Device program_device(const std::vector<Tensor>& inputs, const compiler::Graph& graph) {
  if (!inputs.empty()) return inputs[0].device();
  return graph.captured.empty() ? cpu() : graph.captured[0].tensor.device();
}

// The optimised graph, the execution order and the generated source of one program, for
// EDDY_COMPILER_DUMP=DIR: what a user reads to see what was fused, or to report a bad kernel.
// Programs are numbered in the order the process traces them: every compiled function's first
// trace would otherwise write the same files.
void dump(const compiler::Program& program, const std::filesystem::path& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  EDDY_CHECK(!error, "EDDY_COMPILER_DUMP: cannot create ", directory, ": ", error.message());
  const std::string& stem = program.name();
  std::ofstream(directory / (stem + ".graph.txt")) << program.graph().to_string();
  std::ofstream(directory / (stem + ".steps.txt")) << program.listing();
  if (!program.cpu_source().empty()) std::ofstream(directory / (stem + ".cpp")) << program.cpu_source();
  if (!program.cuda_source().empty()) std::ofstream(directory / (stem + ".cu")) << program.cuda_source();
}

}  // namespace

CompiledFunction::CompiledFunction(compiler::TensorFunction function, CompileOptions options)
    : function_(std::move(function)), options_(options) {
  EDDY_CHECK(function_, "compile: the function is empty");
}

const compiler::Program* CompiledFunction::program_for(const std::vector<Tensor>& inputs) const {
  if (std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return is_distributed(t); })) {
    auto found = local_programs_.find(layout_signature(inputs));
    return found == local_programs_.end() ? nullptr : found->second.compiled->program_for(local_parts(inputs));
  }
  auto found = programs_.find(signature(inputs));
  return found == programs_.end() ? nullptr : found->second.program.get();
}

CompiledFunction::LocalProgram& CompiledFunction::local_program_for(const std::vector<Tensor>& inputs) {
  LocalProgram& local = local_programs_[layout_signature(inputs)];
  if (local.compiled) return local;
  std::vector<std::pair<Shape, std::shared_ptr<const Distribution>>> input_layouts;
  for (const Tensor& input : inputs) input_layouts.emplace_back(input.shape(), input.impl()->distribution);
  local.output_layouts = std::make_shared<std::vector<std::pair<Shape, std::shared_ptr<const Distribution>>>>();
  local.compiled = std::make_unique<CompiledFunction>(
      [function = function_, input_layouts, output_layouts = local.output_layouts](const std::vector<Tensor>& parts) {
        std::vector<Tensor> arguments;
        for (size_t i = 0; i < parts.size(); ++i) {
          const auto& [global, layout] = input_layouts[i];
          arguments.push_back(layout ? make_distributed(global, layout->over(parts[i])) : parts[i]);
        }
        const std::vector<Tensor> outputs = function(arguments);
        output_layouts->clear();
        for (const Tensor& output : outputs) output_layouts->emplace_back(output.shape(), output.impl()->distribution);
        return local_parts(outputs);
      },
      options_);
  return local;
}

std::vector<Tensor> CompiledFunction::call_distributed(const std::vector<Tensor>& inputs) {
  LocalProgram& local = local_program_for(inputs);
  const std::vector<Tensor> parts = (*local.compiled)(local_parts(inputs));
  const int calls = stats_.calls;
  stats_ = local.compiled->stats();
  stats_.calls = calls;
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& [global, layout] = local.output_layouts->at(i);
    outputs.push_back(layout ? make_distributed(global, layout->over(parts[i])) : parts[i]);
  }
  return outputs;
}

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor>& inputs) {
  ++stats_.calls;
  // Inside another capture, run eagerly so the outer graph records these ops as its own.
  if (active_trace_recorder()) return function_(inputs);
  if (std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return is_distributed(t); })) {
    return call_distributed(inputs);
  }
  compiler::check_inputs(inputs);
  const std::string key = signature(inputs);
  if (auto found = programs_.find(key); found != programs_.end()) {
    const std::vector<compiler::HostRead>& reads = found->second.host_reads;
    if (std::all_of(reads.begin(), reads.end(), [](const compiler::HostRead& read) { return read.unchanged(); })) {
      return run(found->second.program, inputs);
    }
    programs_.erase(found);
  }

  const auto start = std::chrono::steady_clock::now();
  // Abstractly: no kernel runs and no autodiff history is kept while the step is recorded, so a
  // first call costs the capture and the program's run, not an eager step as well. Recording the
  // examples/lm training step eagerly peaked at 2.0 GB; the run of two steps now peaks at 1.07 GB.
  compiler::Trace traced = compiler::trace_choosing_placements(function_, inputs, compiler::Evaluation::abstract);
  const size_t traced_nodes = traced.graph.nodes.size();
  EDDY_CHECK(options_.max_graph_nodes == 0 || traced_nodes <= options_.max_graph_nodes, "compile: the traced graph has ",
             traced_nodes, " nodes, more than the ", options_.max_graph_nodes,
             " this function compiles in reasonable time (building native code for it would take minutes)");
  auto program = std::make_shared<compiler::Program>(std::move(traced.graph), program_device(inputs, traced.graph));
  stats_.trace_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats_.last = program->stats();
  ++stats_.traces;
  programs_.emplace(key, TracedProgram{program, std::move(traced.host_reads)});
  if (const char* directory = std::getenv("EDDY_COMPILER_DUMP"); directory && *directory) {
    dump(*program, directory);
  }
  if (compiler::compiler_verbose()) {
    // One write per line, naming the rank in a job of several: ranks print at once.
    const dist::Communicator& world = dist::default_communicator();
    std::ostringstream line;
    line << "eddy compile" << (world.size() > 1 ? " (rank " + std::to_string(world.rank()) + ")" : "") << ": traced "
         << key << ": " << stats_.last.graph_nodes << " nodes, " << stats_.last.fused_kernels << " fused kernels ("
         << stats_.last.reduction_epilogues << " ending in a sum) covering " << stats_.last.fused_nodes
         << " nodes; kernels " << (stats_.last.kernels_from_cache ? "from the cache" : "compiled in ")
         << (stats_.last.kernels_from_cache ? "" : std::to_string(stats_.last.compile_seconds) + " s") << "; total "
         << stats_.trace_seconds << " s\n";
    std::cerr << line.str() << std::flush;
  }
  return run(program, inputs);
}

std::vector<Tensor> CompiledFunction::run(const std::shared_ptr<compiler::Program>& program,
                                          const std::vector<Tensor>& inputs) const {
  if (compiler::needs_derivatives(*program, inputs)) return compiler::call_with_derivatives(program, inputs);
  return program->run(inputs);
}

CompiledFunction compile(compiler::TensorFunction function) { return CompiledFunction(std::move(function)); }

}  // namespace eddy
