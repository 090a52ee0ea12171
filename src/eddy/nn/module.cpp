#include "eddy/nn/module.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "eddy/autodiff/tape.h"
#include "eddy/core/tracing.h"
#include "eddy/ops/ops.h"

namespace eddy::nn {

template <typename Visit>
void Module::visit_tensors(const std::string& prefix, bool buffers, Visit&& visit) const {
  for (const auto& [name, tensor] : buffers ? buffers_ : parameters_) visit(prefix + name, *tensor);
  for (const auto& [name, child] : children_) child->visit_tensors(prefix + name + ".", buffers, visit);
}

template <typename Visit>
void Module::visit_tied_names(const std::string& prefix, Visit&& visit) const {
  for (const auto& [name, tied_to] : tied_names_) visit(prefix + name, prefix + tied_to);
  for (const auto& [name, child] : children_) child->visit_tied_names(prefix + name + ".", visit);
}

// Each tensor once, under the first name it is reached by, as PyTorch lists them: a module used
// twice in a model (Sequential([lin, act, lin])) had its weights listed twice, so an optimiser
// stepped them twice a step and Adam kept two moment states for one tensor.
std::vector<std::pair<std::string, Tensor>> Module::named_tensors(bool buffers) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const void*> seen;
  visit_tensors("", buffers, [&](const std::string& name, const Tensor& t) {
    if (seen.insert(t.impl()).second) out.emplace_back(name, t);
  });
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const { return named_tensors(false); }

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const { return named_tensors(true); }

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t count = 0;
  for (const Tensor& p : parameters()) count += p.numel();
  return count;
}

StateDict Module::state_dict() const {
  StateDict state;
  for (auto& [name, t] : named_parameters()) state.emplace(name, t.detach());
  for (auto& [name, t] : named_buffers()) state.emplace(name, t.detach());
  return state;
}

void Module::load_state_dict(const StateDict& state) {
  auto own = named_parameters();
  auto buffers = named_buffers();
  own.insert(own.end(), buffers.begin(), buffers.end());
  for (const auto& [name, target] : own) {
    auto found = state.find(name);
    EDDY_CHECK(found != state.end(), "load_state_dict: missing key \"", name, "\" (expected shape ",
               target.shape(), ", dtype ", target.dtype(), ")");
    const Tensor& source = found->second;
    EDDY_CHECK(source.shape() == target.shape(), "load_state_dict: \"", name, "\" has shape ",
               source.shape(), " but the model expects ", target.shape());
    EDDY_CHECK(source.dtype() == target.dtype(), "load_state_dict: \"", name, "\" has dtype ",
               source.dtype(), " but the model expects ", target.dtype());
  }
  // A child's too (a GPT-2 inside a Python model), under its prefix; and every later name a tensor
  // is reached by (a tensor or module registered in two places: `self.head.weight =
  // self.embed.weight`), which PyTorch's state dicts list beside the first.
  std::vector<std::pair<std::string, std::string>> tied_names;
  visit_tied_names("", [&](const std::string& name, const std::string& tied_to) {
    tied_names.emplace_back(name, tied_to);
  });
  for (const bool buffers : {false, true}) {
    std::unordered_map<const void*, std::string> first_names;
    visit_tensors("", buffers, [&](const std::string& name, const Tensor& t) {
      const auto [first, inserted] = first_names.try_emplace(t.impl(), name);
      if (!inserted) tied_names.emplace_back(name, first->second);
    });
  }
  for (const auto& [name, tensor] : state) {
    bool known = false;
    for (const auto& entry : own) known = known || entry.first == name;
    if (!known) {
      const auto tied = std::find_if(tied_names.begin(), tied_names.end(),
                                     [&](const auto& entry) { return entry.first == name; });
      // The key it is tied to may be absent under this prefix: a child reached by two names is
      // listed under the first.
      const auto primary_entry = tied == tied_names.end() ? state.end() : state.find(tied->second);
      if (primary_entry != state.end()) {
        const Tensor& primary = primary_entry->second;
        EDDY_CHECK(tensor.shape() == primary.shape() && tensor.dtype() == primary.dtype() &&
                       sum(cast(ne(tensor, primary), DType::f64)).item<double>() == 0,
                   "load_state_dict: \"", name, "\" differs from \"", tied->second,
                   "\", which this model uses in its place (tied): load one of them, or both equal");
        continue;
      }
    }
    EDDY_CHECK(known, "load_state_dict: unexpected key \"", name, "\" (not in this model)");
  }
  NoGradGuard no_grad;
  for (auto& [name, target] : own) target.copy_(state.at(name));
}

void Module::register_tied_name(std::string name, std::string tied_to) {
  tied_names_.emplace_back(std::move(name), std::move(tied_to));
}

void Module::to(Device device) {
  for (auto& [name, member] : parameters_) {
    // A frozen parameter stays frozen: moved, it was made trainable again.
    if (member->device() != device) {
      *member = eddy::to(*member, device).detach().requires_grad_(member->requires_grad());
    }
  }
  for (auto& [name, member] : buffers_) {
    if (member->device() != device) *member = eddy::to(*member, device).detach();
  }
  for (auto& [name, child] : children_) child->to(device);
}

// The flag is written and read in place, not through ops, so that a module made or switched
// while a function is traced is not recorded.
Module::Module() : training_(Tensor::empty({}, DType::b8, cpu())) { *training_.data<bool>() = true; }

void Module::train(bool enabled) {
  *training_.data<bool>() = enabled;
  for (auto& [name, child] : children_) child->train(enabled);
}

bool Module::is_training() const {
  if (TraceRecorder* recorder = active_trace_recorder()) recorder->host_read(training_, "a module's training mode");
  return *training_.data<bool>();
}

void Module::refuse_taken_name(const std::string& name, std::string_view registering) const {
  const auto named = [&name](const auto& entries) {
    return std::any_of(entries.begin(), entries.end(), [&name](const auto& entry) { return entry.first == name; });
  };
  EDDY_CHECK(!named(parameters_) && !named(buffers_) && !named(children_), registering, ": \"", name,
             "\" is registered already (as a parameter, buffer or module of this module); give each its own name");
}

void Module::register_parameter(std::string name, Tensor& member) {
  EDDY_CHECK(member.defined(), "register_parameter: \"", name, "\" is undefined");
  refuse_taken_name(name, "register_parameter");
  if (!member.requires_grad()) member.requires_grad_();
  parameters_.emplace_back(std::move(name), &member);
}

void Module::set_module(const std::string& name, std::shared_ptr<Module> child) {
  for (auto& [registered, existing] : children_) {
    if (registered == name) {
      existing = std::move(child);
      return;
    }
  }
  children_.emplace_back(name, std::move(child));
}

void Module::forget(const std::string& name) {
  const auto named = [&](const auto& entry) { return entry.first == name; };
  std::erase_if(parameters_, named);
  std::erase_if(buffers_, named);
  std::erase_if(children_, named);
}

bool Module::contains(const Module& other) const {
  std::unordered_set<const Module*> seen;
  std::vector<const Module*> pending{this};
  while (!pending.empty()) {
    const Module* module = pending.back();
    pending.pop_back();
    if (module == &other) return true;
    if (!seen.insert(module).second) continue;
    for (const auto& [name, child] : module->children_) pending.push_back(child.get());
  }
  return false;
}

void Module::register_buffer(std::string name, Tensor& member) {
  EDDY_CHECK(member.defined(), "register_buffer: \"", name, "\" is undefined");
  refuse_taken_name(name, "register_buffer");
  buffers_.emplace_back(std::move(name), &member);
}

}  // namespace eddy::nn
