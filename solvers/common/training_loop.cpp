#include "solvers/common/training_loop.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>

#include "eddy/core/error.h"
#include "eddy/core/fingerprint.h"
#include "eddy/core/suggest.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/dist/dtensor.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/checkpoint.h"
#include "eddy/io/config.h"
#include "eddy/io/hdf5.h"
#include "eddy/ops/ops.h"
#include "solvers/common/file_kind.h"
#include "solvers/common/run_files.h"
#include "solvers/common/thread_tuner.h"

namespace eddy::solvers {

std::string loss_text(double loss) { return std::isnan(loss) ? std::string("NaN") : cat(loss); }

namespace {

// Whether this rank's `value` is not rank 0's (collective).
bool differs_from_rank_0(dist::Communicator& comm, int64_t value) {
  Tensor root_value = tensor(std::vector<int64_t>{value});
  if (comm.size() > 1) comm.broadcast(root_value, 0);
  return root_value.item<int64_t>() != value;
}

// Throws on every rank, naming `what`, unless `value` is rank 0's on every rank: ranks started
// with different configs, or resuming from different steps, went on to exchange tensors of
// different sizes (a corrupted heap) or to wait in collectives the others never reached.
void require_same_on_every_rank(dist::Communicator& comm, int64_t value, const std::string& what) {
  const bool differs = differs_from_rank_0(comm, value);
  const int64_t differing = dist::ranks_where(differs, comm);
  EDDY_CHECK(differing == 0, what, " (", differing, " of the ", comm.size(), " ranks differ from rank 0",
             differs ? ", this one among them" : "", ")");
}

// The run folder's lock: an advisory lock (flock) on the folder itself, or -1 when another run
// holds it. Two runs writing one folder left a config.yaml of one beside the checkpoint and
// results of the other, both reporting success.
int lock_run_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  EDDY_CHECK(fd >= 0, "cannot open the run folder ", dir, ": ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The settings of the config.yaml in `dir`, where there is one that reads as YAML.
std::optional<Settings> folder_config_settings(const std::string& dir) {
  try {
    return fixed_settings(io::read_file(dir + "/config.yaml"), {});
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Settings settings_of(const TrainingRun& run) {
  Settings settings = fixed_settings(run.resolved_config, run.resumable);
  // Over the config's own: a list that holds a derived default is recorded as a whole, with it. Not
  // those a resume may change (lbfgs.evaluations), which made run folders seem another run's.
  for (const auto& [key, value] : without_resumable(run.recorded, run.resumable)) settings.insert_or_assign(key, value);
  return settings;
}

// Refuses, naming the key, a --resume from `checkpoint` (whose metadata is `info`) that would go on
// with another run's settings.
void check_resumable(const TrainingRun& run, const Settings& settings, const std::string& checkpoint,
                     const io::CheckpointInfo& info) {
  if (!info.settings.empty()) {
    Settings recorded = decode_settings(info.settings, checkpoint);
    require_same_kind_to_resume(recorded, settings, run.dir);
    recorded.insert(run.added_later.begin(), run.added_later.end());  // keeps what it records
    check_same_settings(recorded, settings, run.resumable, checkpoint);
    return;
  }
  // Written before checkpoints recorded their settings: only the same config can resume it, and
  // the folder's config.yaml says which command's run it is (without one, the hash below
  // refuses another config all the same).
  if (const std::optional<Settings> earlier = folder_config_settings(run.dir)) {
    require_same_kind_to_resume(*earlier, settings, run.dir);
  }
  EDDY_CHECK(info.config_hash == run.config_hash, "--resume: ", checkpoint, " was written by a different config (hash ",
             info.config_hash, ", this run ", run.config_hash, "); start a new run or use the same overrides");
}

}  // namespace

// Where a rank differs, rank 0 sends its settings so that each names the keys that do: the hash
// alone said only how many ranks differed.
void require_same_config_on_every_rank(dist::Communicator& comm, const std::string& config_hash,
                                       const std::string& resolved_config, bool eager) {
  const std::string mode = eager ? "given" : "not given";
  const bool differs = differs_from_rank_0(comm, static_cast<int64_t>(fnv1a(config_hash + "\n--eager " + mode)));
  const int64_t differing = dist::ranks_where(differs, comm);
  if (differing == 0) return;
  Settings mine = fixed_settings(resolved_config, {});
  mine["--eager"] = mode;
  const Settings root = decode_settings(text_of_rank_0(comm, encode_settings(mine)), "rank 0's config");
  std::string keys;
  for (const auto& [key, value] : mine) {
    const auto there = root.find(key);
    if (there == root.end() || there->second != value) {
      keys += cat(keys.empty() ? "" : "; ", key, " is ", value, there == root.end() ? " here and not set on rank 0"
                                                                                   : cat(" here and ", there->second, " on rank 0"));
    }
  }
  for (const auto& [key, value] : root) {
    if (!mine.count(key)) keys += cat(keys.empty() ? "" : "; ", key, " is ", value, " on rank 0 and not set here");
  }
  throw Error(cat("the ranks were started with different configs", differs && !keys.empty() ? ": " + keys : "",
                  " (", differing, " of the ", comm.size(), " ranks differ from rank 0",
                  differs ? ", this one among them" : "", "); start every rank with the same file and overrides"));
}

void check_resume(const TrainingRun& run) {
  const std::string checkpoint = checkpoint_path(run.dir);
  check_resumable(run, settings_of(run), checkpoint, io::checkpoint_info(checkpoint));
}

std::string text_of_rank_0(dist::Communicator& comm, const std::string& text) {
  Tensor length = tensor(std::vector<int64_t>{static_cast<int64_t>(text.size())});
  comm.broadcast(length, 0);
  std::vector<int32_t> codes(static_cast<size_t>(length.item<int64_t>()));
  for (size_t i = 0; comm.rank() == 0 && i < codes.size(); ++i) codes[i] = static_cast<unsigned char>(text[i]);
  Tensor sent = tensor(codes);
  comm.broadcast(sent, 0);
  std::string received;
  for (int32_t code : sent.to_vector<int32_t>()) received += static_cast<char>(code);
  return received;
}

std::string checkpoint_path(const std::string& dir) { return dir + "/checkpoint.safetensors"; }

std::string default_export_dir(const std::string& dir) { return dir + "/export"; }

std::string default_hf_export_dir(const std::string& dir) { return dir + "/hf"; }

void refuse_export_while_a_run_holds(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // no folder: the export's own checks say what is missing
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
  ::close(fd);
  EDDY_CHECK(!held, "export: ", dir, " is being written by a run; export it once that run has ended");
}

std::vector<std::string> remove_earlier_outputs(const std::string& dir, const std::string& names) {
  namespace fs = std::filesystem;
  const std::regex pattern(names);
  std::vector<std::string> removed;
  std::error_code ignored;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ignored)) {
    const std::string name = entry.path().filename().string();
    // A device or pipe named like a result is left alone: refused where the run writes it, if it does.
    const bool special = !entry.is_regular_file(ignored) && !entry.is_directory(ignored);
    if (std::regex_match(name, pattern) && !special && fs::remove(entry.path(), ignored)) removed.push_back(name);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

namespace {

// The default exports of the run in `dir` (export/, hf/), which would give its old weights' values:
// their files, and the folder where nothing else is left in it (a whole hf/ went, with the model
// card and plots a user had put there). A link named so is removed itself, its target left alone
// (an export published elsewhere and linked in); a file named so is not an export and stays. The
// names of the exports removed.
std::vector<std::string> remove_stale_exports(const std::string& dir) {
  std::vector<std::string> removed;
  const std::pair<std::string, const std::vector<std::string>*> exports[] = {
      {default_export_dir(dir), &kExportFiles}, {default_hf_export_dir(dir), &kHfExportFiles}};
  for (const auto& [stale_export, files] : exports) {
    const std::string name = std::filesystem::path(stale_export).filename().string() + "/";
    std::error_code error;
    if (std::filesystem::is_symlink(stale_export, error)) {
      std::filesystem::remove(stale_export, error);
      EDDY_CHECK(!error, "cannot remove the link ", stale_export, " (", error.message(), ")");
      removed.push_back(name);
      continue;
    }
    if (!std::filesystem::is_directory(stale_export, error)) continue;
    bool any = false;
    for (const std::string& file_name : *files) {
      const std::string file = (std::filesystem::path(stale_export) / file_name).string();
      io::remove_abandoned_temporaries_of(file);
      any = std::filesystem::remove(file, error) || any;
      EDDY_CHECK(!error, "cannot remove ", file, ", of the export of weights this run changes (", error.message(), ")");
    }
    if (std::filesystem::is_empty(stale_export, error)) std::filesystem::remove(stale_export, error);
    if (any) removed.push_back(name);
  }
  return removed;
}

}  // namespace

// Once this run holds the folder (a run refused as concurrent had removed the other's export).
void TrainingLoop::remove_earlier_run() {
  // At once, so that none sits beside the new checkpoint when the new run stops early (a kill, a
  // non-finite loss) and is read as its own: this command's results, and those of the command
  // whose config.yaml the folder holds (run_files.h).
  std::string patterns = result_files_of(kind_of_settings(settings_));
  const std::optional<Settings> earlier_settings = folder_config_settings(run_.dir);
  const std::string earlier = earlier_settings ? result_files_of(kind_of_settings(*earlier_settings)) : "";
  if (!earlier.empty() && earlier != patterns) patterns += (patterns.empty() ? "" : "|") + earlier;
  std::vector<std::string> removed;
  // Its checkpoint too: kept until the new run's first one, it sat beside what the new run had
  // already written (a language model's tokenizer and token files) when that run stopped before,
  // and generate, export and --resume read the two as one run.
  if (io::remove_stale_file(checkpoint_, "output.dir: the checkpoint of the run this one writes over")) {
    removed.push_back(std::filesystem::path(checkpoint_).filename().string());
  }
  if (!patterns.empty()) {
    const std::vector<std::string> results = remove_earlier_outputs(run_.dir, patterns);
    removed.insert(removed.end(), results.begin(), results.end());
  }
  const std::vector<std::string> exports = remove_stale_exports(run_.dir);
  removed.insert(removed.end(), exports.begin(), exports.end());
  const std::string names = comma_separated(removed);
  progress_.warn(cat(run_.dir, " holds a run; this one starts anew and writes over it (--resume continues a run); "
                     "removed its checkpoint, results and exports: ", names));
}

TrainingLoop::~TrainingLoop() {
  if (folder_lock_ >= 0) ::close(folder_lock_);
}

TrainingLoop::TrainingLoop(TrainingRun run, nn::Module& model, std::vector<Tensor> trainable, dist::Communicator& comm,
                           ProgressLine& progress, TrainingHooks hooks)
    : run_(std::move(run)),
      checkpoint_(checkpoint_path(run_.dir)),
      settings_(settings_of(run_)),
      model_(model),
      trainable_(std::move(trainable)),
      comm_(comm),
      progress_(progress),
      hooks_(std::move(hooks)) {}

int64_t TrainingLoop::start() {
  if (const int signal = interrupt_signal(comm_)) throw InterruptedBeforeTraining(signal);
  int64_t step = 0;
  if (run_.resume) {
    nn::StateDict saved;
    auto check = [&](const io::CheckpointInfo& info) { check_resumable(run_, settings_, checkpoint_, info); };
    step = io::resume_from_checkpoint(checkpoint_, check, model_, saved).step;
    EDDY_CHECK(!run_.length || step <= run_.length->steps, "--resume: ", checkpoint_, " is at ", run_.length->unit, " ",
               step, ", past this run's end (", run_.length->steps, ": ", run_.length->keys, "); raise it to train on "
               "from there");
    // The optimiser's state and the rest come from the checkpoint too: a key missing or of
    // another shape there is the file's fault, so the error names it, as the model's do.
    try {
      hooks_.restore(saved);
    } catch (const Error& e) {
      throw Error(cat(checkpoint_, ": ", e.what()));
    }
    if (hooks_.check_resumed_step) hooks_.check_resumed_step(step);
  }
  require_same_on_every_rank(comm_, step, cat("--resume: the ranks resume from different steps (this one from ",
                                              step, " in ", checkpoint_, "); give every rank the same checkpoint"));
  saved_ = run_.resume;
  const bool writes_over = !run_.resume && comm_.rank() == 0 && std::filesystem::exists(checkpoint_);
  if (comm_.rank() == 0) {
    // A file system error still (Python raises it as the OSError of its errno), naming the key.
    std::error_code error;
    std::filesystem::create_directories(run_.dir, error);
    if (error) {
      throw std::filesystem::filesystem_error(cat("output.dir ", run_.dir, ": cannot make the run folder"), error);
    }
    folder_lock_ = lock_run_folder(run_.dir);
  }
  Tensor held = tensor(std::vector<int64_t>{comm_.rank() == 0 ? int64_t{folder_lock_ >= 0} : 0});
  if (comm_.size() > 1) comm_.broadcast(held, 0);
  EDDY_CHECK(held.item<int64_t>() == 1, run_.dir, " is being written by another run; wait for it to end, or give "
             "this run another output.dir");
  // The run writes its resolved config as config.yaml. One there with comments, which eddy never
  // writes, is someone's own config (often the one being read), and lost them. A run's own
  // config.yaml is run again or resumed from, with overrides or without.
  const std::string written_config = run_.dir + "/config.yaml";
  std::error_code ignored;
  const bool commented_config = comm_.rank() == 0 && !std::filesystem::is_symlink(written_config, ignored) &&
                                std::filesystem::is_regular_file(written_config, ignored) &&
                                io::holds_yaml_comments(io::read_file(written_config));
  const bool being_read = std::filesystem::equivalent(run_.config_file, written_config, ignored);
  EDDY_CHECK(dist::ranks_where(commented_config, comm_) == 0, "output.dir ", run_.dir, " holds a config.yaml with "
             "comments", being_read ? " (the config being read)" : "", ", which a run writes over with its resolved "
             "config: keep that config under another name", being_read && run_.resume ? "" : ", or give the run "
             "another output.dir");
  // Likewise the results file: eddy marks its own with the config's hash, and one at that name
  // without it (a data file kept in the folder) was replaced by the run's results.
  const std::string results_name = results_file_of(kind_of_settings(settings_));
  const std::string results = run_.dir + "/" + results_name;
  std::string not_a_runs;  // rank 0's reason, collected so that every rank stops together
  bool unreadable = false;
  if (comm_.rank() == 0 && !results_name.empty() && std::filesystem::exists(results, ignored)) {
    try {
      if (!io::hdf5_has_attribute(results, "/", "config_hash")) {
        not_a_runs = "that no eddy run wrote (it has no config_hash attribute)";
      }
    } catch (const Error& e) {
      not_a_runs = cat("that cannot be read (", e.what(), ")");
      unreadable = true;
    }
  }
  EDDY_CHECK(dist::ranks_where(!not_a_runs.empty(), comm_) == 0, "output.dir ", run_.dir, " holds a ", results_name,
             " ", not_a_runs.empty() ? std::string("that rank 0 cannot write over") : not_a_runs,
             ", which this run writes its results to: ",
             unreadable ? "close what has it open (an h5py.File in 'a' or 'w' mode), or move it" :
                          "keep that file under another name", ", or give the run another output.dir");
  if (writes_over) remove_earlier_run();
  // A resumed run moves the checkpoint's weights on: their exports stayed and gave the old values.
  if (run_.resume && comm_.rank() == 0 && (!run_.length || step < run_.length->steps)) {
    const std::string names = comma_separated(remove_stale_exports(run_.dir));
    if (!names.empty()) progress_.warn(cat("--resume: removed the exports of the checkpoint's weights, which this "
                                           "run trains on (export them again after it): ", names));
  }
  // The ranks write the results' HDF5 file together: a rank that cannot see the folder (on a disk
  // of its own node, or a relative path from another working directory) is found now, not after
  // training, when the file is created (io/hdf5.cpp refuses it there too).
  const bool missing = !std::filesystem::is_directory(run_.dir);
  EDDY_CHECK(dist::ranks_where(missing, comm_) == 0, "the output folder ", run_.dir, " that rank 0 created is not "
             "there ", missing ? cat("on rank ", comm_.rank()) : std::string("on another rank"),
             "; give output.dir a path on a file system every rank shares (not a node's local disk)");
  if (comm_.rank() == 0) {
    io::remove_abandoned_temporaries_in(run_.dir);  // an LM run's data/ too
    // The run's own record: a link there is replaced, not written through (into the file it names).
    if (std::filesystem::is_symlink(written_config, ignored)) std::filesystem::remove(written_config, ignored);
    io::write_file_atomically(written_config, run_.resolved_config);
  }
  dist::broadcast_tensors(trainable_, comm_);
  return step;
}

std::optional<NonFiniteStop> TrainingLoop::run(int64_t& step, int64_t total, int64_t checkpoint_every) {
  bool checkpoint_due = false;
  progress_.begin_phase(step);
  ThreadTuner tuner;
  for (; step < total && interrupted_ == 0; ++step) {
    tuner.begin_step();
    if (hooks_.begin_step) hooks_.begin_step(step);
    for (int64_t update = 0; update < hooks_.updates_per_step; ++update) {
      const double loss = hooks_.evaluate(step, update);
      if (!std::isfinite(loss)) {
        return NonFiniteStop{step, loss, stop_message(hooks_.describe_stop(step, update, loss), updated_)};
      }
      if (checkpoint_due) {
        if (auto stopped = save(step)) {
          stopped->loss = loss;  // finite: the state overflowed, not the loss
          return stopped;
        }
      }
      checkpoint_due = false;
      hooks_.apply();
      updated_ = true;
    }
    const int64_t done = step + 1;
    if (hooks_.end_step) hooks_.end_step(done);
    if (const std::string note = tuner.end_step(); !note.empty()) progress_.note(note);
    checkpoint_due = checkpoint_every > 0 && done % checkpoint_every == 0;
    // After the last step the trainer finishes anyway.
    if (done < total) interrupted_ = interrupt_signal(comm_);
  }
  progress_.finish_line();
  return std::nullopt;
}

// Distributed tensors are gathered whole on every rank first (collective), so that the checkpoint
// is one process's and resumes on any number of ranks.
std::optional<NonFiniteStop> TrainingLoop::save(int64_t step) {
  const nn::StateDict model_state = dist::full_state(model_.state_dict());
  const nn::StateDict training_state = dist::full_state(hooks_.training_state());
  // Every rank holds the whole state, so all stop alike. Left to save_checkpoint, the refusal ended
  // the run as an error (exit 1, no history written) after steps whose losses were all finite.
  if (const auto name = io::non_finite_checkpoint_tensor(model_state, training_state)) {
    const std::string what = cat("at step ", step, " the training state's \"", *name,
                                 "\" holds NaN or infinite values, though the loss is finite");
    return NonFiniteStop{step, std::nan(""), stop_message(what, updated_)};
  }
  if (comm_.rank() == 0) {
    try {
      io::save_checkpoint(checkpoint_, model_state, training_state,
                          {step, run_.config_hash, "", encode_settings(settings_)});
    } catch (const Error& e) {
      // A full disk, say: the message named only the temporary file, not what the run still has.
      progress_.finish_line();
      throw Error(cat("the checkpoint of step ", step, " was not written: ", e.what(), "; ",
                      saved_ ? cat("the last good checkpoint is ", checkpoint_, ", which --resume continues from")
                             : std::string("no checkpoint was written yet")));
    }
  }
  saved_ = true;
  return std::nullopt;
}

std::string TrainingLoop::stop_message(const std::string& what, bool after_updates) {
  progress_.finish_line();
  const std::string kept =
      saved_ ? "the last good checkpoint is " + checkpoint_ : std::string("no checkpoint was written yet");
  if (!after_updates) {
    // A resumed run's parameters had a finite loss when they were saved, so this is not theirs either.
    return cat(what, "; ", kept, ". No update was made yet, so the learning rate is not the cause: check ",
               run_.suspect, " (a division by zero, a logarithm or square root of a negative number, an overflow)");
  }
  return cat(what, "; ", kept, ". Lower the learning rate or check ", run_.suspect, ".");
}

}  // namespace eddy::solvers
