#include "solvers/common/training_config.h"

#include <algorithm>
#include <filesystem>

#include "eddy/core/backend.h"
#include "eddy/dist/data_parallel.h"

namespace eddy::solvers {

optim::ScheduleSpec read_schedule(const io::ConfigNode& section, int64_t default_every, double peak,
                                  const std::optional<RunLength>& steps) {
  optim::ScheduleSpec spec;
  spec.type = section.choice("type",
                             {{"constant", optim::ScheduleType::constant},
                              {"exponential", optim::ScheduleType::exponential},
                              {"step", optim::ScheduleType::step},
                              {"cosine", optim::ScheduleType::cosine}},
                             optim::ScheduleType::constant);
  if (spec.type == optim::ScheduleType::exponential || spec.type == optim::ScheduleType::step) {
    spec.gamma = section.number("gamma", 0.1);
    spec.every = section.integer("every", default_every);
    if (!(spec.gamma > 0)) section.at("gamma").fail("must be positive");
    if (spec.every < 1) section.at("every").fail("must be at least 1");
  } else if (spec.type == optim::ScheduleType::cosine) {
    spec.warmup = section.integer("warmup", 0);
    spec.floor = section.number("floor", 0.0);
    if (spec.warmup < 0) section.at("warmup").fail("must be non-negative");
    if (spec.floor < 0) section.at("floor").fail("must be non-negative");
    if (spec.floor > peak) {
      section.at("floor").fail(cat("must not exceed the learning rate (", peak, "); got ", spec.floor));
    }
    // The schedule needs warmup < max(steps, 1), also for a run of 0 steps.
    if (steps && spec.warmup >= std::max<int64_t>(steps->steps, 1)) {
      section.at("warmup").fail(cat("must be less than ", steps->keys, " (", steps->steps, "); got ", spec.warmup));
    }
  }
  return spec;
}

std::string read_output_dir(const io::ConfigNode& output, const std::string& fallback) {
  const bool given = output.has("dir");  // before string() writes the default in
  output.string("dir", fallback);
  const std::string dir = output.at("dir").as_output_path();
  if (dir.empty()) output.at("dir").fail("is empty; give the run a folder");
  std::error_code ignored;
  if (std::filesystem::exists(dir, ignored) && !std::filesystem::is_directory(dir, ignored)) {
    const std::string problem = " is a file, not a folder; a run writes a folder of files there";
    if (given) output.at("dir").fail(dir + problem);
    throw Error(cat(output.position(), ": output.dir: the default, ", dir, ",", problem, "; set output.dir"));
  }
  return dir;
}

int64_t read_zero_stage(const io::ConfigNode& training) {
  const int64_t stage = training.integer("zero_stage", 0);
  if (stage != 0 && stage != 1) {
    training.at("zero_stage").fail(cat("must be 0 (every rank keeps the whole optimiser state) or 1 (ZeRO stage 1: "
                                       "each rank keeps the state of its share of the parameters); got ", stage,
                                       ", and ZeRO stages 2 and 3 are not implemented"));
  }
  return stage;
}

int64_t ParallelSpec::ranks(std::string_view name) const {
  const auto named = std::find(names.begin(), names.end(), name);
  return named == names.end() ? 1 : mesh[static_cast<size_t>(named - names.begin())];
}

DeviceSpec read_device(const io::ConfigNode& root) {
  DeviceSpec spec;
  if (auto key = root.find("device")) {
    spec.where = key->where();
    const std::string text = key->as_string();
    try {
      spec.device = parse_device(text);
    } catch (const Error& unknown) {
      key->fail(unknown.what());
    }
    spec.numbered = text.find(':') != std::string::npos;
  }
  return spec;
}

Device place_on_device(const DeviceSpec& spec, const dist::Communicator& world) {
  Device device = spec.device;
  if (device.type == DeviceType::cuda && !spec.numbered) device.index = world.node_rank();
  const std::string reason = device_unavailable_reason(device);
  EDDY_CHECK(reason.empty(), spec.where, device, " cannot be used",
             spec.numbered || world.size() == 1 ? "" : cat(" (rank ", world.rank(), " is rank ", world.node_rank(), " of those on its machine, ",
                                      "each taking the GPU of its number: start at most as many ranks per machine as ",
                                      "it has GPUs)"),
             ": ", reason);
  return device;
}

SolverScope::SolverScope(const DeviceSpec& spec, const dist::Communicator& world)
    : device_(place_on_device(spec, world)), on_device_(device_) {}

ParallelSpec read_parallel(const io::ConfigNode& section, std::initializer_list<std::string_view> axis_names) {
  ParallelSpec parallel;
  parallel.where = section.where();
  const io::ConfigNode mesh = section.at("mesh"), names = section.at("names");
  for (const io::ConfigNode& size : mesh.elements()) {
    parallel.mesh.push_back(size.as_integer());
    if (parallel.mesh.back() < 1) size.fail("must be at least 1");
  }
  std::vector<std::string> choices(axis_names.begin(), axis_names.end());
  for (const io::ConfigNode& name : names.elements()) {
    parallel.names.push_back(name.as_choice(choices));
    if (std::count(parallel.names.begin(), parallel.names.end(), parallel.names.back()) > 1) name.fail("named twice");
  }
  if (parallel.mesh.empty() || parallel.mesh.size() != parallel.names.size()) {
    names.fail(cat("needs one name per mesh axis; the mesh has ", parallel.mesh.size(), " axes"));
  }
  return parallel;
}

void check_job_size(const ParallelSpec& spec, const dist::Communicator& world) {
  EDDY_CHECK(spec.mesh.empty() || numel(spec.mesh) == world.size(), spec.where, "mesh ", spec.mesh, " has ",
             numel(spec.mesh), " ranks, but this job has ", world.size(), "; start it with mpirun -np ",
             numel(spec.mesh));
}

std::shared_ptr<const dist::ProcessMesh> make_mesh(const ParallelSpec& spec, const std::string& default_axis,
                                                   dist::Communicator& world) {
  if (spec.mesh.empty()) return dist::ProcessMesh::create({world.size()}, {default_axis}, world);
  check_job_size(spec, world);
  return dist::ProcessMesh::create(spec.mesh, spec.names, world);
}

std::unique_ptr<optim::Optimizer> make_optimizer(int64_t zero_stage, std::vector<Tensor> parameters,
                                                 const dist::ShardedOptimizer::Factory& make,
                                                 dist::RankGradients gradients, dist::Communicator& comm) {
  if (zero_stage == 0 || comm.size() == 1) return make(std::move(parameters));
  return std::make_unique<dist::ShardedOptimizer>(std::move(parameters), make, gradients, comm);
}

void sum_gradients(optim::Optimizer& optimizer, const std::vector<Tensor>& parameters, dist::Communicator& comm) {
  if (auto* sharded = dynamic_cast<dist::ShardedOptimizer*>(&optimizer)) {
    sharded->reduce_gradients();
  } else {
    dist::sum_gradients(parameters, comm);
  }
}

int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) {
  const auto* sharded = dynamic_cast<const dist::ShardedOptimizer*>(&optimizer);
  int64_t bytes = 0;
  for (const auto& [key, value] : (sharded ? sharded->local() : optimizer).state_dict()) {
    bytes += value.numel() * static_cast<int64_t>(dtype_size(value.dtype()));
  }
  return bytes;
}

}  // namespace eddy::solvers
