// eddy.dist: process meshes and distributed tensors (auto-parallel), as in C++ (dist/dtensor.h).

#include <pybind11/stl.h>

#include <optional>

#include "bindings.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/dist/dtensor.h"
#include "eddy/dist/sharded_optimizer.h"

namespace eddy::python {
namespace {

// An optimiser made in Python (eddy.optim.AdamW(...)) as the C++ one that ShardedOptimizer owns:
// it keeps the Python object alive, and each step hands it the learning rate ShardedOptimizer set
// on this wrapper.
class PythonMadeOptimizer final : public optim::Optimizer {
 public:
  static std::unique_ptr<optim::Optimizer> from(py::object made) {
    EDDY_CHECK(py::isinstance<optim::Optimizer>(made), "dist.ShardedOptimizer: make must return an eddy.optim "
               "optimiser (AdamW, Adam, SGD), got ", py::str(py::type::of(made).attr("__name__")).cast<std::string>());
    auto* held = made.cast<optim::Optimizer*>();
    return std::unique_ptr<optim::Optimizer>(new PythonMadeOptimizer(std::move(made), held));
  }
  void step() override {
    held_->set_learning_rate(learning_rate());
    held_->step();
  }
  nn::StateDict state_dict() const override { return held_->state_dict(); }
  void load_state_dict(const nn::StateDict& state) override { held_->load_state_dict(state); }
  bool updates_elementwise() const override { return held_->updates_elementwise(); }

 private:
  PythonMadeOptimizer(py::object made, optim::Optimizer* held)
      : Optimizer(held->parameters(), held->learning_rate(), held->name()), made_(std::move(made)), held_(held) {}
  py::object made_;
  optim::Optimizer* held_;
};

// `with eddy.dist.defer_gradient_sums(mesh, "dp"):` around a step's backward passes.
class DeferredSumsScope {
 public:
  DeferredSumsScope(std::shared_ptr<dist::ProcessMesh> mesh, const std::string& axis)
      : mesh_(std::move(mesh)), comm_(mesh_->communicator(mesh_->axis(axis))) {}
  void enter() {
    EDDY_CHECK(!scope_, "dist.defer_gradient_sums: this scope is entered already");
    scope_.emplace(comm_);
  }
  void exit() { scope_.reset(); }

 private:
  std::shared_ptr<dist::ProcessMesh> mesh_;  // keeps comm_ alive
  dist::Communicator& comm_;
  std::optional<dist::DeferGradientSums> scope_;
};

dist::RankGradients rank_gradients(const std::string& name) {
  EDDY_CHECK(name == "to_average" || name == "to_sum" || name == "identical", "dist.ShardedOptimizer: gradients "
             "must be 'to_average' (each rank's own, averaged by the step), 'to_sum' (each rank's part, from "
             "defer_gradient_sums) or 'identical' (summed over ranks already), got '", name, "'");
  if (name == "to_sum") return dist::RankGradients::to_sum;
  return name == "identical" ? dist::RankGradients::identical : dist::RankGradients::to_average;
}

}  // namespace

void bind_dist(py::module_& m) {
  py::module_ dist = m.def_submodule("dist", "Process meshes and distributed tensors (docs/distributed.md).");
  dist.def("rank", [] { return dist::default_communicator().rank(); }, "This process's rank in the job.");
  dist.def("size", [] { return dist::default_communicator().size(); }, "How many processes the job has.");
  dist.def("_launcher_size", &dist::launcher_world_size,
           "How many processes a launcher (mpirun) started, from its environment; 1 without one.");
  dist.def("_abort_job", [](const std::string& message, int status) { dist::abort_job(message, status); },
           py::arg("message"), py::arg("status") = 1,
           "Prints the message and ends every process of the job (MPI_Abort) with the exit status.");

  py::class_<Placement>(dist, "Placement", "How one mesh axis places a tensor: Shard(axis), Replicate() or Partial().")
      .def_property_readonly("is_shard", &Placement::is_shard)
      .def_property_readonly("is_partial", &Placement::is_partial)
      .def_property_readonly("axis", [](const Placement& p) { return p.is_shard() ? py::cast(p.axis) : py::none(); })
      .def("__eq__", [](const Placement& a, const Placement& b) { return a == b; })
      // Against anything else (a string, None), unequal, as Python's own types answer.
      .def("__eq__", [](const Placement&, const py::object&) { return false; })
      .def("__repr__", [](const Placement& p) { return to_string(p); });
  dist.def("Shard", &Placement::shard, py::arg("axis"),
           "Split tensor axis `axis` over the mesh axis, in parts that differ by at most one element.");
  dist.def("Replicate", &Placement::replicate, "The whole tensor on every rank of the mesh axis.");
  dist.def("Partial", [](const std::string& op) {
        EDDY_CHECK(op == "sum" || op == "max", "Partial: op must be 'sum' or 'max', got '", op, "'");
        return op == "sum" ? Placement::partial_sum() : Placement::partial_max();
      }, py::arg("op") = "sum", "Parts on each rank whose sum (or max) over the mesh axis is the value.");

  py::class_<dist::ProcessMesh, std::shared_ptr<dist::ProcessMesh>>(dist, "ProcessMesh",
      "The job's ranks as an array with named axes, e.g. ProcessMesh([2, 2], ['dp', 'mp']) under mpirun -np 4.")
      .def(py::init([](const Shape& shape, std::vector<std::string> names) {
             // pybind11's holder is non-const; the mesh itself is never changed after creation.
             return std::const_pointer_cast<dist::ProcessMesh>(dist::ProcessMesh::create(shape, std::move(names)));
           }), py::arg("shape"), py::arg("names"))
      .def_property_readonly("shape", &dist::ProcessMesh::shape)
      .def_property_readonly("names", &dist::ProcessMesh::names)
      .def("axis", &dist::ProcessMesh::axis, py::arg("name"), "The index of the axis called `name`.")
      .def("coordinate", &dist::ProcessMesh::coordinate, py::arg("axis"), "This rank's coordinate along `axis`.")
      .def("__repr__", &dist::ProcessMesh::describe);

  dist.def("shard_tensor", &dist::shard_tensor, py::arg("tensor"), py::arg("mesh"), py::arg("placements"),
           "`tensor` (the same on every rank) placed over `mesh`: each rank keeps its part. A new leaf.");
  dist.def("from_local", &dist::from_local, py::arg("local"), py::arg("mesh"), py::arg("placements"),
           py::arg("shape") = Shape{},
           "The distributed tensor whose part on this rank is `local`; `shape`: its global shape, where the "
           "ranks' parts differ by a row (each split axis as shard_range splits it), else each split axis of "
           "`local` times its mesh axis's ranks.");
  dist.def("to_local", &dist::to_local, py::arg("tensor"), "This rank's part of a distributed tensor.");
  dist.def("reshard", &dist::reshard, py::arg("tensor"), py::arg("placements"),
           "The tensor placed as `placements` says, through the collectives that takes (differentiable).");
  dist.def("full_tensor", &dist::full_tensor, py::arg("tensor"), "The whole value, on every rank.");
  dist.def("shard_module", [](nn::Module& module, const std::shared_ptr<dist::ProcessMesh>& mesh,
                              const py::dict& plan) {
        dist::ShardingPlan pairs;
        for (const auto& [pattern, placements] : plan) {
          pairs.emplace_back(pattern.cast<std::string>(), placements.cast<std::vector<Placement>>());
        }
        return dist::shard_module(module, mesh, pairs);
      }, py::arg("module"), py::arg("mesh"), py::arg("plan"),
      "Places a module's parameters in place: plan maps name patterns ('*' for any characters other than a "
      "dot, first match wins) to placements. Returns how many parameters were placed.");
  py::class_<dist::ShardedOptimizer, optim::Optimizer>(dist, "ShardedOptimizer",
      "ZeRO stage 1: each rank keeps the optimiser state of its share of the parameters only. make(slices) "
      "builds the optimiser of this rank's slices, e.g. lambda s: eddy.optim.AdamW(s, lr=1e-3); step() "
      "reduce-scatters the gradients, updates the slices and all-gathers the parameters (docs/distributed.md).")
      .def(py::init([](const py::iterable& params, const py::function& make, const std::string& gradients,
                       const std::shared_ptr<dist::ProcessMesh>& mesh, const std::string& axis) {
             const dist::RankGradients kind = rank_gradients(gradients);
             std::vector<Tensor> parameters;
             for (const py::handle& p : params) parameters.push_back(p.cast<Tensor>());
             dist::Communicator& comm =
                 mesh ? mesh->communicator(mesh->axis(axis)) : dist::default_communicator();
             auto made = [make](std::vector<Tensor> slices) {
               return PythonMadeOptimizer::from(call_python(make, py::make_tuple(slices)));
             };
             return new dist::ShardedOptimizer(parameters, made, kind, comm);
           }),
           py::arg("params"), py::arg("make"), py::arg("gradients") = "to_average", py::arg("mesh") = nullptr,
           py::arg("axis") = "dp", py::keep_alive<1, 5>())
      .def_property_readonly("owned", &dist::ShardedOptimizer::owned,
                             "The elements [first, last) of the flattened parameters whose state this rank holds.")
      .def("local_state_dict", [](const dist::ShardedOptimizer& self) {
             py::dict state;
             for (const auto& [key, value] : self.local().state_dict()) state[py::str(key)] = value;
             return state;
           }, "The state this rank holds: its slices' (state_dict() gathers the whole, collectively).");
  py::class_<DeferredSumsScope>(dist, "defer_gradient_sums",
      "with eddy.dist.defer_gradient_sums(mesh, 'dp'): backward passes leave each parameter's gradient as this "
      "rank's part of the sum over the mesh axis (the one that splits the batch); sum them once per step with "
      "sum_gradients, or ShardedOptimizer(..., gradients='to_sum', mesh=mesh) (docs/distributed.md).")
      .def(py::init<std::shared_ptr<dist::ProcessMesh>, const std::string&>(), py::arg("mesh"), py::arg("axis"))
      .def("__enter__", [](DeferredSumsScope& self) { self.enter(); return &self; }, py::return_value_policy::reference)
      .def("__exit__", [](DeferredSumsScope& self, const py::args&) { self.exit(); });
  dist.def("sum_gradients", [](const std::vector<Tensor>& params, const std::shared_ptr<dist::ProcessMesh>& mesh,
                               const std::string& axis) {
        dist::sum_gradients(params, mesh->communicator(mesh->axis(axis)));
      }, py::arg("params"), py::arg("mesh"), py::arg("axis"),
      "Each parameter's .grad() summed over the ranks of the mesh axis, in one message (after defer_gradient_sums).");
  dist.def("placements", &dist::placements_of, py::arg("tensor"), "The placement on each mesh axis.");
  dist.def("is_distributed", &is_distributed, py::arg("tensor"));
}

}  // namespace eddy::python
