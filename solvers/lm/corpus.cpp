#include "solvers/lm/corpus.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <string_view>

#include "eddy/core/error.h"
#include "eddy/core/fingerprint.h"
#include "eddy/io/atomic_file.h"
#include "eddy/ops/ops.h"

namespace eddy::lm {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'E', 'D', 'D', 'Y', 'T', 'O', 'K', 'S'};
constexpr size_t kHeaderBytes = 24;

bool has_wildcard(const std::string& pattern) { return pattern.find_first_of("*?[") != std::string::npos; }

bool excluded(const fs::path& path, const std::vector<std::string>& exclude) {
  const std::string name = path.filename().string();
  return std::any_of(exclude.begin(), exclude.end(),
                     [&](const std::string& pattern) { return fnmatch(pattern.c_str(), name.c_str(), 0) == 0; });
}

// The corpus files in reading order: each pattern's matches sorted, a file reached twice (a
// symbolic link to one already read) read once. Only a pattern with wildcards may match
// something that is not a regular file; that is skipped.
std::vector<fs::path> corpus_files(const CorpusSpec& corpus) {
  std::vector<fs::path> files;
  std::set<fs::path> seen;
  for (const std::string& pattern : corpus.files) {
    glob_t matches{};
    const int status = glob(pattern.c_str(), 0, nullptr, &matches);
    std::vector<std::string> paths(matches.gl_pathv, matches.gl_pathv + (status == 0 ? matches.gl_pathc : 0));
    globfree(&matches);
    EDDY_CHECK(!paths.empty(), corpus.where, "files: '", pattern, "' matches no file");
    bool kept = false;
    for (const std::string& path : paths) {
      std::error_code error;
      if (!fs::is_regular_file(path, error)) {
        EDDY_CHECK(has_wildcard(pattern), corpus.where, "files: '", path, "' is not a regular file");
        continue;
      }
      if (excluded(path, corpus.exclude)) continue;
      kept = true;
      if (seen.insert(fs::canonical(path)).second) files.emplace_back(path);
    }
    EDDY_CHECK(kept, corpus.where, "files: every file that '", pattern, "' matches is excluded or not a regular file");
  }
  return files;
}

// The documents of one file's text: cut at separator lines; empty documents dropped. A line that
// ends in CRLF is a separator line too (its \r is not part of the text), else a Windows file was
// one document, separators included.
void cut_documents(const std::string& text, const std::string& separator, std::vector<std::string>& documents) {
  if (separator.empty()) {
    if (!text.empty()) documents.push_back(text);
    return;
  }
  std::string current;
  std::istringstream lines(text);
  std::string line;
  auto finish = [&] {
    if (!current.empty()) documents.push_back(std::move(current));
    current.clear();
  };
  while (std::getline(lines, line)) {
    std::string_view content = line;
    if (content.ends_with('\r')) content.remove_suffix(1);
    if (content == separator) {
      finish();
    } else {
      current += line;
      current += '\n';
    }
  }
  finish();
}

bool valid_utf8(std::string_view text, size_t& bad_offset) {
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t length = lead < 0x80           ? 1
                          : (lead >> 5) == 0x6  ? 2
                          : (lead >> 4) == 0xE  ? 3
                          : (lead >> 3) == 0x1E ? 4
                                                : 0;
    bool ok = length > 0 && i + length <= text.size() && (length > 1 || lead != 0);
    for (size_t k = 1; ok && k < length; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (!ok) {
      bad_offset = i;
      return false;
    }
    i += length;
  }
  return true;
}

// What the token files were made from: when this text is unchanged they are reused. A tokenizer
// file counts by its contents: replaced at the same path, the run reused the earlier tokenizer and
// its token files.
// How eddy cuts and tokenises a corpus, in the description of the token files made so: token files
// of an earlier way are made again. 2: separator lines ending in CRLF cut documents.
constexpr int kCorpusFormat = 2;

std::string corpus_description(const LmProblem& p, const std::vector<fs::path>& files) {
  std::ostringstream text;
  text << "format " << kCorpusFormat << "\nseparator " << p.corpus.separator << "\nvalidation_fraction "
       << p.corpus.validation_fraction << "\nseed " << p.training.seed << "\ntokenizer " << p.tokenizer.file << " "
       << p.tokenizer.vocab_size << " " << p.tokenizer.min_frequency;
  if (!p.tokenizer.file.empty()) text << " " << std::hex << fnv1a(io::read_file(p.tokenizer.file)) << std::dec;
  text << "\n";
  for (const fs::path& file : files) {
    text << file.string() << " " << fs::file_size(file) << " " << fs::last_write_time(file).time_since_epoch().count()
         << "\n";
  }
  return text.str();
}

// What differs between two corpus descriptions, as the keys that set it: "training.seed, data.files
// (corpus.txt)"; empty when nothing does.
std::string corpus_changes(const std::string& before, const std::string& now) {
  auto lines_of = [](const std::string& text) {
    std::set<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.insert(line);
    return lines;
  };
  const std::set<std::string> old_lines = lines_of(before), new_lines = lines_of(now);
  std::vector<std::string> changed;
  auto note = [&](const std::string& what) {
    if (std::find(changed.begin(), changed.end(), what) == changed.end()) changed.push_back(what);
  };
  for (const std::set<std::string>* side : {&old_lines, &new_lines}) {
    const std::set<std::string>& other = side == &old_lines ? new_lines : old_lines;
    for (const std::string& line : *side) {
      if (other.count(line)) continue;
      const std::string key = line.substr(0, line.find(' '));
      if (key == "format") note("eddy's way of cutting documents (separator lines ending in CRLF now cut them)");
      else if (key == "separator") note("data.separator");
      else if (key == "validation_fraction") note("data.validation_fraction");
      else if (key == "seed") note("training.seed (which splits the documents)");
      else if (key == "tokenizer") note("tokenizer.file (or its contents), vocab_size or min_frequency");
      else note(cat("data.files (", key, ")"));
    }
  }
  std::string text;
  for (const std::string& what : changed) text += (text.empty() ? "" : ", ") + what;
  return text;
}

std::vector<int32_t> encode_documents(const io::BpeTokenizer& tokenizer, const std::vector<std::string>& documents,
                                      int32_t end_of_text) {
  std::vector<int32_t> ids;
  for (const std::string& document : documents) {
    const std::vector<int32_t> encoded = tokenizer.encode(document);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    ids.push_back(end_of_text);
  }
  return ids;
}

// read_documents over files already listed by corpus_files.
Documents read_documents_of(const std::vector<fs::path>& files, const CorpusSpec& corpus, uint64_t seed) {
  std::vector<std::string> documents;
  for (const fs::path& file : files) {
    const std::string text = io::read_file(file.string());
    EDDY_CHECK(!text.empty(), corpus.where, "files: '", file.string(), "' is empty");
    size_t bad = 0;
    EDDY_CHECK(valid_utf8(text, bad), corpus.where, "files: '", file.string(), "' is not UTF-8 text (byte ", bad,
               "); leave it out with data.exclude");
    cut_documents(text, corpus.separator, documents);
  }
  EDDY_CHECK(documents.size() >= 2, corpus.where, "the corpus has ", documents.size(),
             " document(s); a training and a validation split need at least 2",
             corpus.separator.empty() ? " (each file is one document: give more files or a data.separator)" : "");
  Documents split;
  std::mt19937_64 draw(seed);
  std::vector<bool> held_out(documents.size());
  for (size_t i = 0; i < documents.size(); ++i) {
    held_out[i] = static_cast<double>(draw() >> 11) * 0x1.0p-53 < corpus.validation_fraction;
  }
  // A tiny corpus may draw every document to one side; the last document then changes sides.
  if (std::all_of(held_out.begin(), held_out.end(), [](bool v) { return v; })) held_out.back() = false;
  if (std::none_of(held_out.begin(), held_out.end(), [](bool v) { return v; })) held_out.back() = true;
  for (size_t i = 0; i < documents.size(); ++i) {
    (held_out[i] ? split.validation : split.train).push_back(std::move(documents[i]));
  }
  return split;
}

}  // namespace

namespace {

// A corpus file where the run writes its own (output.dir itself, its data/, hf/ and export/): they
// joined the corpus of the next run there (config.yaml, tokenizer.json, the checkpoint), which
// trained on them as text. A corpus in another folder below output.dir is the user's own.
void refuse_run_folder_in_corpus(const LmProblem& p, const std::vector<fs::path>& files) {
  std::error_code ignored;
  const fs::path run = fs::weakly_canonical(fs::absolute(p.output.dir, ignored), ignored);
  for (const fs::path& file : files) {
    const fs::path within = fs::weakly_canonical(file, ignored).lexically_relative(run);
    if (within.empty() || *within.begin() == "..") continue;
    const std::string folder = std::distance(within.begin(), within.end()) == 1 ? "" : within.begin()->string();
    EDDY_CHECK(folder != "" && folder != "data" && folder != "hf" && folder != "export", p.corpus.where, "files: '",
               file.string(), "' lies where the run in output.dir ", p.output.dir, " writes its own files, which "
               "would join the corpus; keep the corpus in a folder of its own");
  }
}

// Refuses a split of fewer tokens than one window, naming the config's place: found when the
// corpus is tokenised (or its token files reused), not when the first batch is drawn, and by
// `eddy check` from an upper bound (`at_most`) where no tokenizer has been trained.
void require_a_window(const LmProblem& p, int64_t tokens, const std::string& split, bool at_most = false) {
  EDDY_CHECK(tokens > p.model.context, p.corpus.where, "the ", split, " split tokenises to ", at_most ? "at most " : "",
             tokens, " tokens, fewer than a window of model.context + 1 = ", p.model.context + 1,
             "; use a larger corpus", split == "training" ? " or a smaller" : " or a larger",
             " data.validation_fraction, or a smaller model.context");
}

// A byte-level BPE token covers at least one byte, and each document adds one end-of-text token.
int64_t most_tokens(const std::vector<std::string>& documents) {
  int64_t tokens = 0;
  for (const std::string& document : documents) tokens += static_cast<int64_t>(document.size()) + 1;
  return tokens;
}

}  // namespace

size_t check_corpus(const LmProblem& p) {
  const std::vector<fs::path> files = corpus_files(p.corpus);
  refuse_run_folder_in_corpus(p, files);
  const Documents documents = read_documents_of(files, p.corpus, p.training.seed);
  require_a_window(p, most_tokens(documents.train), "training", /*at_most=*/true);
  require_a_window(p, most_tokens(documents.validation), "validation", /*at_most=*/true);
  return files.size();
}

void TokenFile::write(const std::string& path, const std::vector<int32_t>& ids, int32_t vocab_size) {
  const uint32_t width = vocab_size <= 65536 ? 2 : 4;
  const uint64_t count = ids.size();
  std::string bytes(kHeaderBytes + count * width, '\0');
  std::memcpy(bytes.data(), kMagic, 8);
  // The format is little-endian; so is every machine eddy builds for (x86-64, aarch64).
  std::memcpy(bytes.data() + 8, &width, 4);
  std::memcpy(bytes.data() + 16, &count, 8);
  char* out = bytes.data() + kHeaderBytes;
  for (int32_t id : ids) {
    const auto value = static_cast<uint32_t>(id);
    std::memcpy(out, &value, width);
    out += width;
  }
  io::write_file_atomically(path, bytes);
}

TokenFile::TokenFile(const std::string& path, const std::string& named) : path_(named.empty() ? path : named) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  EDDY_CHECK(fd >= 0, "cannot open the token file ", path, ": ", std::strerror(errno));
  struct stat info {};
  ::fstat(fd, &info);
  mapped_bytes_ = static_cast<size_t>(info.st_size);
  if (mapped_bytes_ > 0) mapping_ = ::mmap(nullptr, mapped_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  EDDY_CHECK(mapping_ != MAP_FAILED, "cannot map the token file ", path, ": ", std::strerror(errno));
  const auto* bytes = static_cast<const unsigned char*>(mapping_);
  uint32_t width = 0;
  uint64_t count = 0;
  const bool header = mapped_bytes_ >= kHeaderBytes && std::memcmp(bytes, kMagic, 8) == 0;
  if (header) {
    std::memcpy(&width, bytes + 8, 4);
    std::memcpy(&count, bytes + 16, 8);
  }
  // The count is checked by division, so a header claiming a huge count cannot wrap the size.
  const bool fits = header && (width == 2 || width == 4) && (mapped_bytes_ - kHeaderBytes) % width == 0 &&
                    (mapped_bytes_ - kHeaderBytes) / width == count;
  if (!fits) {
    if (mapping_) ::munmap(mapping_, mapped_bytes_);
    throw Error(cat("the token file ", path, " is corrupt (", mapped_bytes_,
                    " bytes; its header does not describe them); delete it to tokenise the corpus again"));
  }
  ids_ = bytes + kHeaderBytes;
  width_ = static_cast<int>(width);
  count_ = static_cast<int64_t>(count);
}

TokenFile::~TokenFile() {
  if (mapping_) ::munmap(mapping_, mapped_bytes_);
}

int32_t TokenFile::at(int64_t index) const {
  uint32_t value = 0;
  std::memcpy(&value, ids_ + index * width_, static_cast<size_t>(width_));
  return static_cast<int32_t>(value);
}

Batch draw_batch(const TokenFile& file, int64_t batch, int64_t context, uint64_t seed, uint64_t stream) {
  EDDY_CHECK(file.size() > context, file.path(), " holds ", file.size(),
             " tokens, fewer than a window of context + 1 = ", context + 1,
             "; use a larger corpus or data.validation_fraction, or a smaller model.context");
  std::seed_seq seeds{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(stream),
                      static_cast<uint32_t>(stream >> 32)};
  std::mt19937_64 draw(seeds);
  const auto starts = static_cast<uint64_t>(file.size() - context);
  std::vector<int64_t> tokens(static_cast<size_t>(batch * context)), targets(tokens.size());
  for (int64_t b = 0; b < batch; ++b) {
    const auto start = static_cast<int64_t>(draw() % starts);
    for (int64_t t = 0; t < context; ++t) {
      tokens[b * context + t] = file.at(start + t);
      targets[b * context + t] = file.at(start + t + 1);
    }
  }
  return {reshape(tensor(tokens), {batch, context}), reshape(tensor(targets), {batch, context})};
}

std::vector<Batch> validation_batches(const TokenFile& file, const LmProblem& problem) {
  std::vector<Batch> batches;
  for (int64_t i = 0; i < problem.training.evaluation_batches; ++i) {
    batches.push_back(draw_batch(file, problem.training.batch_size, problem.model.context, problem.training.seed,
                                 kValidationStreams + static_cast<uint64_t>(i)));
  }
  return batches;
}

CorpusPaths corpus_paths(const LmProblem& p) {
  const fs::path data_dir = fs::path(p.output.dir) / "data";
  return {data_dir, (fs::path(p.output.dir) / "tokenizer.json").string(), (data_dir / "source.txt").string(),
          (data_dir / "train.tokens").string(), (data_dir / "validation.tokens").string()};
}

namespace {

// Where a corpus file bound for `place` is staged: beside the file a write to `place` replaces
// (through a symbolic link, on the link target's file system), as the atomic writers stage theirs.
std::string staged_name(const std::string& place, const std::string& suffix) {
  return io::write_destination(place) + suffix;
}

}  // namespace

StagedCorpus::~StagedCorpus() {
  std::error_code ignored;
  for (const auto& [staged, place] : pending) fs::remove(staged, ignored);
  for (const std::string& folder : made_folders) fs::remove(folder, ignored);  // only while empty
}

void StagedCorpus::commit() {
  for (const auto& [staged, place] : pending) io::move_into_place(staged, place);
  pending.clear();
}

PreparedCorpus prepare_corpus(const LmProblem& p, std::ostream* log, bool resuming) {
  StagedCorpus staged = stage_corpus(p, log, resuming, ".tmp-" + std::to_string(::getpid()));
  staged.commit();
  const CorpusPaths paths = corpus_paths(p);
  staged.corpus.train_tokens = paths.train_tokens;
  staged.corpus.validation_tokens = paths.validation_tokens;
  return std::move(staged.corpus);
}

PreparedCorpus corpus_staged_by_rank_0(const LmProblem& p, const std::string& suffix) {
  const CorpusPaths paths = corpus_paths(p);
  std::error_code error;
  const bool staged = fs::exists(staged_name(paths.train_tokens, suffix), error);
  auto read_from = [&](const std::string& place) { return staged ? staged_name(place, suffix) : place; };
  return {io::BpeTokenizer::load(read_from(paths.tokenizer)), read_from(paths.train_tokens),
          read_from(paths.validation_tokens), !staged};
}

StagedCorpus stage_corpus(const LmProblem& p, std::ostream* log, bool resuming, const std::string& suffix) {
  const CorpusPaths paths = corpus_paths(p);
  const fs::path& data_dir = paths.data_dir;
  const std::string& tokenizer_path = paths.tokenizer;
  const std::string& description_path = paths.description;
  StagedCorpus staged;
  PreparedCorpus& prepared = staged.corpus;
  prepared.train_tokens = paths.train_tokens;
  prepared.validation_tokens = paths.validation_tokens;
  const std::vector<fs::path> files = corpus_files(p.corpus);
  refuse_run_folder_in_corpus(p, files);
  const std::string description = corpus_description(p, files);
  std::error_code error;
  // A --resume goes on with the token files its checkpoint was trained on, also where this eddy
  // would cut the corpus another way (a run made before separator lines ending in CRLF counted).
  auto made_from_this_corpus = [&](const std::string& recorded) {
    return recorded == description || (resuming && recorded.find("format ") != 0 &&
                                       "format " + std::to_string(kCorpusFormat) + "\n" + recorded == description);
  };
  if (fs::exists(description_path, error) && made_from_this_corpus(io::read_file(description_path)) &&
      fs::exists(tokenizer_path, error) && fs::exists(prepared.train_tokens, error) &&
      fs::exists(prepared.validation_tokens, error)) {
    prepared.tokenizer = io::BpeTokenizer::load(tokenizer_path);
    prepared.reused = true;
    require_a_window(p, TokenFile(prepared.train_tokens).size(), "training");
    require_a_window(p, TokenFile(prepared.validation_tokens).size(), "validation");
    return staged;
  }

  const std::string changes = fs::exists(description_path, error)
                                  ? corpus_changes(io::read_file(description_path), description)
                                  : std::string();
  const Documents documents = read_documents_of(files, p.corpus, p.training.seed);
  if (p.tokenizer.file.empty()) {
    if (log) *log << "training a " << p.tokenizer.vocab_size << "-token BPE tokenizer on " << documents.train.size()
                  << " documents\n";
    io::BpeTrainingOptions options;
    options.vocab_size = p.tokenizer.vocab_size;
    options.min_frequency = p.tokenizer.min_frequency;
    options.special_tokens = {kEndOfText};
    prepared.tokenizer = io::BpeTokenizer::train(documents.train, options);
  } else {
    prepared.tokenizer = io::BpeTokenizer::load(p.tokenizer.file);
  }
  // A corpus touched but not changed trains the same tokenizer again; a changed one may not, and
  // tokenizer.file may hold another one now.
  EDDY_CHECK(!resuming || !fs::exists(tokenizer_path, error) ||
                 io::read_file(tokenizer_path) == prepared.tokenizer->to_json(),
             "--resume: ", changes.empty() ? std::string("the corpus") : changes, " changed since this run made its "
             "tokenizer, and the tokenizer ", p.tokenizer.file.empty() ? "trained now" : "in " + p.tokenizer.file,
             " differs from ", tokenizer_path, ", whose token ids the checkpoint was trained on; resume with them as "
             "they were, or start a new run");
  const std::optional<int32_t> end_of_text = prepared.tokenizer->token_to_id(kEndOfText);
  EDDY_CHECK(end_of_text, "tokenizer.file: ", p.tokenizer.file, " has no ", kEndOfText,
             " token, which eddy puts between documents");
  // Only in model.vocab, the text "<|endoftext|>" was encoded as bytes here and in `tokenizers`, and
  // matched whole by transformers, to which export names it the special token: other ids there.
  EDDY_CHECK(prepared.tokenizer->is_added_token(*end_of_text), "tokenizer.file: ", p.tokenizer.file, " has ",
             kEndOfText, " in model.vocab but not among its added_tokens, which encoding matches whole, as "
             "transformers matches the special token eddy exports it as; add it to added_tokens");
  if (log) *log << "tokenising the corpus into " << data_dir.string() << "\n";
  // A given tokenizer may lack a byte the corpus has; its error named neither file nor key.
  const auto encoded = [&](const std::vector<std::string>& split, const char* name) {
    try {
      return encode_documents(*prepared.tokenizer, split, *end_of_text);
    } catch (const Error& e) {
      if (p.tokenizer.file.empty()) throw;
      throw Error(cat("tokenizer.file: ", p.tokenizer.file, " cannot encode the corpus's ", name,
                      " split: ", e.what()));
    }
  };
  const std::vector<int32_t> train_ids = encoded(documents.train, "training");
  require_a_window(p, static_cast<int64_t>(train_ids.size()), "training");
  const std::vector<int32_t> validation_ids = encoded(documents.validation, "validation");
  require_a_window(p, static_cast<int64_t>(validation_ids.size()), "validation");
  for (fs::path folder = data_dir; !folder.empty() && !fs::exists(folder, error); folder = folder.parent_path()) {
    staged.made_folders.push_back(folder.string());
  }
  fs::create_directories(data_dir, error);
  if (error) throw fs::filesystem_error(cat("output.dir ", p.output.dir, ": cannot make the run's data folder"), error);
  auto stage = [&](const std::string& place) {
    const std::string staging = staged_name(place, suffix);
    staged.pending.emplace_back(staging, place);
    return staging;
  };
  const int32_t vocab = prepared.tokenizer->vocab_size();
  prepared.train_tokens = stage(paths.train_tokens);
  TokenFile::write(prepared.train_tokens, train_ids, vocab);
  prepared.validation_tokens = stage(paths.validation_tokens);
  TokenFile::write(prepared.validation_tokens, validation_ids, vocab);
  prepared.tokenizer->save(stage(tokenizer_path));
  // Moved in last: token files without it are made again.
  io::write_file_atomically(stage(description_path), description);
  return staged;
}

}  // namespace eddy::lm
