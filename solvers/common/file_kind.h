#pragma once
// The kinds of YAML file eddy reads, told apart by their top-level keys: a PINN problem has
// `geometry`, a dataset for `eddy generate` names its `solver`, a language model has a `tokenizer`
// section or reads a text corpus (`data.files`), and an operator run reads HDF5 splits (its `data`
// has a `train` split). A file with
// none of these is unrecognised; `eddy check` takes it for a PINN problem, whose reader then
// names the missing `geometry`.

#include <map>
#include <string>
#include <string_view>

#include "eddy/io/config.h"

namespace eddy::solvers {

enum class FileKind { pinn, operator_training, dataset, language_model, unrecognised };

FileKind file_kind(const io::Config& config);

// Who reads the file: the `eddy` command or the Python module, whose refusals name their own
// entry points.
enum class Reader { command_line, python };

// Refuses a file of a recognised kind other than `wanted`, naming what reads it (`eddy train`,
// eddy.train): `eddy solve` on an operator file would otherwise report that `geometry` is missing.
void require_kind(const io::Config& config, FileKind wanted, std::string_view reader_name,
                  Reader reader = Reader::command_line);

// The kind of a run from its settings (key paths to values, as resume_settings.h keeps them).
FileKind kind_of_settings(const std::map<std::string, std::string>& settings);

// Refuses a --resume from a checkpoint whose recorded settings (key paths to values, as
// resume_settings.h keeps them) are of another kind than this run's: they differ in every key
// then, and the refusal listed them all without saying that `run_dir` holds another command's run.
void require_same_kind_to_resume(const std::map<std::string, std::string>& checkpoint_settings,
                                 const std::map<std::string, std::string>& this_run, const std::string& run_dir);

}  // namespace eddy::solvers
