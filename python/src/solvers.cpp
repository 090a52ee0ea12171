// The `eddy` command's work from Python: solve a PINN problem, train a neural operator, generate a
// dataset, each from its YAML file with overrides; and HDF5 results read back as tensors.

#include <pybind11/stl.h>

#include <iostream>

#include "bindings.h"
#include "eddy/io/hdf5.h"
#include "solvers/classical/dataset.h"
#include "solvers/operator/trainer.h"
#include "solvers/pinn/solver.h"

namespace eddy::python {
namespace {

// {"training.adam.steps": 500, "model.modes": [8, 8]} -> "training.adam.steps=500", ... with the
// values in YAML syntax (flow sequences for lists, lower-case booleans).
std::string yaml_value(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::string text = "[";
    for (const py::handle& item : value) text += (text.size() > 1 ? ", " : "") + yaml_value(item);
    return text + "]";
  }
  return py::str(value);
}

std::vector<std::string> overrides_of(const py::object& overrides) {
  std::vector<std::string> result;
  if (overrides.is_none()) return result;
  if (py::isinstance<py::dict>(overrides)) {
    for (const auto& [key, value] : overrides.cast<py::dict>()) {
      result.push_back(key.cast<std::string>() + "=" + yaml_value(value));
    }
    return result;
  }
  for (const py::handle& item : overrides) result.push_back(item.cast<std::string>());
  return result;
}

py::dict metrics_dict(const pinn::Metrics& metrics) {
  py::dict result;
  for (const auto& [field, l2] : metrics.relative_l2) {
    py::dict entry;
    entry["relative_l2"] = l2;
    entry["max_error"] = metrics.max_error.at(field);
    result[py::str(field)] = entry;
  }
  return result;
}

}  // namespace

void bind_solvers(py::module_& m) {
  m.def("solve", [](const std::string& path, const py::object& overrides, bool resume, bool progress) {
        auto config = io::Config::load(path, overrides_of(overrides));
        const pinn::Problem problem = pinn::read_problem(*config);
        pinn::SolveOptions options;
        options.resume = resume;
        options.log = progress ? &std::cerr : nullptr;
        pinn::SolveResult result;
        {
          py::gil_scoped_release release;
          result = pinn::solve(problem, options);
        }
        py::dict out;
        out["finished"] = result.finished;
        out["message"] = result.message;
        out["steps"] = result.steps;
        out["loss"] = result.loss;
        out["metrics"] = result.metrics ? py::object(metrics_dict(*result.metrics)) : py::object(py::none());
        out["learned"] = result.learned;
        out["output_dir"] = problem.output.dir;
        return out;
      },
      py::arg("path"), py::arg("overrides") = py::none(), py::arg("resume") = false, py::arg("progress") = false,
      "Solves a PINN problem file, as `eddy solve`; overrides is a dict {key.path: value}. Returns a dict "
      "with finished, message, steps, loss, metrics (per field), learned parameters and output_dir.");
  m.def("evaluate_run", [](const std::string& run_dir) { return metrics_dict(pinn::evaluate_run(run_dir)); },
        py::arg("run_dir"));
  m.def("train", [](const std::string& path, const py::object& overrides, bool resume, bool progress) {
        auto config = io::Config::load(path, overrides_of(overrides));
        const operator_learning::OperatorProblem problem = operator_learning::read_operator_problem(*config);
        operator_learning::TrainOptions options;
        options.resume = resume;
        options.log = progress ? &std::cerr : nullptr;
        operator_learning::TrainResult result;
        {
          py::gil_scoped_release release;
          result = operator_learning::train(problem, options);
        }
        py::dict out;
        out["finished"] = result.finished;
        out["message"] = result.message;
        out["epochs"] = result.epochs;
        out["train_loss"] = result.train_loss;
        out["test_relative_l2"] = result.test_relative_l2;
        out["output_dir"] = problem.output.dir;
        return out;
      },
      py::arg("path"), py::arg("overrides") = py::none(), py::arg("resume") = false, py::arg("progress") = false,
      "Trains a neural operator from its YAML, as `eddy train`.");
  m.def("generate", [](const std::string& path, const py::object& overrides, bool progress) {
        auto config = io::Config::load(path, overrides_of(overrides));
        const classical::DatasetSpec spec = classical::read_dataset_spec(*config);
        {
          py::gil_scoped_release release;
          classical::generate_dataset(spec, progress ? &std::cerr : nullptr);
        }
        return spec.output_path;
      },
      py::arg("path"), py::arg("overrides") = py::none(), py::arg("progress") = false,
      "Writes a dataset from a classical solver, as `eddy generate`; returns the HDF5 path.");
  m.def("read_hdf5", &io::read_hdf5, py::arg("path"), py::arg("dataset"));
  m.def("list_hdf5", &io::list_hdf5_datasets, py::arg("path"));
}

}  // namespace eddy::python
