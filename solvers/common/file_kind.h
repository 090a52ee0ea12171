#pragma once
// The kinds of YAML file eddy reads, told apart by their top-level keys: a PINN problem has
// `geometry`, a dataset for `eddy generate` names its `solver`, a language model has a `tokenizer`
// section or reads a text corpus (`data.files`), and an operator run reads HDF5 splits (its `data`
// has a `train` split). A file with
// none of these is unrecognised; `eddy check` takes it for a PINN problem, whose reader then
// names the missing `geometry`.

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

// Refuses a --resume into `run_dir` whose config.yaml is of another kind than this run's config
// (`resolved_config`, YAML text): the checkpoint's settings differ in every key then, and the
// refusal listed them all without saying that the folder holds another command's run.
void require_same_kind_to_resume(const std::string& run_dir, const std::string& resolved_config);

}  // namespace eddy::solvers
