#pragma once
// eddy::compile: the same code, run eagerly the first time, then as a compiled graph. The first
// call with a new signature (input shapes, dtypes, devices, requires_grad, grad mode) traces the
// function, optimises and fuses the graph and compiles its kernels; later calls with that
// signature run the compiled program. A new signature retraces.
//
// Captured tensors (model parameters used inside the function) are read by reference on every
// call, so an optimiser that updates them in place between calls is seen. Results carry
// derivatives as the eager function's would, with respect to the inputs and the captured tensors
// that require gradients, to any order in both modes (compiler/compiled_call.h); the compiled
// kernels give the values, the derivatives are the graph's ops run eagerly. To have a backward
// pass compiled too, put grad() inside the function: a training step is captured whole.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eddy/compiler/program.h"
#include "eddy/compiler/trace.h"

namespace eddy {

struct CompileStats {
  int traces = 0;                // signatures seen so far
  int calls = 0;
  compiler::ProgramStats last;   // of the program built by the latest trace
  double trace_seconds = 0;      // latest trace + passes + lowering, compiler time included
};

struct CompileOptions {
  // A traced graph with more nodes than this is refused with an eddy::Error that says how many,
  // before the passes and the system compiler spend minutes on it; 0 sets no bound. The call that
  // traced it then fails, so a caller that can run eagerly instead catches it (solvers/common/
  // step_function.h).
  size_t max_graph_nodes = 0;
};

class CompiledFunction {
 public:
  explicit CompiledFunction(compiler::TensorFunction function, CompileOptions options = {});

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  const CompileStats& stats() const { return stats_; }
  // The program for these inputs' signature, or null before the first call with it.
  const compiler::Program* program_for(const std::vector<Tensor>& inputs) const;

 private:
  std::vector<Tensor> run(const std::shared_ptr<compiler::Program>& program, const std::vector<Tensor>& inputs) const;

  compiler::TensorFunction function_;
  CompileOptions options_;
  std::map<std::string, std::shared_ptr<compiler::Program>> programs_;  // by signature
  CompileStats stats_;
};

CompiledFunction compile(compiler::TensorFunction function);

}  // namespace eddy
