// eddy.jit (eddy::compile over a Python function) and eddy.Predictor (exported inference
// artifacts). Both run compiled programs with the GIL released; a jitted function takes the GIL
// back only while its Python body runs, which is on the first call per signature.

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "bindings.h"
#include "eddy/compiler/compile.h"
#include "eddy/compiler/predictor.h"

namespace eddy::python {
namespace {

// The nesting of f's result: tensors (or anything as_tensor takes) at the leaves, tuples
// (namedtuples among them), lists and dicts with str keys around them, as JAX's pytrees. The
// compiled program replays the leaves only; the tree answers later calls in the same form. (It
// holds no Python object, so that it needs no GIL to be copied or destroyed: keys are C++
// strings, and a namedtuple's class is an index into the classes the function keeps.)
struct OutputTree {
  enum class Kind { leaf, tuple, list, dict } kind = Kind::leaf;
  std::vector<OutputTree> children;
  std::vector<std::string> keys;  // a dict's, in its order
  int tuple_class = -1;           // a namedtuple's, in `tuple_classes`; -1 for a plain tuple
};

// A namedtuple class's index in `classes`, added there the first time.
int class_index(const py::handle& tuple_class, py::list& classes) {
  for (size_t i = 0; i < classes.size(); ++i) {
    if (classes[i].ptr() == tuple_class.ptr()) return static_cast<int>(i);
  }
  classes.append(tuple_class);
  return static_cast<int>(classes.size()) - 1;
}

OutputTree flatten(const py::handle& value, std::vector<Tensor>& leaves, py::list& tuple_classes) {
  OutputTree tree;
  if (py::isinstance<py::dict>(value)) {
    tree.kind = OutputTree::Kind::dict;
    for (const auto& [key, item] : value.cast<py::dict>()) {
      EDDY_CHECK(py::isinstance<py::str>(key), "eddy.jit: the function returned a dict with the key ",
                 py::repr(key).cast<std::string>(), "; the keys of a returned dict must be str");
      tree.keys.push_back(key.cast<std::string>());
      tree.children.push_back(flatten(item, leaves, tuple_classes));
    }
  } else if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
    tree.kind = py::isinstance<py::tuple>(value) ? OutputTree::Kind::tuple : OutputTree::Kind::list;
    if (tree.kind == OutputTree::Kind::tuple && py::hasattr(py::type::handle_of(value), "_fields")) {
      tree.tuple_class = class_index(py::type::handle_of(value), tuple_classes);
    }
    for (const py::handle& item : value) tree.children.push_back(flatten(item, leaves, tuple_classes));
  } else {
    EDDY_CHECK(!value.is_none(), "eddy.jit: the function returned None (or a None inside its result); return "
               "the tensors it computes");
    try {
      leaves.push_back(as_tensor(value));
    } catch (const std::exception& e) {
      throw py::type_error(cat("eddy.jit: the function returned ", py::repr(value).cast<std::string>(), " (",
                               py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>(),
                               "), which is not a tensor or a number: ", e.what()));
    }
  }
  return tree;
}

py::object rebuild(const OutputTree& tree, const std::vector<Tensor>& leaves, size_t& next,
                   const py::list& tuple_classes) {
  switch (tree.kind) {
    case OutputTree::Kind::leaf: return py::cast(leaves.at(next++));
    case OutputTree::Kind::dict: {
      py::dict items;
      for (size_t i = 0; i < tree.children.size(); ++i) {
        items[py::str(tree.keys[i])] = rebuild(tree.children[i], leaves, next, tuple_classes);
      }
      return items;
    }
    case OutputTree::Kind::tuple:
    case OutputTree::Kind::list: {
      py::list items;
      for (const OutputTree& child : tree.children) items.append(rebuild(child, leaves, next, tuple_classes));
      if (tree.kind == OutputTree::Kind::list) return items;
      const py::tuple fields(items);
      if (tree.tuple_class < 0) return fields;
      const py::handle tuple_class = tuple_classes[tree.tuple_class];
      try {
        return tuple_class(*fields);
      } catch (py::error_already_set& e) {
        throw py::type_error(cat("eddy.jit: the result's ", py::str(tuple_class.attr("__name__")).cast<std::string>(),
                                 " (a tuple class with _fields, taken for a namedtuple) cannot be made from its fields "
                                 "as Class(*fields): ", e.what()));
      }
    }
  }
  throw Error("eddy.jit: unknown output form");
}

// eddy.jit(f): compile() over f, its result answered in the form f gave it (OutputTree), per
// program.
class JitFunction {
 public:
  explicit JitFunction(py::function function)
      : body_(std::make_shared<Body>(
            Body{.function = std::move(function), .ran = false, .tree = {}, .tuple_classes = py::list()})),
        compiled_(compile(traced_body(body_))) {}

  py::object call(const py::args& args, const py::kwargs& kwargs) {
    if (!kwargs.empty()) {
      std::string names;
      for (const auto& [name, value] : kwargs) {
        if (!names.empty()) names += ", ";
        names += py::str(name).cast<std::string>();
      }
      throw Error(cat("eddy.jit: keyword arguments (", names, ") are not taken; pass the tensors by position"));
    }
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < args.size(); ++i) {
      // A number would become a float64 or int64 tensor (eager eddy keeps a Python number in the
      // other operand's dtype), and a shape, axis or flag a tensor that f cannot use as one.
      EDDY_CHECK(py::isinstance<Tensor>(args[i]) || py::isinstance<py::array>(args[i]), "eddy.jit: argument ", i,
                 " is ", py::repr(args[i]).cast<std::string>().substr(0, 60), ", of type ",
                 py::str(py::type::of(args[i]).attr("__name__")).cast<std::string>(),
                 "; a compiled function takes eddy tensors or NumPy arrays: let f close over other values (a shape, "
                 "an axis, a flag), or pass a number as eddy.tensor(value, dtype)");
      inputs.push_back(as_tensor(args[i]));
    }
    std::vector<Tensor> outputs;
    OutputTree tree;
    {
      // Released before locking: a thread waiting for the lock must not hold the GIL that the
      // thread inside needs to run f.
      GilRelease release;
      std::lock_guard<std::recursive_mutex> lock(mutex_);
      body_->ran = false;
      outputs = compiled_(inputs);
      const compiler::Program* program = compiled_.program_for(inputs);
      if (body_->ran) {
        tree = body_->tree;
        if (program) trees_[program] = tree;  // none inside another trace, which ran f eagerly
      } else {
        tree = trees_.at(program);
      }
    }
    size_t next = 0;
    return rebuild(tree, outputs, next, body_->tuple_classes);
  }

  CompileStats stats() const {
    GilRelease release;  // as in call(): never wait for the lock holding the GIL
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return compiled_.stats();
  }
  const py::object& function() const { return body_->function; }
  std::string name() const {
    return py::str(py::getattr(body_->function, "__name__", py::str("f"))).cast<std::string>();
  }
  // For Python's garbage collector (bind_jit): f is the one Python object held, so that a cycle
  // through it (a jitted lambda stored on the object it closes over) can be found and broken.
  int visit_function(visitproc visit, void* arg) const {
    Py_VISIT(body_->function.ptr());
    return 0;
  }
  void release_function() { body_->function = py::none(); }

 private:
  struct Body {
    py::object function;
    bool ran = false;  // f ran during the current call (traced, or eagerly inside another trace)
    OutputTree tree;   // of f's latest result
    py::list tuple_classes;  // the namedtuple classes of its results (OutputTree::tuple_class)
  };

  // f as the TensorFunction compile() traces; it runs with the GIL released around it, so it
  // takes the GIL itself. A Python exception from f leaves as py::error_already_set, which
  // crosses the C++ frames and is raised again unchanged in the caller.
  static compiler::TensorFunction traced_body(const std::shared_ptr<Body>& body) {
    return [body](const std::vector<Tensor>& inputs) {
      GilAcquire gil;
      py::tuple args(inputs.size());
      for (size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
      const py::object out = call_python(body->function, args);
      std::vector<Tensor> leaves;
      body->tree = flatten(out, leaves, body->tuple_classes);
      body->ran = true;
      return leaves;
    };
  }

  std::shared_ptr<Body> body_;
  CompiledFunction compiled_;
  std::map<const compiler::Program*, OutputTree> trees_;
  mutable std::recursive_mutex mutex_;  // recursive: f may call its own jitted self while traced
};

std::string stats_text(const CompileStats& stats) {
  std::ostringstream text;
  text << "CompileStats(traces=" << stats.traces << ", calls=" << stats.calls << ", graph_nodes="
       << stats.last.graph_nodes << ", fused_kernels=" << stats.last.fused_kernels
       << ", trace_seconds=" << stats.trace_seconds << ")";
  return text.str();
}

void bind_jit(py::module_& m) {
  py::class_<CompileStats>(m, "CompileStats", "What a jitted function has done so far.")
      .def_readonly("traces", &CompileStats::traces, "signatures traced so far")
      .def_readonly("calls", &CompileStats::calls)
      .def_readonly("trace_seconds", &CompileStats::trace_seconds, "the latest trace, lowering and kernel compile")
      .def_property_readonly("graph_nodes", [](const CompileStats& s) { return s.last.graph_nodes; })
      .def_property_readonly("fused_kernels", [](const CompileStats& s) { return s.last.fused_kernels; })
      .def("__repr__", &stats_text);

  // Garbage-collected, as pybind11's docs show for a class holding Python objects: a jitted
  // function stored on the object its function closes over (self.step = eddy.jit(lambda x:
  // self.loss(x))) made a cycle that Python could not see, and each such object was never freed.
  const auto collected = py::custom_type_setup([](PyHeapTypeObject* heap_type) {
    PyTypeObject* type = &heap_type->ht_type;
    type->tp_flags |= Py_TPFLAGS_HAVE_GC;
    type->tp_traverse = [](PyObject* self, visitproc visit, void* arg) -> int {
      Py_VISIT(Py_TYPE(self));
      if (!reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder().holder_constructed()) return 0;
      return py::cast<const JitFunction&>(py::handle(self)).visit_function(visit, arg);
    };
    type->tp_clear = [](PyObject* self) -> int {
      if (reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder().holder_constructed()) {
        py::cast<JitFunction&>(py::handle(self)).release_function();
      }
      return 0;
    };
  });
  py::class_<JitFunction>(m, "JitFunction", collected, "A function compiled by eddy.jit.")
      .def("__call__", &JitFunction::call)
      .def_property_readonly("stats", &JitFunction::stats)
      .def_property_readonly("__wrapped__", &JitFunction::function)
      // As a method the object would be passed as an argument, which is no tensor: the call
      // failed inside f with a missing argument. Said at the attribute instead.
      .def("__get__", [](const py::object& self, const py::object& instance, const py::object&) -> py::object {
            if (instance.is_none()) return self;
            throw Error(cat("eddy.jit: ", self.cast<const JitFunction&>().name(), " is used as a method of ",
                            py::str(py::type::of(instance).attr("__name__")).cast<std::string>(),
                            "; a compiled function takes tensors only: jit a function that closes over the object, "
                            "e.g. eddy.jit(lambda x: obj.method(x))"));
          },
          py::arg("instance"), py::arg("owner") = py::none());

  m.def("jit", [](const py::function& f) { return std::make_unique<JitFunction>(f); }, py::arg("f"),
        "Compiles f (eddy tensors in, a tensor or a tuple/list of tensors out) like the C++ eddy::compile: "
        "the first call with new input shapes, dtypes, requires_grad, grad mode or autocast runs f once on abstract "
        "tensors (shapes and dtypes, no values) while tracing it, then runs the compiled graph; later calls "
        "with that signature run the compiled graph without calling f. f may use eddy.grad "
        "and the other transformations; it may not branch on tensor values, write in place, draw random "
        "numbers or call backward. Its arguments are tensors or NumPy arrays, by position. Usable as a decorator.");
}

// A NumPy input of Predictor.predict as `eddy predict` and the trainers read a dataset: complex
// values are refused (their imaginary parts were dropped), and 1-byte integers are booleans,
// holding 0 and 1 only (a 0/255 mask was read as 255 where training had read it as 1).
Tensor predictor_input(const py::handle& value, DType dtype, const std::string& name) {
  const py::module_ np = py::module_::import("numpy");
  const py::object array = np.attr("asarray")(value);
  const py::object kind = array.attr("dtype").attr("kind");
  EDDY_CHECK(kind.cast<std::string>() != "c", "predict: input '", name, "' is complex (",
             py::str(array.attr("dtype")).cast<std::string>(), "); the artifact takes real values");
  if (array.attr("dtype").attr("itemsize").cast<int>() == 1 && kind.cast<std::string>() != "b") {
    const py::object outside = np.attr("flatnonzero")(
        np.attr("logical_and")(np.attr("not_equal")(array, 0), np.attr("not_equal")(array, 1)));
    if (py::len(outside) > 0) {
      const auto at = outside[py::int_(0)].cast<int64_t>();
      throw Error(cat("predict: input '", name, "' holds ", py::str(array.attr("flat")[py::int_(at)]).cast<std::string>(),
                      " at element ", at, "; a 1-byte integer input is read as bool, as the trainers read such "
                      "datasets, and must hold only 0 and 1"));
    }
  }
  return as_tensor(array, py::cast(dtype));
}

void bind_predictor(py::module_& m) {
  py::class_<Predictor>(m, "Predictor", "An inference artifact written by `eddy export`, run without the solver.")
      .def_static("load", [](const std::filesystem::path& path) {
            GilRelease release;  // lowering may compile kernels (seconds)
            return Predictor::load(path.string());
          },
          py::arg("path"), "Reads the artifact folder (graph.json, weights.safetensors, meta.json).")
      .def("predict", [](const Predictor& self, const py::args& args) {
            const compiler::Graph& graph = self.program().graph();
            std::vector<Tensor> inputs;
            for (size_t i = 0; i < args.size(); ++i) {
              // Arrays and lists take the model's dtype, as NumPy's float64 default would never
              // fit a float32 model; eddy tensors are passed as they are, and checked.
              const bool convert = !py::isinstance<Tensor>(args[i]) && i < graph.inputs.size();
              inputs.push_back(convert ? predictor_input(args[i], graph.value(graph.inputs[i]).dtype,
                                                         self.signature().inputs[i].name)
                                       : as_tensor(args[i]));
            }
            std::vector<Tensor> outputs;
            {
              GilRelease release;
              outputs = self.predict(inputs);
            }
            return py::tuple(py::cast(outputs));
          },
          "predict(*inputs) -> one tensor per output (output_names), each with the inputs' N rows.")
      .def_property_readonly("input_names", [](const Predictor& self) {
            std::vector<std::string> names;
            for (const PredictorInput& input : self.signature().inputs) names.push_back(input.name);
            return names;
          })
      .def_property_readonly("input_columns", [](const Predictor& self) {
            std::vector<std::vector<std::string>> columns;
            for (const PredictorInput& input : self.signature().inputs) columns.push_back(input.columns);
            return columns;
          }, "per input, what its last axis holds (the coordinates of a PINN)")
      .def_property_readonly("output_names", [](const Predictor& self) { return self.signature().outputs; })
      .def_property_readonly("batch_size", &Predictor::batch_size)
      .def_property_readonly("dtype", [](const Predictor& self) {
            const compiler::Graph& graph = self.program().graph();
            return graph.value(graph.inputs.at(0)).dtype;
          });
}

}  // namespace

void bind_compiler(py::module_& m) {
  bind_jit(m);
  bind_predictor(m);
}

}  // namespace eddy::python
