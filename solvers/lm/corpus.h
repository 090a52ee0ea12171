#pragma once
// The text a language model trains on: corpus files cut into documents, split into training and
// validation documents by the seed, tokenised once into token files in the run folder, and drawn
// from as random context windows that depend only on (seed, step), so a resumed run sees the
// batches an uninterrupted one would.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "eddy/core/tensor.h"
#include "eddy/io/tokenizer.h"
#include "solvers/lm/problem.h"

namespace eddy::lm {

// Ends every document in the token files; the tokenizer's special token 0 when eddy trains it.
inline constexpr const char* kEndOfText = "<|endoftext|>";

struct Documents {
  std::vector<std::string> train, validation;
};

// What preparing the corpus refuses before it tokenises, found without writing anything (`eddy
// check`): a pattern that matches no file, a corpus file inside output.dir (the run's own files
// joined the corpus), a file unreadable, empty or not UTF-8, too few documents to split, a split
// whose bytes cannot make one window of tokens (a token covers at least a byte). Returns
// the number of corpus files.
size_t check_corpus(const LmProblem& problem);

// Token ids in a file mapped read-only: a 24-byte header ("EDDYTOKS", the bytes per id (2 or 4),
// the id count) and the ids, little-endian. Two bytes per id when the vocabulary allows.
class TokenFile {
 public:
  static void write(const std::string& path, const std::vector<int32_t>& ids, int32_t vocab_size);
  // `named`: what messages call it, where that is not `path` (a staged file's place).
  explicit TokenFile(const std::string& path, const std::string& named = {});
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t size() const { return count_; }
  int32_t at(int64_t index) const;
  const std::string& path() const { return path_; }  // as named

 private:
  std::string path_;
  const unsigned char* ids_ = nullptr;
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
  int64_t count_ = 0;
  int width_ = 0;
};

// A batch of windows: tokens[b, t] predicts targets[b, t] = the token after it. int64 [batch, context].
struct Batch {
  Tensor tokens, targets;
};

// `batch` windows of `context` + 1 tokens at offsets drawn from (seed, stream): the same
// arguments give the same batch on every run and platform.
Batch draw_batch(const TokenFile& file, int64_t batch, int64_t context, uint64_t seed, uint64_t stream);

// The validation windows a run evaluates on: `evaluation_batches` batches drawn once from the
// streams from kValidationStreams on, apart from the training streams (one per step and
// micro-batch), so every evaluation, and every later measurement of the run, sees the same text.
inline constexpr uint64_t kValidationStreams = uint64_t{1} << 62;
std::vector<Batch> validation_batches(const TokenFile& file, const LmProblem& problem);

// Where a run keeps its tokenizer and token files: RUN/tokenizer.json and RUN/data/ (source.txt,
// train.tokens, validation.tokens).
struct CorpusPaths {
  std::filesystem::path data_dir;
  std::string tokenizer, description, train_tokens, validation_tokens;
};
CorpusPaths corpus_paths(const LmProblem& problem);

// The run folder's tokenizer and token files, made once: the tokenizer is loaded from the
// config's file or trained on the training documents, and the documents are encoded into
// RUN/data/{train,validation}.tokens. A later call (a --resume, a rerun) reuses them when the
// corpus files (names, sizes, times) and the data and tokenizer settings are unchanged. When
// `resuming` and the corpus changed, a tokenizer trained again must be the run's: another one
// would give the checkpoint's embedding rows other tokens.
struct PreparedCorpus {
  std::optional<io::BpeTokenizer> tokenizer;  // always set; optional as BpeTokenizer has no empty state
  std::string train_tokens, validation_tokens;  // paths
  bool reused = false;
};
PreparedCorpus prepare_corpus(const LmProblem& problem, std::ostream* log, bool resuming = false);

// The same, with the files it makes written beside their places (NAME + `suffix`) until commit()
// moves them in, the corpus description last: a run refused before it trains (a window longer
// than its data, a folder another run holds, a --resume that does not fit) leaves the run folder
// as it was, where it had replaced the tokenizer of the run there (whose generated text was then
// garbage). Until then the paths name the staged files; the ones not committed are removed with
// the object.
struct StagedCorpus {
  PreparedCorpus corpus;
  std::vector<std::pair<std::string, std::string>> pending;  // (staged file, its place)
  // The folders staging made, deepest first: an uncommitted staging removes them again while they
  // are empty (an interrupted first run left a run folder holding an empty data/).
  std::vector<std::string> made_folders;

  StagedCorpus() = default;
  StagedCorpus(StagedCorpus&&) = default;
  StagedCorpus& operator=(StagedCorpus&&) = delete;
  ~StagedCorpus();
  void commit();
};
StagedCorpus stage_corpus(const LmProblem& problem, std::ostream* log, bool resuming, const std::string& suffix);
// What another rank reads: the files rank 0 staged under `suffix`, or those in place where it
// staged none.
PreparedCorpus corpus_staged_by_rank_0(const LmProblem& problem, const std::string& suffix);

}  // namespace eddy::lm
