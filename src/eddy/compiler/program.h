#pragma once
// A lowered graph, ready to run many times: primitives are called through their eval (no
// dispatch, no autodiff bookkeeping), fused groups through generated native kernels, and every
// intermediate buffer is released after its last use or handed on to a fused kernel's output.

#include <memory>
#include <mutex>
#include <vector>

#include "eddy/compiler/codegen.h"
#include "eddy/compiler/cuda_runner.h"
#include "eddy/compiler/graph.h"
#include "eddy/compiler/kernel_cache.h"

namespace eddy::compiler {

struct ProgramStats {
  size_t graph_nodes = 0;      // after the passes
  size_t steps = 0;            // primitive calls plus fused kernels
  size_t fused_kernels = 0;
  size_t fused_nodes = 0;      // graph nodes that run inside fused kernels
  size_t reduction_epilogues = 0;  // fused kernels that end in a sum
  double compile_seconds = 0;  // the system compiler's time; 0 on a cache hit
  bool kernels_from_cache = false;
};

class Program {
 public:
  // Optimises `graph` (passes.h) and lowers it for `device`: fuses, generates and loads kernels
  // (C++ built by the system compiler for the CPU, CUDA built by NVRTC for a GPU), plans buffer
  // lifetimes. On a GPU, complex values are not fused (the CUDA kernels have no complex type
  // yet): their primitives run one by one.
  explicit Program(Graph graph, Device device = cpu());
  // With EDDY_COMPILER_PROFILE set, writes the time its runs spent in each step to standard error.
  ~Program();

  // Runs on `inputs`, which must match the graph's inputs in shape and dtype, on the device the
  // program was built for.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  // "program-PID-N": the N-th program this process built, as EDDY_COMPILER_DUMP's files and
  // EDDY_COMPILER_PROFILE's reports name it.
  const std::string& name() const { return name_; }
  const Graph& graph() const { return graph_; }
  const ProgramStats& stats() const { return stats_; }
  Device device() const { return device_; }
  // The generated C++ source for the CPU (empty when nothing was fused, or on a GPU).
  const std::string& cpu_source() const { return cpu_source_; }
  // The generated CUDA source for a GPU (empty when nothing was fused, or on the CPU).
  const std::string& cuda_source() const;
  // One line per step, in execution order: primitive calls as in Graph::to_string, fused kernels
  // with the primitives they run. Written by EDDY_COMPILER_DUMP (docs/compiler.md).
  std::string listing() const;

 private:
  using Function = void (*)(const void* const* inputs, void* const* outputs, int64_t outer, int64_t inner);
  struct FusedKernel {
    KernelPlan plan;
    Function function = nullptr;
  };
  struct Step {
    const GraphNode* node = nullptr;  // a primitive call, or
    int kernel = -1;                  // a fused kernel
    std::vector<std::string_view> fused_primitives;
    std::vector<ValueId> release;     // values whose last use is this step
  };

  // Runs fused kernel `k` and stores its outputs (the root's value, then the side outputs) in
  // `values`.
  void run_kernel(size_t k, std::vector<Tensor>& values, const Step& step) const;
  // Puts steps_ in an order where every value is computed before it is read: merged groups
  // (FusionOptions::multi_output) do not run where their roots are.
  void order_steps();
  std::vector<ValueId> step_inputs(const Step& step) const;
  std::vector<ValueId> step_outputs(const Step& step) const;

  Graph graph_;
  Device device_;
  std::vector<FusedKernel> kernels_;
  std::unique_ptr<CudaKernelSet> cuda_kernels_;  // on a GPU: the kernels, in kernels_' order
  std::vector<Step> steps_;
  std::shared_ptr<SharedLibrary> library_;
  std::string cpu_source_;
  ProgramStats stats_;
  bool reuse_buffers_ = true;  // off with EDDY_COMPILER_DISABLE=buffer_reuse

  std::string name_;

  // EDDY_COMPILER_PROFILE (docs/compiler.md): each step's seconds in the first run (which pays
  // one-time costs: a library's first call, first-touch pages) and summed over the later ones.
  struct Profile {
    std::mutex mutex;
    std::string rank;  // "rank R of N" in a job of several processes, else empty
    std::vector<double> first_run, later_runs;
    int64_t runs = 0;
  };
  std::unique_ptr<Profile> profile_;
  std::string profile_report() const;
};

}  // namespace eddy::compiler
