#pragma once
// eddy::compile: the same code, run as a compiled graph. The first call with a new signature
// (input shapes, dtypes, devices, requires_grad, grad mode) traces the function on abstract
// tensors (shapes and dtypes only: no kernel runs and no autodiff history is kept), optimises and
// fuses the graph, compiles its kernels and runs the program; later calls with that signature
// run the program without calling the function. A new signature retraces.
//
// Captured tensors (model parameters used inside the function) are read by reference on every
// call, so an optimiser that updates them in place between calls is seen. One whose elements the
// function reads on the host (item(), a captured mask) is compared with what the trace read at
// every call, and a call where it differs traces again. Results carry
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
  int traces = 0;                // new signatures, and captured tensors read on the host that changed
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

// Distributed inputs (dist/dtensor.h) compile too: the function is traced on them, the sharding
// rules placing every value as it goes, so the graph is the program each rank runs on its local
// parts, collectives included; the outputs come back laid out as the trace left them.
class CompiledFunction {
 public:
  explicit CompiledFunction(compiler::TensorFunction function, CompileOptions options = {});

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  const CompileStats& stats() const { return stats_; }
  // The program for these inputs' signature, or null before the first call with it.
  const compiler::Program* program_for(const std::vector<Tensor>& inputs) const;

 private:
  std::vector<Tensor> run(const std::shared_ptr<compiler::Program>& program, const std::vector<Tensor>& inputs) const;

  // The local program of distributed inputs: a function of their local parts, compiled once per
  // signature and layout, and the layouts its trace gave the outputs (null: an ordinary tensor).
  struct LocalProgram {
    std::unique_ptr<CompiledFunction> compiled;
    std::shared_ptr<std::vector<std::pair<Shape, std::shared_ptr<const Distribution>>>> output_layouts;
  };
  std::vector<Tensor> call_distributed(const std::vector<Tensor>& inputs);
  LocalProgram& local_program_for(const std::vector<Tensor>& inputs);

  compiler::TensorFunction function_;
  CompileOptions options_;
  // A program and the captured tensors its trace read on the host, with what it read: a call
  // where one of them holds other values traces again.
  struct TracedProgram {
    std::shared_ptr<compiler::Program> program;
    std::vector<compiler::HostRead> host_reads;
  };
  std::map<std::string, TracedProgram> programs_;                      // by signature
  std::map<std::string, LocalProgram> local_programs_;                 // by signature and layout
  CompileStats stats_;
};

CompiledFunction compile(compiler::TensorFunction function);

}  // namespace eddy
