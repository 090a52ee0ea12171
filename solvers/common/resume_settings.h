#pragma once
// What `--resume` may change in a run's config. A checkpoint records the settings of the run that
// wrote it: every value of the resolved config except the training settings its solver lets a
// resumed run change (learning rate, step counts, schedule, logging, checkpoint and validation
// cadence, where the results go). A resumed run whose config differs in a recorded value is
// refused, naming the key, before the checkpoint is loaded: it would go on training another model
// or another problem than the checkpoint's.

#include <map>
#include <string>
#include <vector>

#include "eddy/io/checkpoint.h"
#include "eddy/io/config.h"

namespace eddy::solvers {

// Key paths ("training.adam.learning_rate") a resumed run may change; a section's path
// ("training.adam.schedule") covers every key under it.
using ResumableKeys = std::vector<std::string>;

// Key path -> value as YAML text ("64", "[1, 2]").
using Settings = std::map<std::string, std::string>;

// The values of `resolved_config` that a resumed run must keep: all but those `resumable` names.
Settings fixed_settings(const std::string& resolved_config, const ResumableKeys& resumable);

// The settings that the defaults derived from other keys (io::ConfigNode::derived_integer) add to
// config.resolved(), or change in it (a list holding one): what checkpoints record besides it, as
// resolved configs before held them, and what a run folder's config.yaml implies besides its text.
Settings derived_settings(const io::Config& config);

// Whether a resumed run may change `key` (it lies at or below one of `resumable`), and `settings`
// without the keys it may change.
bool is_resumable(const std::string& key, const ResumableKeys& resumable);
Settings without_resumable(const Settings& settings, const ResumableKeys& resumable);

// Settings as one text (checkpoint metadata), and back; text that is not such a map is an error
// naming `checkpoint`.
std::string encode_settings(const Settings& settings);
Settings decode_settings(const std::string& text, const std::string& checkpoint);

// Throws, naming the first key whose value differs and what may change, when the settings of the
// run that wrote `checkpoint` are not those of this run.
void check_same_settings(const Settings& checkpoint_run, const Settings& this_run, const ResumableKeys& resumable,
                         const std::string& checkpoint);

// Throws, naming the keys, when the checkpoint of the run folder `run_dir` records values its
// config.yaml does not have (compared on the keys both hold; `derived` is derived_settings of that
// config.yaml as read, less those `resumable` names, which a resume may have changed): a run
// started without --resume writes config.yaml at once and its first checkpoint later, so one
// stopped in between left the earlier run's weights beside a config they were not trained with,
// and export, eval and generate used them together (a parameter of the new config times the old
// weights).
void require_checkpoint_of_config(const std::string& run_dir, const std::string& checkpoint_settings,
                                  const Settings& derived, const ResumableKeys& resumable);

// The checkpoint of the run folder `run_dir` loaded into `model` (the optimiser's part into
// `optimizer_state` when given) once require_checkpoint_of_config accepts it: loading first
// refused an earlier run's checkpoint of other shapes for its shapes alone.
io::CheckpointInfo load_run_checkpoint(const std::string& run_dir, const Settings& derived,
                                       const ResumableKeys& resumable, nn::Module& model,
                                       nn::StateDict* optimizer_state = nullptr);

}  // namespace eddy::solvers
