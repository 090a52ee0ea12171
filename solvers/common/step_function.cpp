#include "solvers/common/step_function.h"

#include <cstdio>
#include <exception>
#include <memory>

namespace eddy::solvers {
namespace {

std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f s", value);
  return text;
}

// "training step compiled in 1.20 s (14 fused kernels built in 0.90 s)": the cost a user pays
// once per run, and whether the kernel cache saved most of it.
std::string compile_report(const std::string& what, const CompileStats& stats) {
  std::string kernels = "no fused kernels";
  if (stats.last.fused_kernels > 0) {
    kernels = cat(stats.last.fused_kernels, " fused kernels ",
                  stats.last.kernels_from_cache ? std::string("from the kernel cache")
                                                : "built in " + seconds(stats.last.compile_seconds));
  }
  return cat(what, " compiled in ", seconds(stats.trace_seconds), " (", kernels, ")");
}

// Building a step's kernels takes time about in proportion to its traced graph: measured on 2
// cores, 2180 nodes (a 4th-order PINN residual) take 11 s, 5700 (5th order) 23 s, 15800 (6th
// order) 51 s, and an 8th order's graph would take minutes, while its eager step takes seconds.
// The examples trace 560 to 1500 nodes (Burgers, Kovasznay, the GPT training step). Beyond this
// bound a step runs eagerly, and the log says so with the node count.
constexpr size_t kMaxCompiledStepNodes = 10000;

}  // namespace

StepFunction::StepFunction(std::string what, compiler::TensorFunction function, bool compiled,
                           std::function<void(const std::string&)> note, std::function<void(const std::string&)> warn)
    : what_(std::move(what)), function_(std::move(function)), note_(std::move(note)), warn_(std::move(warn)) {
  if (compiled) compiled_.emplace(function_, CompileOptions{.max_graph_nodes = kMaxCompiledStepNodes});
}

void StepFunction::tell(const std::string& line) const {
  if (note_) note_(line);
}

std::vector<Tensor> StepFunction::operator()(const std::vector<Tensor>& inputs) {
  if (!compiled_) return function_(inputs);
  if (compiled_->program_for(inputs)) return (*compiled_)(inputs);
  std::vector<Tensor> outputs;
  try {
    outputs = (*compiled_)(inputs);  // traces, compiles and runs the program
  } catch (const std::exception& refused) {
    // Not only eddy::Error: a refusal inside a Python equation comes back as a Python exception.
    // Run as written; should that fail too, the function has a fault of its own, which is the
    // error to report rather than the compiler's.
    outputs = function_(inputs);
    compiled_.reset();
    const std::string reason = refused.what();
    const std::string line = cat(what_, " runs eagerly: ", reason.substr(0, reason.find('\n')));
    if (warn_) {
      warn_(line);
    } else {
      tell(line);
    }
    return outputs;
  }
  if (!reported_) tell(compile_report(what_, compiled_->stats()));
  reported_ = true;
  return outputs;
}

void compile_updates(optim::Adam& adam, const StepFunction& step) {
  adam.run_updates_through([&step](optim::Adam::Update update) {
    auto compiled = std::make_shared<StepFunction>("Adam update", update, true, nullptr);
    return optim::Adam::Update([&step, update = std::move(update), compiled](const std::vector<Tensor>& inputs) {
      return step.runs_compiled() ? (*compiled)(inputs) : update(inputs);
    });
  });
}

}  // namespace eddy::solvers
