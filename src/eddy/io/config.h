#pragma once
// YAML configuration files with validation that points at the source.
//
// The code that reads a config is its schema: every key it asks for (required or optional) is
// recorded as valid for its map, and after reading, Config::check_no_unknown_keys() rejects any
// key that nobody asked for, suggesting the nearest valid one. Errors carry the file, line and
// column, and the key path:
//
//   burgers.yaml:14:5: train.adam.lr: expected a number, got 'fast'
//   burgers.yaml:9:3: unknown key 'trian' (did you mean 'train'?)
//
// Defaults that reading falls back on are written into the tree, so resolved() is the complete
// problem as run, except defaults derived from other keys (ConfigNode::derived_integer): those stay
// out, so that a run's config.yaml read again with the other key changed derives them afresh.
// Command-line overrides ("model.width=64") are applied before reading, and errors in them name the
// override instead of a line.
//
// Files a config reads (data files, references, tokenizers: as_input_path) are found relative to
// the config file's folder, so a problem finds its data wherever it is run from; a path given in a
// command-line override is relative to the working directory, where the user typed it. Either is
// written back absolute, so resolved() (a run folder's config.yaml) names the file that was read.
// A leading "~/" is the home folder, as in a shell: a YAML value or an override such as
// output.dir=~/runs never passes through the shell's own expansion.

#include <yaml-cpp/yaml.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace eddy::io {

class Config;

// The shortest text that reads back as the same double: yaml-cpp's own wrote 0.1 as
// 0.10000000000000001 in resolved configs and messages, and ostream's 6 digits lose the rest.
std::string shortest_text(double value);

// Whether a YAML text holds comments (YAML drops them, so the text holds more '#' than its document
// written out again); false for text that is not YAML. A config eddy writes never holds one.
bool holds_yaml_comments(const std::string& text);

// A node of the config, addressed by its key path. Cheap to copy.
class ConfigNode {
 public:
  ConfigNode(const ConfigNode&) = default;
  // Assigning a YAML::Node writes into the tree it refers to, so assigning a ConfigNode would
  // overwrite the other key's value (a std::stable_partition of two nodes copied one key's value
  // into the other's place in the resolved config).
  ConfigNode& operator=(const ConfigNode&) = delete;
  const std::string& path() const { return path_; }
  // "file:line:col: path: " (or "override 'a=b': path: "), the prefix of every error about it.
  std::string where() const;
  // where() without the path: for messages that name their own key below this node.
  std::string position() const;
  // The override that set this node or one above it ("a.b=1"), or null when the file did.
  const std::string* override_text() const;
  [[noreturn]] void fail(const std::string& message) const;
  // Fails when `bytes` exceed the memory this process can use (core/memory.h), before a size read
  // here is allocated: "<what> need at least 8.00 TiB; this machine has 23.5 GiB".
  void require_memory(const std::string& what, double bytes) const;

  bool is_map() const { return node_.IsMap(); }
  bool is_scalar() const { return node_.IsScalar(); }
  bool is_sequence() const { return node_.IsSequence(); }

  // Map access. Each call records `key` as valid here.
  bool has(const std::string& key) const;
  ConfigNode at(const std::string& key) const;  // error when missing
  std::optional<ConfigNode> find(const std::string& key) const;
  // A map child that may be absent: then created empty, so the defaults read from it are recorded.
  ConfigNode section(const std::string& key) const;
  // Keys of a map whose keys are names chosen by the user (fields, conditions); all are valid.
  std::vector<std::string> keys() const;
  // Sequence access.
  std::vector<ConfigNode> elements() const;

  // Scalar conversions with type errors.
  double as_number() const;
  int64_t as_integer() const;
  bool as_bool() const;
  std::string as_string() const;
  std::vector<double> as_numbers() const;  // a sequence of numbers (a single number is one)
  // A path of a file to read, absolute (see the top of this file); "" stays "" (no file).
  std::string as_input_path() const;
  // A glob pattern of files to read, made absolute as as_input_path makes a path, the folder put
  // in front escaped so that its own * ? [ ] are literal (a config in "exp[1]" read exp1's files).
  std::string as_input_pattern() const;
  // A path to write, with a leading "~/" expanded and otherwise as given (relative paths stay
  // relative to the working directory).
  std::string as_output_path() const;
  // One of `choices`, with the valid ones listed in the error.
  std::string as_choice(const std::vector<std::string>& choices) const;

  // Typed lookups; the defaulted forms write the default into the tree when the key is absent.
  double number(const std::string& key) const { return at(key).as_number(); }
  double number(const std::string& key, double fallback) const;
  int64_t integer(const std::string& key) const { return at(key).as_integer(); }
  int64_t integer(const std::string& key, int64_t fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  // Sequences: absent, `fallback` is written into the tree as its value.
  std::vector<double> numbers(const std::string& key, const std::vector<double>& fallback) const;
  ConfigNode sequence(const std::string& key, const std::vector<std::string>& fallback) const;
  std::string string(const std::string& key) const { return at(key).as_string(); }
  std::string string(const std::string& key, const std::string& fallback) const;
  std::string input_path(const std::string& key) const { return at(key).as_input_path(); }
  std::string input_path(const std::string& key, const std::string& fallback) const;
  // Defaults computed from other keys (L-BFGS's evaluation cap from its iterations, a test set's
  // file from data.file): read as the forms above, but left out of resolved(), since a run's
  // config.yaml read again with `model.heads=8` kept the first run's kv_heads, silently.
  // Config::resolved_with_derived() holds them, for checkpoints to record.
  int64_t derived_integer(const std::string& key, int64_t fallback) const;
  double derived_number(const std::string& key, double fallback) const;
  std::string derived_input_path(const std::string& key, const std::string& fallback) const;
  std::string choice(const std::string& key, const std::vector<std::string>& choices,
                     const std::string& fallback) const;
  // The same, as the enum value a name stands for, so a config string becomes an enum once,
  // where it is read, and a misspelt one fails there with the names listed.
  template <typename Enum>
    requires std::is_enum_v<Enum>
  Enum choice(const std::string& key, const std::vector<std::pair<std::string, Enum>>& choices, Enum fallback) const;
  template <typename Enum>
    requires std::is_enum_v<Enum>
  Enum as_choice(const std::vector<std::pair<std::string, Enum>>& choices) const;

 private:
  friend class Config;
  std::string resolve_input(bool pattern) const;  // as_input_path, or as_input_pattern

  ConfigNode(Config* config, YAML::Node node, std::string path)
      : config_(config), node_(std::move(node)), path_(std::move(path)) {}
  std::string child_path(const std::string& key) const;
  ConfigNode at_unchecked(const std::string& key) const;
  // Records a default in the tree (a Node is a handle, so this writes through a copy).
  template <typename T>
  void write_default(const std::string& key, const T& value) const {
    record_default(key);
    YAML::Node node = node_;
    if constexpr (std::is_floating_point_v<T>) {
      node[key] = shortest_text(value);
    } else if constexpr (std::is_same_v<T, std::vector<double>>) {
      YAML::Node sequence(YAML::NodeType::Sequence);
      for (double element : value) sequence.push_back(shortest_text(element));
      node[key] = sequence;
    } else {
      node[key] = value;
    }
  }
  void require_map() const;
  void record_derived(const std::string& key) const;
  // Notes that the default of `key` was written, which the user did not give.
  void record_default(const std::string& key) const;

  Config* config_;
  YAML::Node node_;
  std::string path_;
};

class Config {
 public:
  // What relative input paths (ConfigNode::as_input_path) in the file are relative to: its folder,
  // or the working directory, for a run folder's config.yaml written before paths were resolved
  // (it holds them as the run read them, relative to where it ran; newer ones are absolute).
  enum class RelativePaths { config_folder, working_directory };

  // Parses `path` (YAML syntax errors carry line and column) and applies overrides of the form
  // "a.b.c=value" (value in YAML syntax: 64, 1e-3, [1, 2], text).
  // `overrides_are` names them in errors: "command-line override 'a=1'", or "override" for those a
  // program passes (a Python dict).
  static std::unique_ptr<Config> load(const std::string& path, const std::vector<std::string>& overrides = {},
                                      RelativePaths relative_paths = RelativePaths::config_folder,
                                      const std::string& overrides_are = "command-line override");
  // A config that is not a file (a Python dict, a test's text): relative paths are taken from the
  // working directory.
  static std::unique_ptr<Config> parse(const std::string& text, const std::string& source,
                                       const std::vector<std::string>& overrides = {},
                                       const std::string& overrides_are = "command-line override");

  ConfigNode root();
  const std::string& source() const { return source_; }
  // Throws for the first key no reader asked about, suggesting the nearest valid key.
  void check_no_unknown_keys() const;
  // The config as run: overrides applied, defaults filled in, except those derived from other keys.
  std::string resolved() const;
  // resolved() with the derived defaults too, where they were read: the text resolved() was before
  // they were left out, so checkpoints record the same settings as then.
  std::string resolved_with_derived() const;
  // A stable hash of resolved(), for checkpoints and outputs.
  std::string hash() const;

 private:
  friend class ConfigNode;
  Config(std::string source, YAML::Node tree) : source_(std::move(source)), tree_(std::move(tree)) {}
  void apply_override(const std::string& assignment);
  void check_map(const YAML::Node& node, const std::string& path) const;
  // A copy of `node` without the derived defaults written into it or below.
  YAML::Node without_derived(const YAML::Node& node) const;
  // The override that set `path` or a value it lies in ("a.b={c: 1}" for a.b.c), or null.
  const std::string* override_covering(const std::string& path) const;
  // The overrides that set keys below `path` ("a.b.c=1" below a), quoted and separated by commas.
  std::vector<std::string> overrides_below(const std::string& path) const;

  std::string source_;
  std::string folder_;  // what the file's relative input paths start from; empty: the working directory
  YAML::Node tree_;
  std::map<std::string, std::set<std::string>> known_keys_;  // map path -> keys asked for
  std::set<std::string> free_maps_;                          // maps whose keys are user names
  std::map<std::string, std::string> overridden_;            // key path -> override text
  std::vector<std::pair<YAML::Node, std::string>> derived_;  // (map, key) of each derived default
  std::set<std::string> defaulted_;                          // key paths whose defaults were written
  std::string override_kind_ = "command-line override";     // what errors call an override
};

namespace config_detail {

template <typename Enum>
std::vector<std::string> names(const std::vector<std::pair<std::string, Enum>>& choices) {
  std::vector<std::string> all;
  for (const auto& choice : choices) all.push_back(choice.first);
  return all;
}

template <typename Enum>
Enum value_named(const std::vector<std::pair<std::string, Enum>>& choices, const std::string& name) {
  for (const auto& [choice, value] : choices) {
    if (choice == name) return value;
  }
  return choices.front().second;  // not reached: `name` was checked against the choices
}

}  // namespace config_detail

template <typename Enum>
  requires std::is_enum_v<Enum>
Enum ConfigNode::choice(const std::string& key, const std::vector<std::pair<std::string, Enum>>& choices,
                        Enum fallback) const {
  std::string fallback_name;
  for (const auto& [name, value] : choices) {
    if (value == fallback && fallback_name.empty()) fallback_name = name;
  }
  return config_detail::value_named(choices, choice(key, config_detail::names(choices), fallback_name));
}

template <typename Enum>
  requires std::is_enum_v<Enum>
Enum ConfigNode::as_choice(const std::vector<std::pair<std::string, Enum>>& choices) const {
  return config_detail::value_named(choices, as_choice(config_detail::names(choices)));
}

}  // namespace eddy::io
