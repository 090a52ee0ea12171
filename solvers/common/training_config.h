#pragma once
// Config sections that every training command reads the same way.

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eddy/core/autograd.h"
#include "eddy/core/device.h"
#include "eddy/dist/process_mesh.h"
#include "eddy/dist/sharded_optimizer.h"
#include "eddy/io/config.h"
#include "eddy/ops/autocast.h"
#include "eddy/optim/schedule.h"

namespace eddy::solvers {

// A run's length in its training loop's steps, and the keys that set it, for errors.
struct RunLength {
  int64_t steps = 0;
  std::string keys;
  std::string unit = "step";  // what one of `steps` is called in messages (an operator's: epoch)
};

// A `schedule:` section: type (constant | exponential | step | cosine) and the keys that type
// uses (gamma and every; warmup and floor), `every` counted in the caller's steps. A cosine's
// floor may not exceed the peak learning rate, nor its warmup take the whole run where `steps`
// gives the run's length.
optim::ScheduleSpec read_schedule(const io::ConfigNode& section, int64_t default_every, double peak,
                                  const std::optional<RunLength>& steps = std::nullopt);

// `output.dir`, a run's folder (`fallback` when not given), refused when a file of that name is in
// the way: found at the key rather than as a filesystem error after the run has trained.
std::string read_output_dir(const io::ConfigNode& output, const std::string& fallback);

// `zero_stage` of a training section: 0 (every rank keeps the whole optimiser state) or 1 (ZeRO
// stage 1: each data-parallel rank keeps the state of its share of the parameters).
int64_t read_zero_stage(const io::ConfigNode& training);

// A `parallel:` section, `{mesh: [2, 2], names: [dp, mp]}`: the job's ranks as a process mesh
// with named axes (docs/distributed.md, "Auto-parallel").
struct ParallelSpec {
  Shape mesh;                      // ranks along each axis; empty: no section
  std::vector<std::string> names;  // one per mesh axis
  std::string where;               // the section's file:line:column, for errors found at run time

  // The ranks along the axis called `name`; 1 where there is none.
  int64_t ranks(std::string_view name) const;
};

// A `device:` key (cpu, cuda or cuda:N): where a run's tensors live. A run makes its tensors
// under a DefaultDeviceScope of it (core/device.h), so the solvers name no device themselves.
struct DeviceSpec {
  Device device = cpu();
  bool numbered = false;  // cuda:N rather than cuda
  std::string where;      // the key's file:line:column; empty when the file has none
};

// Reads the `device` key of a file's top level; cpu() without one.
DeviceSpec read_device(const io::ConfigNode& root);

// The device this rank runs on: `cuda` is GPU k for the k-th rank of `world` on its machine
// (one GPU per rank, as mpirun places them), cuda:N is GPU N on every rank. Refuses, naming the
// key, a device this process cannot use (a build without its backend, no driver, no such GPU).
Device place_on_device(const DeviceSpec& spec, const dist::Communicator& world);

// What a solver runs under, whatever its caller had open: the device of place_on_device,
// gradients recorded (called inside no_grad, every Adam step came out without a gradient and the
// run still said it had finished) and autocast off (the problem's dtype sets the precision; a
// caller's autocast changed results that no file recorded).
class SolverScope {
 public:
  SolverScope(const DeviceSpec& spec, const dist::Communicator& world);
  Device device() const { return device_; }

 private:
  Device device_;
  DefaultDeviceScope on_device_;
  GradModeGuard gradients_{true};
  AutocastScope precision_{std::nullopt};
};

// Reads a `parallel:` section whose axis names are among `axis_names`, each used once.
ParallelSpec read_parallel(const io::ConfigNode& section, std::initializer_list<std::string_view> axis_names);

// Refuses a `parallel:` section whose mesh holds another number of ranks than the job, naming
// the section and the mpirun -np it needs; a job without a section passes.
void check_job_size(const ParallelSpec& spec, const dist::Communicator& world);

// The process mesh of `spec` over this job's ranks, refusing a mesh of another size; a job
// without a section gets `default_axis` over all its ranks.
std::shared_ptr<const dist::ProcessMesh> make_mesh(const ParallelSpec& spec, const std::string& default_axis,
                                                   dist::Communicator& world);

// The optimiser `make` builds over `parameters`, or with zero_stage 1 on several ranks the same
// one over this rank's share of them, in dist::ShardedOptimizer. Either saves the same state, so a
// checkpoint resumes with either stage and on any number of ranks.
std::unique_ptr<optim::Optimizer> make_optimizer(int64_t zero_stage, std::vector<Tensor> parameters,
                                                 const dist::ShardedOptimizer::Factory& make,
                                                 dist::RankGradients gradients, dist::Communicator& comm);

// Sums each rank's part of the gradients of `parameters` (dist::DeferGradientSums) over the
// ranks before `optimizer` steps: by the reduce-scatter of a ZeRO-sharded optimiser made with
// RankGradients::to_sum (which its step then uses), by an all-reduce otherwise.
void sum_gradients(optim::Optimizer& optimizer, const std::vector<Tensor>& parameters, dist::Communicator& comm);

// The bytes of optimiser state this rank holds: all of it, or with ZeRO stage 1 its share.
int64_t optimizer_state_bytes(const optim::Optimizer& optimizer);

}  // namespace eddy::solvers
