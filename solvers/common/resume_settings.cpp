#include "solvers/common/resume_settings.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <optional>

#include "eddy/core/error.h"
#include "eddy/io/atomic_file.h"

namespace eddy::solvers {

bool is_resumable(const std::string& key, const ResumableKeys& resumable) {
  for (const std::string& path : resumable) {
    if (key == path || (key.size() > path.size() && key.starts_with(path) && key[path.size()] == '.')) return true;
  }
  return false;
}

Settings without_resumable(const Settings& settings, const ResumableKeys& resumable) {
  Settings kept;
  for (const auto& [key, value] : settings) {
    if (!is_resumable(key, resumable)) kept.emplace(key, value);
  }
  return kept;
}

namespace {

// Two texts of the same floating-point number ("0.1" and "0.10000000000000001", as eddy wrote
// defaults before it wrote them shortest): a checkpoint of then resumes now. Only where both are
// written as floating-point numbers: a setting's type is not recorded, and "1" and "1.0" (or "01"
// and "1") are two separators, as 2^53 and 2^53 + 1 are two seeds.
bool same_number(const std::optional<std::string>& a, const std::optional<std::string>& b) {
  if (!a || !b) return false;
  const auto read = [](const std::string& text, double& value) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc() && end == text.data() + text.size() &&
           text.find_first_of(".eE") != std::string::npos;
  };
  double x = 0, y = 0;
  return read(*a, x) && read(*b, y) && x == y;
}

// A list's text in one style whatever style it was read in: yaml-cpp keeps a node's block style
// when emitting it in flow, so the same list from a YAML file (block) and from a Python dict
// (flow) had two texts, and a resume of one by the other was refused.
void to_flow_style(YAML::Node node) {
  if (!node.IsMap() && !node.IsSequence()) return;
  node.SetStyle(YAML::EmitterStyle::Flow);
  for (auto entry : node) {
    if (node.IsMap()) {
      to_flow_style(entry.second);
    } else {
      to_flow_style(entry);
    }
  }
}

std::string flow_text(const YAML::Node& node) {
  YAML::Node copy = YAML::Clone(node);
  to_flow_style(copy);
  YAML::Emitter text;
  text << YAML::Flow << copy;
  return text.c_str();
}

// Two lists or maps alike but for the order of keys in their maps: a list of maps holds its defaults
// in the order they were read, and a default derived from another key (a test set's file) is read
// after the keys the run's config.yaml holds when that is read again.
bool same_structure(const YAML::Node& a, const YAML::Node& b) {
  if (a.Type() != b.Type()) return false;
  if (a.IsScalar()) return a.Scalar() == b.Scalar();
  if (a.size() != b.size()) return false;
  if (a.IsSequence()) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (!same_structure(a[i], b[i])) return false;
    }
    return true;
  }
  for (const auto& entry : a) {
    const YAML::Node other = b[entry.first.Scalar()];
    if (!other.IsDefined() || !same_structure(entry.second, other)) return false;
  }
  return a.IsMap() || a.IsNull();
}

// A list's or map's record as collect writes it: an older eddy's text of a setting that only reads
// like one ("[a,b]") is not.
bool is_flow_record(const std::string& text) {
  return (text.starts_with('[') || text.starts_with('{')) && flow_text(YAML::Load(text)) == text;
}

// Two texts of one setting: the same text or number; two lists or maps alike but for their maps'
// key order; or, from a checkpoint of before lists were recorded in one style, a list or map
// recorded in block style ("- 4\n- 4") and this run's same list in flow style, or a multi-line text
// recorded as it was and this run's quoted. No other text is read as YAML: texts that read alike
// are two settings ("#", a comment, and ""; "[a,b]" and "[a, b]" as a separator's text; "16" and
// "16.0" as a test set's name).
bool same_value(const std::optional<std::string>& before, const std::optional<std::string>& now) {
  if (before == now || same_number(before, now)) return true;
  if (!before || !now) return false;
  try {
    // collect quotes a text that starts as a list's or map's record does: these are lists or maps.
    if (is_flow_record(*before) && is_flow_record(*now)) return same_structure(YAML::Load(*before), YAML::Load(*now));
    // Such a checkpoint holds a multi-line text (an equation) unquoted, which collect now quotes. Not
    // a text starting with [ or {: a list's record is that too, and a list is not its text.
    if (now->starts_with('"')) {
      const std::string text = YAML::Load(*now).Scalar();
      if (text == *before && (text.find('\n') != std::string::npos || text.starts_with("- "))) return true;
    }
    if (!(before->starts_with("- ") || before->find('\n') != std::string::npos)) return false;
    const YAML::Node earlier = YAML::Load(*before);
    return (earlier.IsSequence() || earlier.IsMap()) && flow_text(earlier) == *now;
  } catch (const YAML::Exception&) {
    return false;
  }
}

// Maps are walked into; anything else (a scalar, a sequence) is one value.
void collect(const YAML::Node& node, const std::string& path, const ResumableKeys& resumable, Settings& into) {
  if (!path.empty() && is_resumable(path, resumable)) return;
  if (node.IsMap()) {
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      collect(entry.second, path.empty() ? key : path + "." + key, resumable, into);
    }
    return;
  }
  if (node.IsScalar()) {
    // A text that reads like a list or map is recorded quoted, so that it never equals a list's
    // record (the glob "[ab]" and the list [ab] of data.exclude were one setting) and only a
    // checkpoint of before lists had one style holds a block-style record (same_value); so is a
    // text that starts with a quote, which would otherwise equal another text's quoted record.
    const std::string& text = node.Scalar();
    if (text.starts_with('[') || text.starts_with('{') || text.starts_with("- ") || text.starts_with('"') ||
        text.find('\n') != std::string::npos) {
      YAML::Emitter quoted;
      quoted << YAML::DoubleQuoted << text;
      into[path] = quoted.c_str();
    } else {
      into[path] = text;
    }
    return;
  }
  into[path] = flow_text(node);
}

std::string shown(const std::optional<std::string>& value) { return value ? *value : std::string("not set"); }

}  // namespace

Settings fixed_settings(const std::string& resolved_config, const ResumableKeys& resumable) {
  Settings settings;
  collect(YAML::Load(resolved_config), "", resumable, settings);
  return settings;
}

Settings derived_settings(const io::Config& config) {
  const Settings plain = fixed_settings(config.resolved(), {});
  Settings derived;
  for (auto& [key, value] : fixed_settings(config.resolved_with_derived(), {})) {
    const auto found = plain.find(key);
    if (found == plain.end() || found->second != value) derived.emplace(key, std::move(value));
  }
  return derived;
}

std::string encode_settings(const Settings& settings) {
  YAML::Emitter text;
  text << YAML::BeginMap;
  for (const auto& [key, value] : settings) text << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
  text << YAML::EndMap;
  return text.c_str();
}

Settings decode_settings(const std::string& text, const std::string& checkpoint) {
  Settings settings;
  try {
    const YAML::Node map = YAML::Load(text);
    if (!map.IsMap()) throw YAML::Exception(YAML::Mark::null_mark(), "not a map");
    for (const auto& entry : map) settings[entry.first.as<std::string>()] = entry.second.as<std::string>();
  } catch (const YAML::Exception& e) {
    throw Error(cat(checkpoint, ": metadata eddy.settings is not a map of key paths to values (", e.what(),
                    "); the file is damaged or was not written by eddy"));
  }
  return settings;
}

void check_same_settings(const Settings& checkpoint_run, const Settings& this_run, const ResumableKeys& resumable,
                         const std::string& checkpoint) {
  auto value_in = [](const Settings& settings, const std::string& key) -> std::optional<std::string> {
    const auto found = settings.find(key);
    return found == settings.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
  Settings all = checkpoint_run;
  all.insert(this_run.begin(), this_run.end());
  // Every difference is named: one key's default can follow another's (lbfgs.evaluations from
  // lbfgs.iterations), and naming the first alone named a key the user had not touched.
  std::string differences;
  for (const auto& entry : all) {
    const std::string& key = entry.first;
    // A checkpoint written while a key was still fixed records it; it may change now.
    if (is_resumable(key, resumable)) continue;
    const std::optional<std::string> before = value_in(checkpoint_run, key), now = value_in(this_run, key);
    if (same_value(before, now)) continue;
    const std::string where = differences.empty() ? cat(" in the run that wrote ", checkpoint) : " there";
    differences += cat(differences.empty() ? "" : "; ", key, " is ", shown(before), where, " but ", shown(now), " now");
  }
  if (differences.empty()) return;
  std::string may_change;
  for (const std::string& path : resumable) may_change += (may_change.empty() ? "" : ", ") + path;
  throw Error(cat("--resume: ", differences, "; only training settings may change (", may_change,
                  "). Start a new run (another output.dir) to change them"));
}

void require_checkpoint_of_config(const std::string& run_dir, const std::string& checkpoint_settings,
                                  const Settings& derived, const ResumableKeys& resumable) {
  if (checkpoint_settings.empty()) return;  // written before checkpoints recorded their settings
  const std::string checkpoint = run_dir + "/checkpoint.safetensors";
  const Settings recorded = decode_settings(checkpoint_settings, checkpoint);
  Settings config = fixed_settings(io::read_file(run_dir + "/config.yaml"), {});
  for (const auto& [key, value] : without_resumable(derived, resumable)) config.insert_or_assign(key, value);
  std::string differences;
  for (const auto& [key, value] : recorded) {
    const auto found = config.find(key);
    if (found == config.end() || same_value(value, found->second)) continue;
    differences += cat(differences.empty() ? "" : "; ", key, " is ", value, " there and ", found->second,
                       " in config.yaml");
  }
  EDDY_CHECK(differences.empty(), checkpoint, " was not written by the run of ", run_dir, "/config.yaml (",
             differences, "): that run stopped before its first checkpoint, and the checkpoint is an earlier "
             "run's. Train it again from that config.yaml (a --resume would refuse the checkpoint too)");
}

io::CheckpointInfo load_run_checkpoint(const std::string& run_dir, const Settings& derived,
                                       const ResumableKeys& resumable, nn::Module& model,
                                       nn::StateDict* optimizer_state) {
  return io::load_checkpoint(run_dir + "/checkpoint.safetensors", model, optimizer_state,
                             [&](const io::CheckpointInfo& info) {
                               require_checkpoint_of_config(run_dir, info.settings, derived, resumable);
                             });
}

}  // namespace eddy::solvers
