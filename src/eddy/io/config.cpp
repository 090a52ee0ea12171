#include "eddy/io/config.h"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "eddy/core/error.h"
#include "eddy/core/fingerprint.h"
#include "eddy/core/memory.h"
#include "eddy/core/suggest.h"
#include "eddy/io/atomic_file.h"

namespace eddy::io {
namespace {

std::string display(const std::string& path) { return path.empty() ? "(top level)" : path; }

std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  return "nothing";
}

std::string location(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return cat(source, ":", mark.line + 1, ":", mark.column + 1);
}

std::string child_key_path(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

// How many places of `tree` hold the very node `target` (more than one through aliases).
int uses_of(const YAML::Node& tree, const YAML::Node& target) {
  if (tree.is(target)) return 1;
  int uses = 0;
  if (tree.IsSequence()) {
    for (const YAML::Node& element : tree) uses += uses_of(element, target);
  } else if (tree.IsMap()) {
    for (const auto& entry : tree) uses += uses_of(entry.second, target);
  }
  return uses;
}

// Checks a loaded tree (a file's, or an override's value) before anything reads it: every key a
// name, given once and with a value, no merge keys, and no map or list reached twice. yaml-cpp
// keeps the first of two equal keys and drops the second without a word, so a key given twice
// would run with the value the user did not look at last; a map shared through an alias (`test:
// *train`) took the defaults each reader wrote into it, an override of one use changed all, and
// nested aliases expand exponentially. `source` is a file, whose positions are given, or a
// command-line override, whose one-line value needs none.
class TreeCheck {
 public:
  TreeCheck(std::string source, bool file) : source_(std::move(source)), file_(file) {}

  void check(const YAML::Node& node, const std::string& path) {
    // A value starting with `!` is a YAML tag, which readers drop: `on: !inlet && x == 0` ran as
    // `x == 0` (its `&&` an anchor). yaml-cpp tags plain values "?", quoted ones "!", and the
    // standard ones (!!str) with their long names; anything else is a tag the user did not mean.
    const std::string& tag = node.Tag();
    if (!tag.empty() && tag != "?" && tag != "!" && !tag.starts_with("tag:yaml.org,2002:")) {
      fail(node.Mark(), path, cat("starts with '", tag, "', which YAML reads as a tag and drops; quote the value "
                                  "(\"", tag, " ...\") to write an expression that starts with '!'"));
    }
    if (node.IsSequence() || node.IsMap()) {
      // Only a node from the same place in the text can be the same node: comparing with every
      // collection seen was quadratic in a file's inline point lists.
      std::vector<YAML::Node>& same_place = collections_[node.Mark().pos];
      for (const YAML::Node& seen : same_place) {
        if (seen.is(node)) {
          fail(node.Mark(), path, "is an alias of a map or list given earlier; eddy fills each section with its own "
                                  "defaults, so write the section out (aliases of single values are fine)");
        }
      }
      same_place.push_back(node);
    }
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        const std::string element = cat(path, "[", i, "]");
        if (node[i].IsNull()) fail(node[i].Mark(), element, "is empty; give a value");
        check(node[i], element);
      }
      return;
    }
    if (!node.IsMap()) return;
    std::map<std::string, YAML::Mark> first_seen;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) fail(entry.first.Mark(), path, "has a key that is not a name (a list or a map)");
      const std::string key = entry.first.Scalar();
      if (key == "<<") {
        fail(entry.first.Mark(), path, "uses a merge key (<<:), which eddy does not read; write the keys out");
      }
      const auto [first, inserted] = first_seen.emplace(key, entry.first.Mark());
      if (!inserted) {
        fail(entry.first.Mark(), path,
             file_ ? cat("key '", key, "' is given twice (first at line ", first->second.line + 1, ", column ",
                         first->second.column + 1, "); give each key once")
                   : cat("key '", key, "' is given twice; give each key once"));
      }
      const std::string child = child_key_path(path, key);
      // `rar:` with nothing after it read as absent, so it got its default (off) where `rar: {}`
      // turns it on; an empty override (`steps=$UNSET`) did the same.
      if (entry.second.IsNull()) {
        // In a map written {...} a comma inside a value (pow(u, 2)) ends it, and the rest reads as
        // a key without a value.
        fail(entry.first.Mark(), child,
             node.Style() == YAML::EmitterStyle::Flow
                 ? "has no value: in a map written {...}, a comma ends a value, so quote a value that holds one "
                   "(equation: \"pow(u, 2)\"); otherwise give the key a value or leave it out"
                 : "has no value; give one, {} for a section with its defaults, or leave the key out for its default");
      }
      check(entry.second, child);
    }
  }

 private:
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& path, const std::string& message) const {
    throw Error(cat(file_ ? location(source_, mark) : source_, ": ", display(path), ": ", message));
  }

  std::string source_;
  bool file_;
  std::map<int, std::vector<YAML::Node>> collections_;  // by position in the text
};

}  // namespace

// ---- ConfigNode ----

namespace {

// Whether `path` is `ancestor` or lies within it (a key or an element below it).
bool within(const std::string& path, const std::string& ancestor) {
  return path == ancestor || path.rfind(ancestor + ".", 0) == 0 || path.rfind(ancestor + "[", 0) == 0;
}

}  // namespace

const std::string* Config::override_covering(const std::string& path) const {
  for (const auto& [overridden_path, text] : overridden_) {
    if (within(path, overridden_path)) return &text;
  }
  return nullptr;
}

std::vector<std::string> Config::overrides_below(const std::string& path) const {
  std::vector<std::string> below;
  for (const auto& [overridden_path, text] : overridden_) {
    if (overridden_path != path && within(overridden_path, path)) below.push_back(text);
  }
  return below;
}

const std::string* ConfigNode::override_text() const { return config_->override_covering(path_); }

std::string ConfigNode::position() const {
  if (const std::string* text = override_text()) return cat(config_->override_kind_, " '", *text, "'");
  const std::vector<std::string> below = config_->overrides_below(path_);
  if (below.empty()) return location(config_->source_, node_.Mark());
  std::string listed;
  for (const std::string& text : below) listed += (listed.empty() ? "'" : ", '") + text + "'";
  const std::string overrides = cat(config_->override_kind_, below.size() > 1 ? "s " : " ", listed);
  // A map the overrides made has no place in the file; one they changed has, and both count.
  if (node_.Mark().is_null()) return overrides;
  return cat(location(config_->source_, node_.Mark()), " (with ", overrides, ")");
}

std::string ConfigNode::where() const { return cat(position(), ": ", display(path_), ": "); }

void ConfigNode::fail(const std::string& message) const { throw Error(where() + message); }

void ConfigNode::require_memory(const std::string& what, double bytes) const {
  const UsableMemory memory = usable_memory();
  if (memory.bytes > 0 && bytes > static_cast<double>(memory.bytes)) {
    fail(cat(what, " need at least ", memory_text(bytes), usable_memory_note()));
  }
}

std::string ConfigNode::child_path(const std::string& key) const { return child_key_path(path_, key); }

void ConfigNode::record_default(const std::string& key) const { config_->defaulted_.insert(child_path(key)); }

void ConfigNode::require_map() const {
  if (!node_.IsMap() && !node_.IsNull()) fail("expected a map of keys, got " + describe(node_));
}

bool ConfigNode::has(const std::string& key) const {
  require_map();
  config_->known_keys_[path_].insert(key);
  const YAML::Node& node = node_;
  return node.IsMap() && node[key].IsDefined() && !node[key].IsNull();
}

ConfigNode ConfigNode::at_unchecked(const std::string& key) const {
  const YAML::Node& node = node_;
  return ConfigNode(config_, node[key], child_path(key));
}

ConfigNode ConfigNode::at(const std::string& key) const {
  if (!has(key)) {
    // A near miss among the keys given (`centre` for `center`) is the likely cause; the defaults
    // written into the map so far were not given.
    std::vector<std::string> given;
    if (node_.IsMap()) {
      for (const auto& entry : node_) {
        const std::string& name = entry.first.Scalar();
        if (!config_->defaulted_.contains(child_path(name))) given.push_back(name);
      }
    }
    const std::string near = nearest_name(key, given);
    std::string hint;
    if (!near.empty()) {
      hint = " (is '" + near + "' a misspelling of it?)";
    } else if (!given.empty()) {
      // A key named otherwise (`viscosity` for `nu`) is near no spelling; the list shows it.
      hint = " (the keys given here: " + comma_separated(given) + ")";
    }
    fail("missing required key '" + key + "'" + hint);
  }
  return at_unchecked(key);
}

std::optional<ConfigNode> ConfigNode::find(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return at_unchecked(key);
}

ConfigNode ConfigNode::section(const std::string& key) const {
  if (!has(key)) write_default(key, YAML::Node(YAML::NodeType::Map));
  ConfigNode child = at_unchecked(key);
  child.require_map();
  return child;
}

std::vector<std::string> ConfigNode::keys() const {
  require_map();
  config_->free_maps_.insert(path_);
  std::vector<std::string> out;
  for (const auto& entry : node_) out.push_back(entry.first.Scalar());
  return out;
}

std::vector<ConfigNode> ConfigNode::elements() const {
  if (!node_.IsSequence()) fail("expected a list, got " + describe(node_));
  std::vector<ConfigNode> out;
  for (size_t i = 0; i < node_.size(); ++i) {
    out.push_back(ConfigNode(config_, node_[i], cat(path_, "[", i, "]")));
  }
  return out;
}

double ConfigNode::as_number() const {
  double value = 0;
  if (!node_.IsScalar() || !YAML::convert<double>::decode(node_, value)) {
    fail("expected a number, got " + describe(node_));
  }
  // YAML's .inf and .nan are numbers to it; no setting means them, and they got past checks that
  // compare (NaN compares false).
  if (!std::isfinite(value)) fail("expected a finite number, got " + describe(node_));
  return value;
}

int64_t ConfigNode::as_integer() const {
  // yaml-cpp read 010 as octal 8 and 0x10 as 16 for integers, where number keys and YAML 1.2
  // readers (PyYAML) take 010 as 10: only decimal integers are read, and a leading zero is refused.
  if (node_.IsScalar()) {
    std::string_view digits = node_.Scalar();
    if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
    const bool other_base = digits.size() > 1 && digits[0] == '0' &&
                            (std::isdigit(static_cast<unsigned char>(digits[1])) ||
                             std::string_view("xXoObB").find(digits[1]) != std::string_view::npos);
    if (other_base) {
      fail("expected a decimal integer, got " + describe(node_) + ": a leading 0 (or 0x, 0o) reads as another "
           "base to some YAML readers; write it without");
    }
  }
  int64_t value = 0;
  if (node_.IsScalar() && YAML::convert<int64_t>::decode(node_, value)) return value;
  // Sizes are often written as 1e5 or 2.0e4, which YAML reads as floats: a whole number is taken.
  // 2^63 is the first double out of int64's range.
  double number = 0;
  if (node_.IsScalar() && YAML::convert<double>::decode(node_, number) && number == std::floor(number) &&
      std::fabs(number) < 0x1p63) {
    return static_cast<int64_t>(number);
  }
  fail("expected an integer, got " + describe(node_));
}

bool ConfigNode::as_bool() const {
  bool value = false;
  if (!node_.IsScalar() || !YAML::convert<bool>::decode(node_, value)) {
    fail("expected true or false, got " + describe(node_));
  }
  return value;
}

std::string ConfigNode::as_string() const {
  if (!node_.IsScalar()) fail("expected a string, got " + describe(node_));
  return node_.Scalar();
}

std::vector<double> ConfigNode::as_numbers() const {
  if (node_.IsScalar()) return {as_number()};
  std::vector<double> out;
  for (const ConfigNode& element : elements()) out.push_back(element.as_number());
  return out;
}

namespace {

// "~" or "~/..." with the home folder for the "~"; anything else as given ("~user" forms are not
// expanded).
std::string expand_home(const ConfigNode& node, const std::string& given) {
  if (given != "~" && !given.starts_with("~/")) return given;
  const char* home = std::getenv("HOME");
  if (!home || !*home) node.fail(cat("'", given, "' starts with ~, and HOME is not set to say whose folder that is"));
  return std::string(home) + given.substr(1);
}

}  // namespace

std::string ConfigNode::as_output_path() const {
  const std::string given = as_string();
  const std::string expanded = expand_home(*this, given);
  if (expanded != given) {
    YAML::Node node = node_;  // a handle: assigning writes into the tree
    node = expanded;
  }
  return expanded;
}

namespace {

// Whether reading `text` as `read` dropped comments: YAML drops them, so the text holds more '#'
// than what was read written out again.
bool dropped_comments(const YAML::Node& read, const std::string& text) {
  const auto hashes = [](const std::string& part) { return std::count(part.begin(), part.end(), '#'); };
  return hashes(YAML::Dump(read)) < hashes(text);
}

}  // namespace

bool holds_yaml_comments(const std::string& text) {
  try {
    return dropped_comments(YAML::Load(text), text);
  } catch (const YAML::Exception&) {
    return false;
  }
}

std::string ConfigNode::as_input_path() const { return resolve_input(false); }

std::string ConfigNode::as_input_pattern() const { return resolve_input(true); }

std::string ConfigNode::resolve_input(bool pattern) const {
  namespace fs = std::filesystem;
  const std::string given = as_string();
  if (given.empty()) return given;
  // The folder the text is relative to: home for "~/...", none for an absolute path (asking for
  // the working directory failed where it had been removed), else the config's or the working one.
  const bool home = given == "~" || given.starts_with("~/");
  std::string folder, rest = given;
  if (home) {
    folder = expand_home(*this, "~");
    rest = given.size() > 2 ? given.substr(2) : std::string();
  } else if (!fs::path(given).is_absolute()) {
    folder = (override_text() || config_->folder_.empty() ? fs::current_path() : fs::path(config_->folder_)).string();
  }
  std::string base = folder.empty() ? std::string() : fs::absolute(folder).lexically_normal().string();
  if (pattern) {
    std::string escaped;
    for (char c : base) {
      if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') escaped += '\\';
      escaped += c;
    }
    base = escaped;
  }
  const fs::path joined = base.empty() ? fs::path(rest) : rest.empty() ? fs::path(base) : fs::path(base) / rest;
  const std::string resolved = joined.lexically_normal().string();
  YAML::Node node = node_;  // a handle: assigning writes into the tree
  node = resolved;
  return resolved;
}

std::string ConfigNode::as_choice(const std::vector<std::string>& choices) const {
  std::string value = as_string();
  for (const std::string& choice : choices) {
    if (value == choice) return value;
  }
  std::string valid;
  for (const std::string& choice : choices) valid += (valid.empty() ? "" : ", ") + choice;
  fail("'" + value + "' is not one of: " + valid + did_you_mean(value, choices));
}

double ConfigNode::number(const std::string& key, double fallback) const {
  if (has(key)) return at(key).as_number();
  write_default(key, fallback);
  return fallback;
}

int64_t ConfigNode::integer(const std::string& key, int64_t fallback) const {
  if (has(key)) return at(key).as_integer();
  write_default(key, fallback);
  return fallback;
}

bool ConfigNode::boolean(const std::string& key, bool fallback) const {
  if (has(key)) return at(key).as_bool();
  write_default(key, fallback);
  return fallback;
}

std::string shortest_text(double value) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

std::vector<double> ConfigNode::numbers(const std::string& key, const std::vector<double>& fallback) const {
  if (has(key)) return at(key).as_numbers();
  write_default(key, fallback);
  return fallback;
}

ConfigNode ConfigNode::sequence(const std::string& key, const std::vector<std::string>& fallback) const {
  if (!has(key)) write_default(key, fallback);
  return at(key);
}

std::string ConfigNode::string(const std::string& key, const std::string& fallback) const {
  if (has(key)) return at(key).as_string();
  write_default(key, fallback);
  return fallback;
}

std::string ConfigNode::input_path(const std::string& key, const std::string& fallback) const {
  if (!has(key)) write_default(key, fallback);
  return at_unchecked(key).as_input_path();
}

void ConfigNode::record_derived(const std::string& key) const { config_->derived_.emplace_back(node_, key); }

int64_t ConfigNode::derived_integer(const std::string& key, int64_t fallback) const {
  if (!has(key)) record_derived(key);
  return integer(key, fallback);
}

double ConfigNode::derived_number(const std::string& key, double fallback) const {
  if (!has(key)) record_derived(key);
  return number(key, fallback);
}

std::string ConfigNode::derived_input_path(const std::string& key, const std::string& fallback) const {
  if (!has(key)) record_derived(key);
  return input_path(key, fallback);
}

std::string ConfigNode::choice(const std::string& key, const std::vector<std::string>& choices,
                               const std::string& fallback) const {
  if (has(key)) return at(key).as_choice(choices);
  write_default(key, fallback);
  return fallback;
}

// ---- Config ----

std::unique_ptr<Config> Config::load(const std::string& path, const std::vector<std::string>& overrides,
                                     RelativePaths relative_paths, const std::string& overrides_are) {
  std::unique_ptr<Config> config = parse(read_file(path), path, overrides, overrides_are);
  if (relative_paths == RelativePaths::config_folder) {
    config->folder_ = std::filesystem::absolute(path).parent_path().string();
  }
  return config;
}

namespace {

// What a binary file given where a config belongs is, by its first bytes; empty for text. YAML
// would report a syntax error somewhere in the bytes (`eddy train data.h5`).
std::string binary_kind(std::string_view bytes) {
  if (bytes.starts_with("\x89HDF\r\n\x1a\n")) return "an HDF5 file";
  // safetensors: an 8-byte little-endian header length, then the JSON header.
  if (bytes.size() > 8 && bytes[8] == '{' && bytes.substr(0, 8).find('\0') != std::string_view::npos) {
    return "a safetensors file";
  }
  if (bytes.substr(0, 4096).find('\0') != std::string_view::npos) return "a binary file";
  return "";
}

// Whether line `line` (0-based) of `text` is indented with a tab: YAML refuses one with a message
// that points at its colon ("illegal map value") and never says why. Only the error's own line is
// looked at: a tab in a quoted or block scalar's text on an earlier line is no fault.
bool indented_with_a_tab(const std::string& text, int line) {
  if (line < 0) return false;
  size_t start = 0;
  for (int at = 0; at < line; ++at) {
    start = text.find('\n', start);
    if (start == std::string::npos) return false;
    ++start;
  }
  for (size_t i = start; i < text.size() && (text[i] == ' ' || text[i] == '\t'); ++i) {
    if (text[i] == '\t') return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<Config> Config::parse(const std::string& text, const std::string& source,
                                      const std::vector<std::string>& overrides, const std::string& overrides_are) {
  if (const std::string kind = binary_kind(text); !kind.empty()) {
    throw Error(cat(source, " is ", kind, ", not a YAML config"));
  }
  YAML::Node tree;
  try {
    const std::vector<YAML::Node> documents = YAML::LoadAll(text);
    // A second document (after ---) was dropped silently, keys and mistakes alike.
    if (documents.size() > 1) {
      throw Error(cat(location(source, documents[1].Mark()), ": a second YAML document (after --- or ...); eddy "
                      "reads one document a file"));
    }
    if (!documents.empty()) tree = documents[0];
  } catch (const YAML::Exception& e) {
    throw Error(cat(location(source, e.mark), ": YAML syntax error: ", e.msg,
                    indented_with_a_tab(text, e.mark.line) ? " (the line is indented with a tab: YAML indents with "
                                                             "spaces only)" : ""));
  }
  TreeCheck(source, true).check(tree, "");
  if (tree.IsNull()) tree = YAML::Node(YAML::NodeType::Map);
  if (!tree.IsMap()) throw Error(cat(source, ": the top level must be a map of keys, not ", describe(tree)));
  std::unique_ptr<Config> config(new Config(source, tree));
  config->override_kind_ = overrides_are;
  for (const std::string& assignment : overrides) config->apply_override(assignment);
  return config;
}

void Config::apply_override(const std::string& assignment) {
  const size_t equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw Error(cat(override_kind_, " '", assignment, "': expected key.path=value"));
  }
  const std::string path = assignment.substr(0, equals);
  const std::string text = assignment.substr(equals + 1);
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception&) {
    // Not YAML, such as a glob (`data.files=*.txt`, where * starts an alias): the text itself, which
    // the key then takes or refuses with its own message.
    value = YAML::Node(text);
  }
  const std::string source = cat(override_kind_, " '", assignment, "'");
  // YAML reads some texts as no document at all ('%' starts a directive, '---' and '...' mark
  // documents): the text itself, as for text that is not YAML (data.separator=% is the example's).
  if (value.IsNull()) {
    const size_t first = text.find_first_not_of(" \t");
    const std::string given = first == std::string::npos ? "" : text.substr(first, text.find_last_not_of(" \t") - first + 1);
    const bool says_null = given.empty() || given[0] == '#' || given == "~" || given == "null" || given == "Null" ||
                           given == "NULL";
    if (!says_null) value = YAML::Node(text);
  }
  // `model.width=` with nothing (an unset shell variable) read as absent: the default, silently.
  if (value.IsNull()) {
    throw Error(cat(source, ": gives no value (nothing after '=', or only a comment); give one, or {} for a "
                    "section with its defaults"));
  }
  // ` #` starts a YAML comment, which goes: output.dir=runs/exp #1 wrote runs/exp, over another run.
  // (The value read, not the text read again: a text that YAML reads as no document is taken as it
  // is above, and holds its '#'.)
  if (dropped_comments(value, text)) {
    std::string quoted;  // in single quotes, where YAML writes a quote as two
    for (char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    throw Error(cat(source, ": ' #' starts a YAML comment, which drops the rest of the value (", path,
                    " would be ", YAML::Dump(value), "); quote the value in YAML: ", path, "='", quoted,
                    "', within the shell's own quotes"));
  }
  TreeCheck(source, false).check(value, path);
  std::vector<std::string> keys;
  std::stringstream stream(path);
  for (std::string key; std::getline(stream, key, '.');) {
    if (key.empty()) throw Error(cat(override_kind_, " '", assignment, "': empty key in '", path, "'"));
    keys.push_back(key);
  }
  // getline gives no empty key after a final dot: seed.=3 set seed.
  if (path.ends_with('.')) throw Error(cat(override_kind_, " '", assignment, "': empty key in '", path, "'"));
  // YAML::Node's operator= assigns through the handle, so walking down uses reset() to rebind.
  YAML::Node node = tree_;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    YAML::Node next = node[keys[i]];
    if (!next.IsDefined() || next.IsNull()) {
      node[keys[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(node[keys[i]]);
    } else if (!next.IsMap()) {
      throw Error(cat(override_kind_, " '", assignment, "': '", keys[i], "' is not a map of keys"));
    }
    node.reset(next);
  }
  // A value the file shares through an alias (points: *n) is replaced here only: assigning
  // through the handle changed every use of it.
  if (YAML::Node current = node[keys.back()]; current.IsDefined() && uses_of(tree_, current) > 1) {
    node.remove(keys.back());
  }
  node[keys.back()] = value;
  overridden_[path] = assignment;
}

ConfigNode Config::root() { return ConfigNode(this, tree_, ""); }

void Config::check_no_unknown_keys() const { check_map(tree_, ""); }

void Config::check_map(const YAML::Node& node, const std::string& path) const {
  auto child = [&](const std::string& key) { return child_key_path(path, key); };
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) check_map(node[i], cat(path, "[", i, "]"));
    return;
  }
  if (!node.IsMap()) return;
  const bool free = free_maps_.count(path) > 0;
  auto known = known_keys_.find(path);
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (!free && (known == known_keys_.end() || !known->second.count(key))) {
      std::vector<std::string> valid;
      if (known != known_keys_.end()) valid.assign(known->second.begin(), known->second.end());
      std::string listing;
      for (const std::string& name : valid) listing += (listing.empty() ? "" : ", ") + name;
      // An override names the key when it set the key's value, or wrote the key on its path.
      const std::string* covering = override_covering(child(key));
      const std::vector<std::string> below = overrides_below(child(key));
      const std::string* text = covering ? covering : below.empty() ? nullptr : &below.front();
      // YAML 1.1 readers (PyYAML) take the key `on:` for the boolean true; a config made from what
      // they read says "true" where it meant "on".
      const bool boolean_on = key == "true" && std::count(valid.begin(), valid.end(), "on") > 0;
      const std::string hint =
          boolean_on ? " (did you mean 'on'? PyYAML reads the key `on:` as true)" : did_you_mean(key, valid);
      throw Error(cat(text ? override_kind_ + " '" + *text + "'" : location(source_, entry.first.Mark()),
                      ": unknown key '", key, "' in ", display(path), hint,
                      listing.empty() ? "" : "; valid keys: " + listing));
    }
    // A section nobody read (known but unread) is not inspected further. A list of sections is
    // known by its entries' paths (data.test[0]).
    const std::string below = child(key);
    const bool read_entries = entry.second.IsSequence() && known_keys_.count(cat(below, "[0]")) > 0;
    if (free || known_keys_.count(below) || free_maps_.count(below) || read_entries) check_map(entry.second, below);
  }
}

YAML::Node Config::without_derived(const YAML::Node& node) const {
  if (!node.IsMap() && !node.IsSequence()) return YAML::Clone(node);
  YAML::Node copy(node.IsMap() ? YAML::NodeType::Map : YAML::NodeType::Sequence);
  copy.SetStyle(node.Style());
  copy.SetTag(node.Tag());
  if (node.IsSequence()) {
    for (const auto& element : node) copy.push_back(without_derived(element));
    return copy;
  }
  for (const auto& entry : node) {
    const bool derived = std::ranges::any_of(derived_, [&](const auto& written) {
      return written.first.is(node) && written.second == entry.first.Scalar();
    });
    if (!derived) copy.force_insert(YAML::Clone(entry.first), without_derived(entry.second));
  }
  return copy;
}

std::string Config::resolved() const {
  if (derived_.empty()) return resolved_with_derived();
  YAML::Emitter out;
  out << without_derived(tree_);
  return out.c_str();
}

std::string Config::resolved_with_derived() const {
  YAML::Emitter out;
  out << tree_;
  return out.c_str();
}

std::string Config::hash() const { return hex_digits(fnv1a(resolved())); }

}  // namespace eddy::io
