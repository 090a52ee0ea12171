// The `eddy` command's work from Python: solve a PINN problem, train a neural operator, generate a
// dataset, train a language model and generate text with it (eddy.lm), each from its YAML file
// with overrides; and HDF5 results read back as tensors.

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <iostream>
#include <memory>

#include "bindings.h"
#include "eddy/io/hdf5.h"
#include "solvers/classical/dataset.h"
#include "solvers/common/file_kind.h"
#include "solvers/common/interrupt.h"
#include "solvers/lm/corpus.h"
#include "solvers/lm/hf.h"
#include "solvers/lm/quantize.h"
#include "solvers/lm/run.h"
#include "solvers/lm/trainer.h"
#include "solvers/operator/trainer.h"
#include "solvers/pinn/solver.h"

namespace eddy::python {
namespace {

// A config value as JSON, which is YAML: strings quoted (an override's "run #2" was cut at the `#`
// as a comment, "a: b" read as a map), dicts and lists in flow form, and what json refuses as the
// Python values it stands for: a path (pathlib.Path, for output.dir) as its text, a NumPy array or
// an eddy tensor as its list (output.grid), NumPy scalars (np.int64(10)) as their numbers.
std::string json_text(const py::handle& value, const py::object& indent = py::none()) {
  const py::cpp_function as_number([](const py::object& item) -> py::object {
    if (PyObject_HasAttrString(item.ptr(), "__fspath__")) return py::module_::import("os").attr("fspath")(item);
    if (py::hasattr(item, "tolist")) return item.attr("tolist")();
    if (py::hasattr(item, "item")) return item.attr("item")();
    throw py::type_error(cat("a config value must be a str, number, bool, None, list or dict, got ",
                             py::str(py::type::of(item)).cast<std::string>()));
  });
  return py::module_::import("json")
      .attr("dumps")(value, py::arg("indent") = indent, py::arg("default") = as_number,
                     py::arg("ensure_ascii") = false)
      .cast<std::string>();
}

std::vector<std::string> overrides_of(const py::object& overrides) {
  std::vector<std::string> result;
  if (overrides.is_none()) return result;
  if (py::isinstance<py::dict>(overrides)) {
    for (const auto& [key, value] : overrides.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key)) {
        throw py::type_error(cat("an override's key must be a str (a key path such as \"training.adam.steps\"), got ",
                                 py::repr(key).cast<std::string>()));
      }
      try {
        result.push_back(key.cast<std::string>() + "=" + json_text(value));
      } catch (py::error_already_set& e) {
        // The value's error named no key.
        if (!e.matches(PyExc_TypeError) && !e.matches(PyExc_ValueError)) throw;
        throw py::type_error(cat("override '", key.cast<std::string>(), "': ", py::str(e.value()).cast<std::string>()));
      }
    }
    return result;
  }
  // One "key.path=value" string is one override (iterating it would give its characters).
  if (py::isinstance<py::str>(overrides)) return {overrides.cast<std::string>()};
  for (const py::handle& item : overrides) result.push_back(item.cast<std::string>());
  return result;
}

// A config from a YAML file path, or from a dict (as JSON, which is YAML; errors then point into
// that JSON text, named "python-dict").
std::unique_ptr<io::Config> read_config(const py::object& problem, const py::object& overrides) {
  if (py::isinstance<py::dict>(problem)) {
    return io::Config::parse(json_text(problem, py::int_(2)), "python-dict", overrides_of(overrides), "override");
  }
  return io::Config::load(py::str(problem).cast<std::string>(), overrides_of(overrides),
                          io::Config::RelativePaths::config_folder, "override");
}

// The config that `reader` (eddy.solve, ...) reads, refused when it is of another kind, naming the
// function that reads it (an operator file given to eddy.solve said that `geometry` was missing).
std::unique_ptr<io::Config> load_config(const py::object& problem, const py::object& overrides,
                                        solvers::FileKind kind, std::string_view reader) {
  std::unique_ptr<io::Config> config = read_config(problem, overrides);
  solvers::require_kind(*config, kind, reader, solvers::Reader::python);
  return config;
}

// Python callables as equations: called with the GIL held (solve() releases it around training).
std::map<std::string, pinn::EquationFunction> equation_functions(const py::object& equations) {
  std::map<std::string, pinn::EquationFunction> functions;
  if (equations.is_none()) return functions;
  for (const auto& [name, function] : equations.cast<py::dict>()) {
    py::function f = py::reinterpret_borrow<py::function>(function);
    functions[name.cast<std::string>()] = [f](const Tensor& points, const Tensor& fields,
                                              const std::map<std::string, Tensor>& parameters) {
      GilAcquire gil;
      return as_tensor(call_python(f, py::make_tuple(points, fields, parameters)));
    };
  }
  return functions;
}

// A solver run's options (pinn::SolveOptions, operator_learning::TrainOptions): resume, eager
// steps, and progress on stderr when asked for.
template <typename Options>
Options run_options(bool resume, bool eager, bool progress) {
  Options options;
  options.resume = resume;
  options.eager = eager;
  options.log = progress ? &std::cerr : nullptr;
  return options;
}

// Runs a solver call, which may take minutes, with the GIL released so other Python threads run.
template <typename Work>
auto without_gil(Work&& work) {
  GilRelease release;
  return work();
}

// A training call: as without_gil, and Ctrl-C (a notebook's interrupt) stops the training at the
// end of its step with the checkpoint and results written, as in the `eddy` command, and the call
// returns its result (finished False, the message saying so); it ran every step before.
template <typename Work>
auto training(Work&& work) {
  const solvers::StopTrainingOnSigint stop_on_sigint;
  try {
    return without_gil(std::forward<Work>(work));
  } catch (const solvers::InterruptedBeforeTraining&) {
    // The signal went on to Python's handler too, whose KeyboardInterrupt is pending: raised here
    // once (a second one, set beside it, interrupted the caller's own `except` block).
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
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

void bind_lm(py::module_& lm) {
  lm.def("train", [](const py::object& problem_source, const py::object& overrides, bool resume, bool progress,
                     bool eager) {
        auto config = load_config(problem_source, overrides, solvers::FileKind::language_model, "eddy.lm.train");
        const lm::LmProblem problem = lm::read_lm_problem(*config);
        const auto options = run_options<lm::TrainOptions>(resume, eager, progress);
        const lm::TrainResult result = training([&] { return lm::train(problem, options); });
        py::dict out;
        out["finished"] = result.finished;
        out["message"] = result.message;
        out["steps"] = result.steps;
        out["train_loss"] = result.train_loss;
        out["validation_loss"] = result.validation_loss;
        out["parameters"] = result.parameters;
        out["output_dir"] = problem.output.dir;
        out["step_seconds"] = result.step_seconds;
        out["tokens_per_step"] = result.tokens_per_step;
        return out;
      },
      py::arg("config"), py::arg("overrides") = py::none(), py::arg("resume") = false, py::arg("progress") = false,
      py::arg("eager") = false,
      "Trains a language model from its YAML path or a dict, as `eddy lm train`. Returns a dict with finished, "
      "message, steps, train_loss, validation_loss, parameters, output_dir, step_seconds (each step's wall "
      "time; the first includes compiling the step) and tokens_per_step; the loss curves are in "
      "output_dir/history.h5 (eddy.read_hdf5).");

  py::class_<lm::TrainedModel>(lm, "TrainedModel",
                               "A run of `eddy lm train` loaded from its folder: eddy.lm.load(run_dir).")
      .def_property_readonly("step", [](const lm::TrainedModel& t) { return t.step; },
                             "the step its checkpoint was written at")
      .def_property_readonly("parameters", [](const lm::TrainedModel& t) { return t.model->parameter_count(); })
      .def_property_readonly("context", [](const lm::TrainedModel& t) { return t.model->context_length(); })
      .def_property_readonly("config", [](const lm::TrainedModel& t) { return t.problem.resolved_config; })
      .def_property_readonly("tokenizer", [](const lm::TrainedModel& t) { return *t.tokenizer; })
      .def_property_readonly("model", [](const lm::TrainedModel& t) { return t.model; },
                             "the eddy.nn.GPT2 or eddy.nn.Llama itself (generate from token ids, forward)")
      .def(
          "quantize",
          [](lm::TrainedModel& trained, int bits, const std::filesystem::path& path, std::optional<int64_t> group) {
            EDDY_CHECK(bits == 4 || !group, "quantize: group is for bits=4; int8 keeps one scale per output row");
            lm::refuse_the_runs_own_files(trained.run_dir, path.string(), false, "quantize: path");
            without_gil([&] { lm::save_quantized_model(trained, {bits, group.value_or(64)}, path.string()); });
          },
          py::arg("bits"), py::arg("path"), py::arg("group") = py::none(),
          "Quantises the weights in place to int8 (bits=8) or int4 (bits=4, `group` columns per scale) and "
          "writes them to `path`, as `eddy lm quantize`.")
      .def(
          "load_quantized",
          [](lm::TrainedModel& trained, const std::filesystem::path& path) {
            lm::load_quantized_model(trained, path.string());
          },
          py::arg("path"), "Replaces the weights by a file that quantize or `eddy lm quantize` wrote.")
      .def(
          "validation_perplexity",
          [](lm::TrainedModel& trained, const std::filesystem::path& run_dir) {
            return without_gil([&] { return lm::validation_perplexity(trained, run_dir.string()); });
          },
          py::arg("run_dir"),
          "exp of the mean cross-entropy over run_dir's validation windows, with the weights the model has now "
          "(float or quantised)")
      .def(
          "generate",
          [](lm::TrainedModel& trained, const std::string& prompt, int64_t max_tokens, double temperature,
             int64_t top_k, double top_p, uint64_t seed, const py::object& on_text) {
            nn::GenerationOptions options;
            options.max_new_tokens = max_tokens;
            options.temperature = temperature;
            options.top_k = top_k;
            options.top_p = top_p;
            options.seed = seed;
            std::function<void(const std::string&)> stream;
            if (!on_text.is_none()) {
              // Pieces may end inside a UTF-8 character, so they go to Python as bytes.
              stream = [&on_text](const std::string& piece) { on_text(py::bytes(piece)); };
            }
            return decoded_text(lm::generate_text(trained, prompt, options, stream));
          },
          py::arg("prompt") = "", py::arg("max_tokens") = 64, py::arg("temperature") = 1.0, py::arg("top_k") = 0,
          py::arg("top_p") = 1.0, py::arg("seed") = 0, py::arg("on_text") = py::none(),
          "Continues `prompt` (empty: a new document) and returns the new text, as `eddy lm generate` (bytes "
          "that end inside a character, as a token may, become U+FFFD); on_text(bytes) is called with each "
          "token's bytes as it is chosen. temperature 0 is greedy.");
  lm.def("draw_batch",
         [](const std::filesystem::path& token_file, int64_t batch, int64_t context, uint64_t seed, uint64_t stream) {
           const lm::Batch drawn = lm::draw_batch(lm::TokenFile(token_file.string()), batch, context, seed, stream);
           return py::make_tuple(drawn.tokens, drawn.targets);
         },
         py::arg("token_file"), py::arg("batch"), py::arg("context"), py::arg("seed"), py::arg("stream"),
         "The windows `eddy lm train` trains on: (tokens, targets), int64 [batch, context], from a run's "
         "data/train.tokens; micro-batch m of step s is stream s * accumulation + m.");
  lm.def("export",
         [](const std::filesystem::path& run_dir, const std::filesystem::path& output) {
           lm::export_hf_folder(run_dir.string(), output.string(), "export: output");
         },
         py::arg("run_dir"), py::arg("output"),
         "Writes a run as a Hugging Face folder (config.json, model.safetensors, tokenizer.json, ...), as "
         "`eddy lm export RUN_DIR --format hf --output OUTPUT`.");
  lm.def("load", [](const std::filesystem::path& run_dir) { return lm::load_trained_model(run_dir.string()); },
         py::arg("run_dir"),
         "Loads a run folder of `eddy lm train`: its config, tokenizer and checkpoint.");
}

}  // namespace

void bind_solvers(py::module_& m) {
  m.def("solve", [](const py::object& problem_source, const py::object& overrides, bool resume, bool progress,
                    const py::object& equations, bool eager) {
        auto config = load_config(problem_source, overrides, solvers::FileKind::pinn, "eddy.solve");
        const pinn::Problem problem = pinn::read_problem(*config, equation_functions(equations));
        const auto options = run_options<pinn::SolveOptions>(resume, eager, progress);
        const pinn::SolveResult result = training([&] { return pinn::solve(problem, options); });
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
      py::arg("problem"), py::arg("overrides") = py::none(), py::arg("resume") = false, py::arg("progress") = false,
      py::arg("equations") = py::none(), py::arg("eager") = false,
      "Solves a PINN problem, as `eddy solve`: `problem` is a YAML path or a dict of the same keys; "
      "overrides is a dict {key.path: value}; equations maps equation names used by interior or initial "
      "conditions to Python functions f(x, u, parameters) -> residual, where x [N, coordinates] requires "
      "grad and u [N, fields] is the model there. The training step is compiled, so such a function runs "
      "when the step is traced, not at every step; eager=True runs it as written (`eddy solve --eager`). "
      "Returns a dict with finished, message, steps, loss, metrics (per field), learned parameters and "
      "output_dir.");
  m.def("evaluate_run",
        [](const std::filesystem::path& run_dir) { return metrics_dict(pinn::evaluate_run(run_dir.string())); },
        py::arg("run_dir"),
        "The validation metrics of a finished `eddy solve` run folder, as `eddy eval`: {field: {relative_l2, "
        "max_error}}.");
  m.def("train", [](const py::object& problem_source, const py::object& overrides, bool resume, bool progress,
                    bool eager) {
        auto config = load_config(problem_source, overrides, solvers::FileKind::operator_training, "eddy.train");
        const operator_learning::OperatorProblem problem = operator_learning::read_operator_problem(*config);
        const auto options = run_options<operator_learning::TrainOptions>(resume, eager, progress);
        const operator_learning::TrainResult result =
            training([&] { return operator_learning::train(problem, options); });
        py::dict out;
        out["finished"] = result.finished;
        out["message"] = result.message;
        out["epochs"] = result.epochs;
        out["train_loss"] = result.train_loss;
        out["test_relative_l2"] = result.test_relative_l2;
        out["output_dir"] = problem.output.dir;
        return out;
      },
      py::arg("problem"), py::arg("overrides") = py::none(), py::arg("resume") = false, py::arg("progress") = false,
      py::arg("eager") = false,
      "Trains a neural operator from its YAML path or a dict, as `eddy train`; eager=True runs the batch step "
      "and evaluation uncompiled (`eddy train --eager`).");
  m.def("generate", [](const py::object& problem_source, const py::object& overrides, bool progress, bool overwrite) {
        auto config = load_config(problem_source, overrides, solvers::FileKind::dataset, "eddy.generate");
        classical::DatasetSpec spec = classical::read_dataset_spec(*config);
        spec.overwrite = overwrite;
        without_gil([&] { classical::generate_dataset(spec, progress ? &std::cerr : nullptr); });
        return spec.output_path;
      },
      py::arg("problem"), py::arg("overrides") = py::none(), py::arg("progress") = false, py::arg("overwrite") = false,
      "Writes a dataset from a classical solver, as `eddy generate`; returns the HDF5 path. overwrite=True "
      "replaces an existing file that eddy generate did not write (`eddy generate --overwrite`).");
  py::module_ lm = m.def_submodule("lm", "Language models: train from YAML, load a run, generate text");
  bind_lm(lm);
  m.def("read_hdf5",
        [](const std::filesystem::path& path, const std::string& dataset) -> py::object {
          if (io::is_hdf5_string(path.string(), dataset)) return py::str(io::read_hdf5_string(path.string(), dataset));
          return py::cast(io::read_hdf5(path.string(), dataset));
        },
        py::arg("path"), py::arg("dataset"),
        "A dataset of an HDF5 file (solution.h5, history.h5, a generated dataset) as a tensor, e.g. "
        "read_hdf5(run + '/solution.h5', 'history/loss'); a string dataset (the run's 'config') as a str.");
  m.def("list_hdf5", [](const std::filesystem::path& path) { return io::list_hdf5_datasets(path.string()); },
        py::arg("path"), "The paths of every dataset in an HDF5 file.");
}

}  // namespace eddy::python
