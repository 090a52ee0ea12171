#include "solvers/common/file_kind.h"

#include "eddy/core/error.h"

namespace eddy::solvers {
namespace {

struct KindInfo {
  std::string_view noun;      // "a PINN problem"
  std::string_view evidence;  // "it has `geometry`"
  std::string_view command;   // the command that reads it
  std::string_view function;  // the Python function that does
};

KindInfo info(FileKind kind) {
  switch (kind) {
    case FileKind::pinn: return {"a PINN problem", "it has `geometry`", "eddy solve", "eddy.solve"};
    case FileKind::operator_training:
      return {"a neural-operator run", "its `data` names a `train` split", "eddy train", "eddy.train"};
    case FileKind::dataset: return {"a dataset to generate", "it names a `solver`", "eddy generate", "eddy.generate"};
    case FileKind::language_model:
      return {"a language-model run", "it has a `tokenizer` or its `data` names text `files`", "eddy lm train",
              "eddy.lm.train"};
    case FileKind::unrecognised: break;
  }
  return {"a file of no kind eddy reads", "", "", ""};
}

// The kind from a lookup of `section` (or of `section`.`key`, where `key` is given). Only a
// language model's file has a tokenizer section, so a misspelt data.files still reads as one (any
// `data` without `files` was taken for an operator run's, and the error sent the user to
// `eddy train`).
template <typename Has>
FileKind kind_from(const Has& has) {
  if (has("geometry", "")) return FileKind::pinn;
  if (has("solver", "")) return FileKind::dataset;
  if (has("tokenizer", "") || has("data", "files")) return FileKind::language_model;
  return has("data", "train") ? FileKind::operator_training : FileKind::unrecognised;
}

}  // namespace

FileKind kind_of_settings(const std::map<std::string, std::string>& settings) {
  return kind_from([&](std::string_view section, std::string_view key) {
    const std::string path = key.empty() ? std::string(section) : cat(section, ".", key);
    for (auto at = settings.lower_bound(path); at != settings.end() && at->first.starts_with(path); ++at) {
      if (at->first.size() == path.size() || at->first[path.size()] == '.') return true;
    }
    return false;
  });
}

FileKind file_kind(const io::Config& config) {
  // A copy to look at: asking the config read for real would mark these keys as valid there.
  io::Config look = config;
  const io::ConfigNode root = look.root();
  return kind_from([&](std::string_view section_name, std::string_view key) {
    if (!root.has(std::string(section_name))) return false;
    const io::ConfigNode section = root.at(std::string(section_name));
    return key.empty() || (section.is_map() && section.has(std::string(key)));
  });
}

void require_kind(const io::Config& config, FileKind wanted, std::string_view reader_name, Reader reader) {
  const FileKind kind = file_kind(config);
  if (kind == wanted || kind == FileKind::unrecognised) return;
  const KindInfo found = info(kind);
  const std::string instead = reader == Reader::python ? cat("`", found.function, "`")
                                                       : cat("`", found.command, " ", config.source(), "`");
  throw Error(cat(reader_name, ": ", config.source(), " is ", found.noun, " (", found.evidence, "), not ",
                  info(wanted).noun, "; run it with ", instead));
}

void require_same_kind_to_resume(const std::map<std::string, std::string>& checkpoint_settings,
                                 const std::map<std::string, std::string>& this_run, const std::string& run_dir) {
  const FileKind earlier = kind_of_settings(checkpoint_settings), now = kind_of_settings(this_run);
  if (earlier == now || earlier == FileKind::unrecognised || now == FileKind::unrecognised) return;
  throw Error(cat("--resume: ", run_dir, " holds a run of `", info(earlier).command, "` (", info(earlier).noun,
                  "), and this is `", info(now).command, "` (", info(now).noun, "); resume that run with `",
                  info(earlier).command, "` (", info(earlier).function, " in Python), or give this one another ",
                  "output.dir"));
}

}  // namespace eddy::solvers
