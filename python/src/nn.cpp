// eddy.nn (the C++ modules and models), eddy.optim (the optimisers) and safetensors files.

#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <set>

#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.h"
#include "eddy/io/safetensors.h"
#include "eddy/nn/neural_operators.h"
#include "eddy/nn/pinn_models.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/clip.h"
#include "eddy/optim/grad_scaler.h"
#include "eddy/optim/lbfgs.h"
#include "eddy/optim/line_search.h"
#include "eddy/optim/schedule.h"
#include "eddy/optim/sgd.h"
#include "eddy/optim/soap.h"

namespace eddy::python {
namespace {

using ModulePtr = std::shared_ptr<nn::Module>;

// {name: tensor} from a module's or optimiser's (name, tensor) pairs or state dict.
template <typename Entries>
py::dict as_dict(const Entries& entries) {
  py::dict result;
  for (const auto& [name, t] : entries) result[py::str(name)] = t;
  return result;
}

// [(name, tensor), ...] in order, as torch.nn.Module's named_parameters() yields them: a dict
// here made `for name, p in model.named_parameters()` unpack each name's characters (silently,
// for a two-character name).
template <typename Entries>
py::list as_pairs(const Entries& entries) {
  py::list result;
  for (const auto& [name, t] : entries) result.append(py::make_tuple(py::str(name), t));
  return result;
}

nn::StateDict state_of(const py::dict& values) {
  nn::StateDict state;
  for (const auto& [key, value] : values) state[key.cast<std::string>()] = as_tensor(value);
  return state;
}

std::vector<Tensor> parameters_of(const py::iterable& parameters, const char* who) {
  // A tensor iterates over its rows, which became the parameters: views without gradients, so
  // training under no_grad silently did nothing (torch refuses a tensor too).
  if (py::isinstance<Tensor>(parameters)) {
    throw py::type_error(cat(who, ": params must be an iterable of tensors, got one tensor; pass [tensor]"));
  }
  std::vector<Tensor> tensors;
  for (const py::handle& p : parameters) {
    // PyTorch's parameter groups ({'params': [...], 'weight_decay': ...}) got pybind's cast error.
    EDDY_CHECK(!py::isinstance<py::dict>(p), who, ": params must be tensors; parameter groups (dicts) are not "
               "supported: make one optimizer per group, each with its own settings");
    EDDY_CHECK(py::isinstance<Tensor>(p), who, ": params must be tensors; entry ", tensors.size(), " is ",
               py::repr(p).cast<std::string>().substr(0, 60));
    tensors.push_back(p.cast<Tensor>());
  }
  return tensors;
}

// A model written in Python: `class Net(eddy.nn.Module)` with __init__ and forward. The modules,
// parameters (leaf tensors that require grad) and buffers it is given as attributes join the C++
// registries, so parameters(), state_dict(), train() and the C++ containers (Sequential) see them
// as they see a C++ model's. A C++ caller of forward (Sequential) reaches the Python method.
class PythonModule : public nn::Module, public py::trampoline_self_life_support {
 public:
  Tensor forward(const Tensor& input) override {
    GilAcquire gil;
    // Named only in the errors: this runs at every call from a C++ container.
    const auto own_name = [this] {
      return class_name(py::cast(static_cast<nn::Module*>(this), py::return_value_policy::reference));
    };
    const py::function method = py::get_override(static_cast<const nn::Module*>(this), "forward");
    EDDY_CHECK(method, own_name(), " has no forward(): an eddy.nn.Module subclass defines forward(self, x)");
    const py::object result = call_python(method, py::make_tuple(input));
    EDDY_CHECK(py::isinstance<Tensor>(result), own_name(), ".forward returned ", class_name(result),
               " where a C++ caller (Sequential) takes one tensor");
    return result.cast<Tensor>();
  }

  // A Python override of train() (a child kept in eval mode) is called from its parent's train(),
  // which recurses in C++; its super().train(mode) comes back here and finds no override.
  void train(bool enabled) override {
    {
      GilAcquire gil;
      if (const py::function method = py::get_override(static_cast<const nn::Module*>(this), "train")) {
        call_python(method, py::make_tuple(enabled));
        return;
      }
    }
    nn::Module::train(enabled);
  }

  const Tensor* tensor(const std::string& name) const {
    const auto found = slot_of_.find(name);
    return found == slot_of_.end() ? nullptr : found->second.tensor;
  }
  bool holds_buffer(const std::string& name) const {
    const auto found = slot_of_.find(name);
    return found != slot_of_.end() && found->second.buffer;
  }
  bool holds_child(const std::string& name) const { return child_names_.count(name) != 0; }

  // `value` under `name` as a parameter or a buffer. A parameter must be a leaf that requires
  // grad (eddy.nn.Parameter), as torch.nn.Module asks: anything else would leave the optimiser
  // holding a tensor the model no longer uses.
  void set_tensor(const std::string& name, const Tensor& value, bool buffer) {
    check_name(name);
    EDDY_CHECK(!holds_child(name), "eddy.nn.Module: \"", name, "\" is a submodule; it cannot become a ",
               kind(buffer));
    EDDY_CHECK(buffer || (value.requires_grad() && value.is_leaf()), "eddy.nn.Module: parameter \"", name,
               "\" takes a leaf tensor that requires grad (eddy.nn.Parameter(t)); to change its values, write in "
               "place under eddy.no_grad()");
    const auto found = slot_of_.find(name);
    if (found != slot_of_.end()) {
      EDDY_CHECK(found->second.buffer == buffer, "eddy.nn.Module: \"", name, "\" is a registered ",
                 kind(found->second.buffer), "; it cannot become a ", kind(buffer));
      *found->second.tensor = value;
      return;
    }
    Tensor& slot = slots_.emplace_back(value);
    slot_of_.emplace(name, Slot{&slot, buffer});
    if (buffer) {
      register_buffer(name, slot);
    } else {
      register_parameter(name, slot);
    }
  }
  void set_child(const std::string& name, std::shared_ptr<nn::Module> child) {
    check_name(name);
    EDDY_CHECK(tensor(name) == nullptr, "eddy.nn.Module: \"", name, "\" is a registered ", kind(holds_buffer(name)),
               "; it cannot become a submodule");
    // A model that contains itself has no finite parameter list: every walk of it recursed until
    // the process crashed, and the cycle, held in C++, was never freed.
    EDDY_CHECK(!child->contains(*this), "eddy.nn.Module: \"", name, "\" would make the model contain itself (the "
               "module assigned is this one or holds it); keep such a reference outside the model, or as a "
               "weakref.ref");
    child_names_.insert(name);
    set_module(name, std::move(child));
  }
  // Unregisters `name`: a parameter, buffer or submodule removed, as `del` does in torch.nn.Module.
  void remove(const std::string& name) {
    forget(name);
    slot_of_.erase(name);  // its slot stays in slots_, unused: the others point into the deque
    child_names_.erase(name);
  }

  static std::string class_name(const py::handle& self) { return py::type::of(self).attr("__name__").cast<std::string>(); }

 private:
  static const char* kind(bool buffer) { return buffer ? "buffer" : "parameter"; }
  // Registered names nest with dots in state_dict() ("block.weight"): one holding a dot could
  // collide with a submodule's key.
  static void check_name(const std::string& name) {
    EDDY_CHECK(!name.empty() && name.find('.') == std::string::npos, "eddy.nn.Module: \"", name,
               "\" cannot name a parameter, buffer or submodule: a name is not empty and holds no '.'");
  }

  struct Slot {
    Tensor* tensor;
    bool buffer;
  };
  std::deque<Tensor> slots_;  // the registries point into these, so they must not move
  std::map<std::string, Slot> slot_of_;
  std::set<std::string> child_names_;
};

// The Python subclass instance behind `self`, or nullptr for the built-in C++ modules.
PythonModule* python_module(const py::handle& self) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self.ptr());
  if (!instance->get_value_and_holder().holder_constructed()) {
    throw py::type_error(cat(PythonModule::class_name(self),
                             ": eddy.nn.Module.__init__() was not called; call super().__init__() first in __init__"));
  }
  return dynamic_cast<PythonModule*>(&self.cast<nn::Module&>());
}

// A registered tensor is read through __getattr__ (so that to() and a replaced value show), which
// Python asks only when the instance dictionary has no entry of that name.
void forget_plain_attribute(const py::object& self, const std::string& name) {
  py::dict attributes = self.attr("__dict__");
  if (attributes.contains(name)) PyDict_DelItemString(attributes.ptr(), name.c_str());
}

// A traced value held by the model would outlive the trace without values: state_dict(), an
// eager call and the optimiser all failed on it afterwards, far from the assignment.
void refuse_traced_value(const std::string& name, const Tensor& value) {
  EDDY_CHECK(!value.is_abstract(), "eddy.nn.Module: \"", name, "\" assigned a value traced inside eddy.jit (shape ",
             value.shape(), ", no values); a compiled function cannot keep state in the model: return the value ",
             "and assign it outside");
}

void set_attribute(const py::object& self, const std::string& name, const py::object& value) {
  PythonModule* module = python_module(self);
  // A built-in layer (Linear, GPT2) keeps its own tensors in C++: a parameter or submodule given
  // to it would be a plain attribute, left out of parameters(), state_dict() and to().
  const bool registrable = py::isinstance<nn::Module>(value) ||
                           (py::isinstance<Tensor>(value) && value.cast<Tensor>().requires_grad() &&
                            value.cast<Tensor>().is_leaf());
  EDDY_CHECK(module != nullptr || !registrable, PythonModule::class_name(self), ": cannot take \"", name,
             "\", a ", py::isinstance<nn::Module>(value) ? "module" : "parameter", ": a built-in layer's parameters "
             "are its own; hold both in an eddy.nn.Module subclass (or a bare eddy.nn.Module())");
  if (module != nullptr) {
    if (py::isinstance<nn::Module>(value)) {
      module->set_child(name, value.cast<ModulePtr>());
    } else if (py::isinstance<Tensor>(value)) {
      const Tensor tensor = value.cast<Tensor>();
      refuse_traced_value(name, tensor);
      // Other tensors are plain attributes, as in torch.nn.Module.
      const bool parameter = tensor.requires_grad() && tensor.is_leaf();
      EDDY_CHECK(!(parameter && module->holds_buffer(name)), "eddy.nn.Module: \"", name, "\" is a registered buffer; "
                 "del it first to make it a parameter");
      if (module->tensor(name) != nullptr || parameter) {
        module->set_tensor(name, tensor, module->holds_buffer(name));
        forget_plain_attribute(self, name);
        return;
      }
    } else if (value.is_none()) {
      module->remove(name);  // as torch.nn.Module takes None for a parameter or a submodule
    } else {
      EDDY_CHECK(module->tensor(name) == nullptr && !module->holds_child(name), "eddy.nn.Module: \"", name,
                 "\" is a registered parameter, buffer or submodule; assign it a ",
                 module->holds_child(name) ? "module" : "tensor", " or None, not ", PythonModule::class_name(value));
    }
  }
  if (PyObject_GenericSetAttr(self.ptr(), py::str(name).ptr(), value.ptr()) != 0) throw py::error_already_set();
}

void delete_attribute(const py::object& self, const std::string& name) {
  PythonModule* module = python_module(self);
  const bool registered = module != nullptr && (module->tensor(name) != nullptr || module->holds_child(name));
  if (registered) module->remove(name);
  py::dict attributes = self.attr("__dict__");
  // A null value deletes, as object.__delattr__ does (an AttributeError for a name never set).
  if ((!registered || attributes.contains(name)) && PyObject_GenericSetAttr(self.ptr(), py::str(name).ptr(), nullptr) != 0) {
    throw py::error_already_set();
  }
}

void bind_modules(py::module_& m) {
  // dynamic_attr: a bare eddy.nn.Module() holds attributes as a subclass's instance does (a
  // container, as torch users build them), where it registered a value and then failed to keep it.
  py::class_<nn::Module, PythonModule, py::smart_holder>(
      m, "Module", py::dynamic_attr(),
      "The base of every model. Subclass it in Python as torch.nn.Module: call super().__init__(), give the "
      "submodules, parameters (eddy.nn.Parameter) and buffers (register_buffer) as attributes, define forward.")
      .def(py::init_alias<>())
      .def("__call__", [](const py::object& self, const py::args& args, const py::kwargs& kwargs) {
        const py::object forward = self.attr("forward");
        return call_python(forward, args, kwargs);
      })
      .def("forward", [](nn::Module& self, const py::object& x) { return self.forward(as_tensor(x)); })
      .def("__setattr__", &set_attribute)
      .def("__delattr__", &delete_attribute)
      .def("__getattr__", [](const py::object& self, const std::string& name) -> py::object {
        const PythonModule* module = python_module(self);
        if (module != nullptr && module->tensor(name) != nullptr) return py::cast(*module->tensor(name));
        throw py::attribute_error(cat("'", PythonModule::class_name(self),
                                      "' object has no attribute '", name, "'"));
      })
      .def("register_buffer", [](const py::object& self, const std::string& name, const py::object& value) {
             PythonModule* module = python_module(self);
             EDDY_CHECK(module != nullptr, "register_buffer: only a Python subclass of eddy.nn.Module takes new buffers");
             const Tensor buffer = as_tensor(value);
             refuse_traced_value(name, buffer);
             module->set_tensor(name, buffer, /*buffer=*/true);
             forget_plain_attribute(self, name);
           },
           py::arg("name"), py::arg("tensor"), "A tensor saved in state_dict() and moved with the model, not trained.")
      .def("parameters", &nn::Module::parameters)
      .def("named_parameters", [](const nn::Module& self) { return as_pairs(self.named_parameters()); },
           "[(name, parameter), ...] in order; dict(...) of it looks one up by name.")
      .def("named_buffers", [](const nn::Module& self) { return as_pairs(self.named_buffers()); },
           "[(name, buffer), ...] in order.")
      .def("parameter_count", &nn::Module::parameter_count)
      .def("zero_grad", [](const nn::Module& self) {
             for (Tensor parameter : self.parameters()) parameter.zero_grad();
           },
           "Clears every parameter's gradient, as torch.nn.Module.zero_grad (set_to_none).")
      // Returns the module, as torch.nn.Module.to does. Optimisers made before hold the old
      // tensors: make them after.
      .def("to", [](const py::object& self, const std::string& device) {
             self.cast<nn::Module&>().to(parse_device(device));
             return self;
           },
           py::arg("device"), "Moves every parameter and buffer to 'cpu' or 'cuda[:N]'.")
      .def("state_dict", [](const nn::Module& self) { return as_dict(self.state_dict()); })
      .def("load_state_dict", [](nn::Module& self, const py::dict& state) { self.load_state_dict(state_of(state)); },
           py::arg("state"))
      // Each returns the module, as torch.nn.Module's do, so `model = eddy.nn.GPT2(...).eval()` keeps it.
      .def("train", [](const py::object& self, bool enabled) {
             self.cast<nn::Module&>().train(enabled);
             return self;
           },
           py::arg("mode") = true)
      .def("eval", [](const py::object& self) {
        self.cast<nn::Module&>().eval();
        return self;
      })
      .def_property_readonly("training", &nn::Module::is_training, "Whether dropout is on (train()) or off (eval()).");

  py::class_<nn::Linear, nn::Module, py::smart_holder>(m, "Linear", py::is_final(), "x @ W + b, W of shape [in, out].")
      .def(py::init([](int64_t in, int64_t out, bool bias, const py::object& dtype, const py::object& seed) {
             Generator generator(model_seed(seed));
             return std::make_shared<nn::Linear>(in, out, generator, model_dtype(dtype), bias);
           }),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true, py::arg("dtype") = py::none(),
           py::arg("seed") = py::none())
      .def_readonly("weight", &nn::Linear::weight)
      .def_property_readonly("bias", [](const nn::Linear& l) -> py::object {
        return l.bias.defined() ? py::cast(l.bias) : py::none();
      });
  py::class_<nn::Activation, nn::Module, py::smart_holder>(m, "Activation", py::is_final())
      .def(py::init([](const std::string& name) { return std::make_shared<nn::Activation>(nn::parse_activation(name)); }),
           py::arg("name"));
  py::class_<nn::Sequential, nn::Module, py::smart_holder>(m, "Sequential", py::is_final())
      // Sequential(a, b) as torch.nn.Sequential, or Sequential([a, b]); Sequential(inner) nests
      // inner, which is a Python sequence too since it can be indexed.
      .def(py::init([](const py::args& args) {
             const bool one_list = args.size() == 1 && (py::isinstance<py::list>(args[0]) ||
                                                        py::isinstance<py::tuple>(args[0]));
             return std::make_shared<nn::Sequential>(
                 (one_list ? py::object(args[0]) : py::object(args)).cast<std::vector<ModulePtr>>());
           }))
      .def("__len__", &nn::Sequential::size)
      // Indexing, iterating and append as torch.nn.Sequential's.
      .def("__getitem__", [](const nn::Sequential& s, int64_t index) {
        const int64_t count = static_cast<int64_t>(s.size());
        if (index < -count || index >= count) {
          throw py::index_error(cat("Sequential: index ", index, " is out of range for ", count, " layers"));
        }
        return s.at(index);
      })
      .def("__iter__", [](const nn::Sequential& s) {
        py::list layers;
        for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) layers.append(py::cast(s.at(i)));
        return py::iter(layers);
      })
      .def("append", [](nn::Sequential& s, ModulePtr layer) { s.push_back(std::move(layer)); }, py::arg("module"));
  py::class_<nn::Embedding, nn::Module, py::smart_holder>(m, "Embedding", py::is_final(), "Rows of a [count, dim] table, N(0, 1) "
                                                         "initialised, looked up by an integer tensor of any shape.")
      .def(py::init([](int64_t count, int64_t dim, const py::object& dtype, const py::object& seed) {
             Generator generator(model_seed(seed));
             return std::make_shared<nn::Embedding>(count, dim, generator, model_dtype(dtype));
           }),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("dtype") = py::none(), py::arg("seed") = py::none())
      .def_readonly("weight", &nn::Embedding::weight);
  py::class_<nn::LayerNorm, nn::Module, py::smart_holder>(m, "LayerNorm", py::is_final(), "Normalises over the last axis, as "
                                                         "torch.nn.LayerNorm (biased variance).")
      .def(py::init([](int64_t dim, double eps, bool bias, const py::object& dtype) {
             return std::make_shared<nn::LayerNorm>(dim, eps, model_dtype(dtype), bias);
           }),
           py::arg("dim"), py::arg("eps") = 1e-5, py::arg("bias") = true, py::arg("dtype") = py::none())
      .def_readonly("weight", &nn::LayerNorm::weight)
      .def_property_readonly("bias", [](const nn::LayerNorm& l) -> py::object {
        return l.bias.defined() ? py::cast(l.bias) : py::none();
      });
  py::class_<nn::Dropout, nn::Module, py::smart_holder>(m, "Dropout", py::is_final(), "Zeroes each element with probability p in "
                                                       "training mode and scales the rest by 1 / (1 - p); the "
                                                       "identity after eval(). Eager only in training mode.")
      .def(py::init([](double p, const py::object& seed) { return std::make_shared<nn::Dropout>(p, model_seed(seed)); }),
           py::arg("p") = 0.5, py::arg("seed") = py::none())
      .def_property_readonly("p", &nn::Dropout::p);
  m.def("Parameter", [](const py::object& data) { return as_tensor(data).detach().requires_grad_(); }, py::arg("data"),
        "A trainable leaf sharing data's memory: as an attribute of an eddy.nn.Module subclass, a parameter.");
  // One tensor is one parameter, as torch's clip_grad_norm_ takes it: iterated, its rows (views
  // without gradients) gave a norm of 0 and clipped nothing.
  m.def("clip_grad_norm",
        [](const py::object& parameters, double max_norm) {
          // A 0-d tensor (a scalar coefficient) too, which is not iterable.
          if (py::isinstance<Tensor>(parameters)) return optim::clip_grad_norm({parameters.cast<Tensor>()}, max_norm);
          return optim::clip_grad_norm(parameters_of(py::reinterpret_borrow<py::iterable>(parameters), "clip_grad_norm"),
                                       max_norm);
        },
        py::arg("parameters"), py::arg("max_norm"),
        "Scales the gradients so that their joint 2-norm is at most max_norm, as torch.nn.utils.clip_grad_norm_; "
        "returns the norm before clipping (gradients left as they are when it is not finite).");

  m.def("pinn_model", [](int64_t inputs, int64_t outputs, int64_t width, int64_t depth, const std::string& activation,
                         const std::string& architecture, int64_t fourier_features, double fourier_scale,
                         const py::object& dtype, const py::object& seed) {
        nn::PinnModelOptions o;
        o.inputs = inputs;
        o.outputs = outputs;
        o.width = width;
        o.depth = depth;
        o.activation = nn::parse_activation(activation);
        o.architecture = nn::parse_architecture(architecture);
        o.fourier_features = fourier_features;
        o.fourier_scale = fourier_scale;
        o.dtype = model_dtype(dtype);
        o.seed = model_seed(seed);
        return nn::make_pinn_model(o);
      },
      py::arg("inputs"), py::arg("outputs"), py::arg("width") = 50, py::arg("depth") = 4,
      py::arg("activation") = "tanh", py::arg("architecture") = "mlp", py::arg("fourier_features") = 0,
      py::arg("fourier_scale") = 1.0, py::arg("dtype") = py::none(), py::arg("seed") = py::none(),
      "The PINN model family ([N, inputs] -> [N, outputs]): mlp, modified_mlp, resnet or pirate_net "
      "(which needs fourier_features > 0).");

  py::class_<nn::Fno, nn::Module, py::smart_holder>(m, "FNO", py::is_final(), "Fourier neural operator, channels first.")
      .def(py::init([](int64_t in_channels, int64_t out_channels, const std::vector<int64_t>& modes, int64_t width,
                       int64_t layers, int64_t projection_width, const std::string& activation, bool grid_coordinates,
                       int64_t padding, const std::string& factorization, double rank, const py::object& dtype,
                       const py::object& seed, const std::vector<int64_t>& padding_grid) {
             nn::FnoOptions o;
             o.in_channels = in_channels;
             o.out_channels = out_channels;
             o.modes = modes;
             o.width = width;
             o.layers = layers;
             o.projection_width = projection_width;
             o.activation = nn::parse_activation(activation);
             o.grid_coordinates = grid_coordinates;
             o.padding = padding;
             o.padding_grid = padding_grid;
             o.factorization = nn::parse_factorization(factorization);
             o.rank = rank;
             o.dtype = model_dtype(dtype);
             o.seed = model_seed(seed);
             return std::make_shared<nn::Fno>(o);
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("modes"), py::arg("width") = 32,
           py::arg("layers") = 4, py::arg("projection_width") = 128, py::arg("activation") = "gelu",
           py::arg("grid_coordinates") = true, py::arg("padding") = 0, py::arg("factorization") = "dense",
           py::arg("rank") = 0.5, py::arg("dtype") = py::none(), py::arg("seed") = py::none(),
           py::arg("padding_grid") = std::vector<int64_t>{});

  py::class_<nn::DeepOnet, nn::Module, py::smart_holder>(m, "DeepONet", py::is_final())
      .def(py::init([](int64_t sensors, int64_t coordinates, int64_t latent, int64_t width, int64_t depth,
                       const std::string& activation, const py::object& dtype, const py::object& seed) {
             nn::DeepOnetOptions o;
             o.sensors = sensors;
             o.coordinates = coordinates;
             o.latent = latent;
             o.width = width;
             o.depth = depth;
             o.activation = nn::parse_activation(activation);
             o.dtype = model_dtype(dtype);
             o.seed = model_seed(seed);
             return std::make_shared<nn::DeepOnet>(o);
           }),
           py::arg("sensors"), py::arg("coordinates") = 1, py::arg("latent") = 40, py::arg("width") = 40,
           py::arg("depth") = 2, py::arg("activation") = "relu", py::arg("dtype") = py::none(),
           py::arg("seed") = py::none())
      .def("evaluate", [](nn::DeepOnet& self, const py::object& u, const py::object& points) {
             return self.evaluate(as_tensor(u), as_tensor(points));
           },
           py::arg("u"), py::arg("points"), "[batch, sensors], [P, coordinates] -> [batch, P]")
      // The module's one-input call, model(u), evaluates at these points, as in C++.
      .def("set_points", [](nn::DeepOnet& self, const py::object& points) { self.set_points(as_tensor(points)); },
           py::arg("points"), "The points [P, coordinates] that model(u) evaluates at.");
}

void bind_schedules(py::module_& m) {
  py::class_<optim::Schedule>(m, "Schedule", "A learning rate by update number: opt.learning_rate = schedule(step).")
      .def("__call__", &optim::Schedule::learning_rate, py::arg("step"));
  py::class_<optim::ConstantSchedule, optim::Schedule>(m, "ConstantSchedule", "value at every step")
      .def(py::init<double>(), py::arg("value"));
  py::class_<optim::StepSchedule, optim::Schedule>(m, "StepSchedule", "initial * gamma^floor(step / period)")
      .def(py::init<double, int64_t, double>(), py::arg("initial"), py::arg("period"), py::arg("gamma"));
  py::class_<optim::ExponentialSchedule, optim::Schedule>(m, "ExponentialSchedule", "initial * gamma^step")
      .def(py::init<double, double>(), py::arg("initial"), py::arg("gamma"));
  py::class_<optim::CosineWithWarmupSchedule, optim::Schedule>(
      m, "CosineWithWarmupSchedule",
      "peak * (step + 1) / warmup while step < warmup, then a half cosine from peak to floor at step total, then "
      "floor (docs/optim.md)")
      .def(py::init<double, int64_t, int64_t, double>(), py::arg("peak"), py::arg("warmup"), py::arg("total"),
           py::arg("floor") = 0.0);
  py::class_<optim::PiecewiseSchedule, optim::Schedule>(m, "PiecewiseSchedule",
                                                        "values[i] from boundaries[i - 1] to boundaries[i]")
      .def(py::init<std::vector<int64_t>, std::vector<double>>(), py::arg("boundaries"), py::arg("values"));
}

void bind_optimisers(py::module_& m) {
  py::class_<optim::Optimizer>(m, "Optimizer")
      .def("step", &optim::Optimizer::step)
      .def("zero_grad", &optim::Optimizer::zero_grad)
      .def_property("learning_rate", &optim::Optimizer::learning_rate, &optim::Optimizer::set_learning_rate)
      .def_property_readonly("steps", &optim::Optimizer::steps)
      .def("state_dict", [](const optim::Optimizer& self) { return as_dict(self.state_dict()); })
      .def("load_state_dict", [](optim::Optimizer& self, const py::dict& state) { self.load_state_dict(state_of(state)); });

  auto adam_options = [](double lr, std::pair<double, double> betas, double eps, double weight_decay) {
    optim::AdamOptions o;
    o.learning_rate = lr;
    o.beta1 = betas.first;
    o.beta2 = betas.second;
    o.eps = eps;
    o.weight_decay = weight_decay;
    return o;
  };
  py::class_<optim::Adam, optim::Optimizer>(m, "Adam")
      .def(py::init([adam_options](const py::iterable& params, double lr, std::pair<double, double> betas, double eps,
                                   double weight_decay) {
             return new optim::Adam(parameters_of(params, "Adam"), adam_options(lr, betas, eps, weight_decay));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::pair{0.9, 0.999}, py::arg("eps") = 1e-8,
           py::arg("weight_decay") = 0.0);
  py::class_<optim::AdamW, optim::Adam>(m, "AdamW")
      .def(py::init([adam_options](const py::iterable& params, double lr, std::pair<double, double> betas, double eps,
                                   double weight_decay) {
             return new optim::AdamW(parameters_of(params, "AdamW"), adam_options(lr, betas, eps, weight_decay));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::pair{0.9, 0.999}, py::arg("eps") = 1e-8,
           py::arg("weight_decay") = 1e-2);
  py::class_<optim::Soap, optim::Optimizer>(m, "SOAP")
      .def(py::init([](const py::iterable& params, double lr, std::pair<double, double> betas,
                       std::optional<double> shampoo_beta, int64_t precondition_frequency, double eps,
                       double weight_decay, int64_t max_preconditioner_dimension) {
             optim::SoapOptions o;
             o.learning_rate = lr;
             o.beta1 = betas.first;
             o.beta2 = betas.second;
             o.shampoo_beta = shampoo_beta;
             o.precondition_frequency = precondition_frequency;
             o.eps = eps;
             o.weight_decay = weight_decay;
             o.max_preconditioner_dimension = max_preconditioner_dimension;
             return new optim::Soap(parameters_of(params, "SOAP"), o);
           }),
           py::arg("params"), py::arg("lr") = 3e-3, py::arg("betas") = std::pair{0.95, 0.95},
           py::arg("shampoo_beta") = std::nullopt, py::arg("precondition_frequency") = 10, py::arg("eps") = 1e-8,
           py::arg("weight_decay") = 0.0, py::arg("max_preconditioner_dimension") = 10000,
           "SOAP (Vyas et al. 2024): Adam in the eigenbasis of Shampoo's Kronecker factors, for 2-D "
           "parameters; others get AdamW's update (docs/optim.md).");
  py::class_<optim::Sgd, optim::Optimizer>(m, "SGD")
      .def(py::init([](const py::iterable& params, double lr, double momentum, bool nesterov, double weight_decay) {
             optim::SgdOptions o;
             o.learning_rate = lr;
             o.momentum = momentum;
             o.nesterov = nesterov;
             o.weight_decay = weight_decay;
             return new optim::Sgd(parameters_of(params, "SGD"), o);
           }),
           py::arg("params"), py::arg("lr") = 1e-2, py::arg("momentum") = 0.0, py::arg("nesterov") = false,
           py::arg("weight_decay") = 0.0);
  py::class_<optim::GradScaler>(m, "GradScaler", "Loss scaling for float16 training (docs/optim.md).")
      .def(py::init([](double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval) {
             return new optim::GradScaler({init_scale, growth_factor, backoff_factor, growth_interval});
           }),
           py::arg("init_scale") = 65536.0, py::arg("growth_factor") = 2.0, py::arg("backoff_factor") = 0.5,
           py::arg("growth_interval") = 2000)
      .def("scale", &optim::GradScaler::scale, py::arg("loss"))
      .def("unscale_", &optim::GradScaler::unscale, py::arg("optimizer"),
           "Divides the gradients by the scale now, to clip them before step(), which then leaves them")
      .def("step", &optim::GradScaler::step, py::arg("optimizer"),
           "Unscales the gradients and steps `optimizer` when they are finite; returns whether it stepped.")
      .def_property_readonly("current_scale", &optim::GradScaler::current_scale)
      .def_property_readonly("skipped_steps", &optim::GradScaler::skipped_steps)
      .def("state_dict", [](const optim::GradScaler& self) { return as_dict(self.state_dict()); },
           "The scale and step counts a resumed run needs: scale, good_steps_in_a_row, skipped_steps.")
      .def("load_state_dict",
           [](optim::GradScaler& self, const py::dict& state) { self.load_state_dict(state_of(state)); },
           py::arg("state"));
  py::class_<optim::Lbfgs>(m, "LBFGS", "L-BFGS with a strong-Wolfe line search; step(closure) runs up to "
                                       "max_iterations iterations and returns a report.")
      .def(py::init([](const py::iterable& params, double lr, int64_t max_iterations, int64_t max_evaluations,
                       double tolerance_grad, double tolerance_change, int64_t history_size) {
             optim::LbfgsOptions o;
             o.learning_rate = lr;
             o.max_iterations = max_iterations;
             o.max_evaluations = max_evaluations;
             o.tolerance_grad = tolerance_grad;
             o.tolerance_change = tolerance_change;
             o.history_size = history_size;
             return new optim::Lbfgs(parameters_of(params, "LBFGS"), o);
           }),
           py::arg("params"), py::arg("lr") = 1.0, py::arg("max_iterations") = 100, py::arg("max_evaluations") = 250,
           py::arg("tolerance_grad") = 1e-9, py::arg("tolerance_change") = 1e-12, py::arg("history_size") = 10)
      .def("zero_grad", &optim::Lbfgs::zero_grad)
      .def("state_dict", [](const optim::Lbfgs& self) { return as_dict(self.state_dict()); },
           "The correction pairs and history (docs/optim.md), for a checkpoint.")
      .def("load_state_dict", [](optim::Lbfgs& self, const py::dict& state) { self.load_state_dict(state_of(state)); },
           py::arg("state"))
      .def("step", [](optim::Lbfgs& self, const py::function& closure) {
             const optim::LbfgsReport r = self.step([&closure] {
               const py::object loss = call_python(closure, py::tuple());
               // as_tensor's error for None named NumPy's object dtype, not the closure.
               if (loss.is_none()) throw py::type_error("LBFGS.step: the closure returned None; it must return the loss");
               return as_tensor(loss);
             });
             py::dict report;
             report["iterations"] = r.iterations;
             report["evaluations"] = r.evaluations;
             report["initial_loss"] = r.initial_loss;
             report["loss"] = r.loss;
             report["gradient_max_abs"] = r.gradient_max_abs;
             report["non_finite_evaluations"] = r.non_finite_evaluations;
             report["converged"] = r.converged();
             report["stop"] = optim::stop_identifier(r.stop);  // for a script that branches on it
             report["message"] = r.message;
             return report;
           },
           py::arg("closure"), "closure() zeroes the gradients, computes the loss, calls backward() and returns it.");
  m.def(
      "strong_wolfe",
      [](const py::function& phi, double t_initial, double c1, double c2, int64_t max_evaluations) {
        const optim::LineFunction point_at = [&phi](double t) {
          const auto [value, slope] = call_python(phi, py::make_tuple(t)).cast<std::pair<double, double>>();
          optim::LinePoint point;
          point.t = t;
          point.value = value;
          point.slope = slope;
          point.finite = std::isfinite(value) && std::isfinite(slope);
          return point;
        };
        optim::LineSearchOptions options;
        options.c1 = c1;
        options.c2 = c2;
        options.max_evaluations = max_evaluations;
        const optim::LineSearchResult r = optim::strong_wolfe(point_at, point_at(0), t_initial, options, max_evaluations);
        py::dict result;
        result["t"] = r.point.t;
        result["value"] = r.point.value;
        result["slope"] = r.point.slope;
        result["evaluations"] = r.evaluations;
        result["status"] = optim::status_name(r.status);
        return result;
      },
      py::arg("phi"), py::arg("t_initial") = 1.0, py::arg("c1") = 1e-4, py::arg("c2") = 0.9,
      py::arg("max_evaluations") = 25,
      "L-BFGS's strong-Wolfe line search on phi(t) -> (value, slope), from t = 0 with first trial t_initial; "
      "returns a dict: t, value, slope, evaluations (not counting phi(0)) and status ('wolfe', 'decrease_only' "
      "or 'no_decrease').");
}

}  // namespace

DType model_dtype(const py::object& dtype) { return optional_dtype(dtype).value_or(DType::f32); }

uint64_t model_seed(const py::object& seed) {
  if (!seed.is_none()) return seed.cast<uint64_t>();
  Generator& generator = default_generator();
  const std::array<uint32_t, 4> bits = philox4x32(generator.advance(1), generator.seed());
  return (uint64_t{bits[0]} << 32) | bits[1];
}

void bind_nn(py::module_& m) {
  py::module_ nn = m.def_submodule("nn", "Models and layers (C++ modules).");
  bind_modules(nn);
  bind_transformers(nn);
  py::module_ optim = m.def_submodule("optim", "Optimisers over lists of tensors.");
  bind_optimisers(optim);
  bind_schedules(optim);

  m.def("save_safetensors", [](const std::filesystem::path& path, const py::dict& tensors,
                               const std::map<std::string, std::string>& metadata) {
        io::save_safetensors(path.string(), state_of(tensors), metadata);
      },
      py::arg("path"), py::arg("tensors"), py::arg("metadata") = std::map<std::string, std::string>{},
      "Writes {name: tensor} atomically in the safetensors format (readable by the safetensors package).");
  m.def("load_safetensors", [](const std::filesystem::path& path) {
        io::SafetensorsContents contents = io::load_safetensors(path.string());
        return py::make_tuple(as_dict(contents.tensors), contents.metadata);
      },
      py::arg("path"), "({name: tensor}, metadata) of a safetensors file.");
}

}  // namespace eddy::python
