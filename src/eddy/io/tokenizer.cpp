// Byte-level BPE: GPT-2's byte characters and word pattern, encoding, decoding and training.
// The tokenizer.json reader and writer are in tokenizer_file.cpp.

#include "eddy/io/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <memory>
#include <queue>
#include <unordered_set>

#include "eddy/core/error.h"
#include "eddy/io/atomic_file.h"

namespace eddy::io {
namespace {

std::string utf8_of(char32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
  return out;
}

// GPT-2 spells each byte as one printable character, so that tokens are readable strings with no
// spaces or control characters in them: the printable Latin-1 bytes stand for themselves, and the
// other 68 take the code points from U+0100 on, in byte order (the space byte is "Ġ", U+0120).
const std::array<std::string, 256>& byte_characters() {
  static const std::array<std::string, 256> characters = [] {
    std::array<std::string, 256> out;
    char32_t next_stand_in = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
      out[byte] = utf8_of(printable ? static_cast<char32_t>(byte) : next_stand_in++);
    }
    return out;
  }();
  return characters;
}

const std::unordered_map<std::string, unsigned char>& byte_of_character() {
  static const std::unordered_map<std::string, unsigned char> bytes = [] {
    std::unordered_map<std::string, unsigned char> out;
    for (int byte = 0; byte < 256; ++byte) out.emplace(byte_characters()[byte], static_cast<unsigned char>(byte));
    return out;
  }();
  return bytes;
}

// The bytes a token stands for. A token made of anything but byte characters stands for its own
// UTF-8, as in Hugging Face's ByteLevel decoder.
std::string bytes_of_token(const std::string& token) {
  std::string bytes;
  for (size_t position = 0; position < token.size();) {
    const auto lead = static_cast<unsigned char>(token[position]);
    const size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    auto found = byte_of_character().find(token.substr(position, length));
    if (found == byte_of_character().end()) return token;
    bytes += static_cast<char>(found->second);
    position += length;
  }
  return bytes;
}

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  pcre2_get_error_message(code, buffer.data(), buffer.size());
  return reinterpret_cast<const char*>(buffer.data());
}

// GPT-2's pattern, as Hugging Face's ByteLevel pre-tokenizer uses it: English contractions, then
// runs of letters, of numbers and of other symbols, each with at most one leading space, then
// whitespace. The lookahead leaves the last space of a run before a word to start that word.
// Whitespace is PCRE2's \s but U+180E, which Unicode 6.3 took out of White_Space and Oniguruma
// (under `tokenizers`) does not count: it split "x  \u180e" otherwise.
constexpr std::string_view kGpt2WordPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?(?:[^\s\p{L}\p{N}]|\x{180E})+|[^\S\x{180E}]+(?![\S\x{180E}])|[^\S\x{180E}]+)";

// PCRE2 compiles the pattern once; \p{L} and \p{N} need Unicode properties, which std::regex lacks.
class WordSplitter {
 public:
  WordSplitter() {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pattern_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2WordPattern.data()), kGpt2WordPattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
    EDDY_CHECK(pattern_ != nullptr, "tokenizer: PCRE2 cannot compile GPT-2's word pattern: ", pcre2_message(error));
    // Only a speed-up: where PCRE2 has no JIT, matching interprets the same pattern.
    pcre2_jit_compile(pattern_, PCRE2_JIT_COMPLETE);
  }
  WordSplitter(const WordSplitter&) = delete;
  WordSplitter& operator=(const WordSplitter&) = delete;
  ~WordSplitter() { pcre2_code_free(pattern_); }

  // Every character matches one of the pattern's alternatives, so the words cover the text.
  template <typename Visit>
  void for_each_word(std::string_view text, Visit visit) const {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(pattern_, nullptr), &pcre2_match_data_free);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    uint32_t options = 0;  // the first match checks that the whole text is UTF-8
    size_t offset = 0;
    while (offset < text.size()) {
      const int found = pcre2_match(pattern_, subject, text.size(), offset, options, match.get(), nullptr);
      if (found <= PCRE2_ERROR_UTF8_ERR1 && found >= PCRE2_ERROR_UTF8_ERR21) {
        throw Error(cat("tokenizer: the text is not valid UTF-8 at byte ", pcre2_get_startchar(match.get()), " (",
                        pcre2_message(found), ")"));
      }
      EDDY_CHECK(found > 0, "tokenizer: cannot split the text at byte ", offset, ": ", pcre2_message(found));
      options = PCRE2_NO_UTF_CHECK;
      const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match.get());
      visit(text.substr(range[0], range[1] - range[0]));
      offset = range[1];
    }
  }

 private:
  pcre2_code* pattern_ = nullptr;
};

const WordSplitter& word_splitter() {
  static const WordSplitter splitter;
  return splitter;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct TrainingWord {
  std::vector<int32_t> symbols;
  int64_t count;  // occurrences in the corpus
};

// A pair with its count when queued; stale once the count has changed. The queue's top is the
// most frequent pair, ties going to the smaller (left, right) ids, so results never depend on
// hashing or on the order words were seen in.
struct QueuedPair {
  int64_t count;
  uint64_t pair;
  bool operator<(const QueuedPair& other) const {
    return count != other.count ? count < other.count : pair > other.pair;
  }
};

// Greedy BPE training: merges the most frequent pair everywhere, updating only the counts of the
// words that held it, until the vocabulary is full or no pair is frequent enough.
void learn_merges(std::vector<TrainingWord>& words, int32_t vocab_size, int64_t min_frequency,
                  std::vector<std::string>& tokens, std::vector<std::pair<int32_t, int32_t>>& merges) {
  std::unordered_map<uint64_t, int64_t> pair_counts;
  // Which words hold each pair; may list a word twice or one that has since lost the pair.
  std::unordered_map<uint64_t, std::vector<size_t>> words_with_pair;
  std::unordered_set<uint64_t> changed;
  std::priority_queue<QueuedPair> queue;
  // A change of `delta` occurrences of `pair`, in word `index` when it gains them.
  auto change = [&](uint64_t pair, int64_t delta, size_t index) {
    pair_counts[pair] += delta;
    if (delta > 0) words_with_pair[pair].push_back(index);
    changed.insert(pair);
  };
  auto queue_changed = [&] {
    for (uint64_t pair : changed) {
      const int64_t count = pair_counts[pair];
      if (count > 0) {
        queue.push({count, pair});
      } else {
        pair_counts.erase(pair);
      }
    }
    changed.clear();
  };

  for (size_t index = 0; index < words.size(); ++index) {
    const TrainingWord& word = words[index];
    for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
      change(pair_key(word.symbols[i], word.symbols[i + 1]), word.count, index);
    }
  }
  queue_changed();
  std::unordered_map<std::string, int32_t> ids;
  for (size_t id = 0; id < tokens.size(); ++id) ids.emplace(tokens[id], static_cast<int32_t>(id));

  while (static_cast<int32_t>(tokens.size()) < vocab_size && !queue.empty()) {
    const QueuedPair best = queue.top();
    queue.pop();
    auto current = pair_counts.find(best.pair);
    if (current == pair_counts.end() || current->second != best.count) continue;
    if (best.count < min_frequency) break;
    const auto left = static_cast<int32_t>(best.pair >> 32);
    const auto right = static_cast<int32_t>(best.pair & 0xFFFFFFFFu);
    // Two merges can spell the same string ("a"+"bc", "ab"+"c"); both then give one token.
    const std::string merged = tokens[left] + tokens[right];
    const auto [entry, is_new] = ids.try_emplace(merged, static_cast<int32_t>(tokens.size()));
    if (is_new) tokens.push_back(merged);
    merges.emplace_back(left, right);

    std::vector<size_t> holders = std::move(words_with_pair[best.pair]);
    words_with_pair.erase(best.pair);
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    // Each (left, right) of a holder becomes the merged token, left to right as encoding merges.
    // Only the pairs beside each merge change, as Hugging Face's trainer counts them: counting
    // whole words again made time and memory grow with merges times word length (a 100,000-letter
    // word took 548 MB). Beside a merge the neighbour on the left is the merged sequence's, so
    // that merges in a row ("a a a a" by "a a") undo each other's intermediate pairs.
    const int32_t merged_id = entry->second;
    for (size_t index : holders) {
      TrainingWord& word = words[index];
      const std::vector<int32_t>& symbols = word.symbols;
      std::vector<int32_t> merged_symbols;
      merged_symbols.reserve(symbols.size());
      for (size_t i = 0; i < symbols.size();) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          if (!merged_symbols.empty()) {
            change(pair_key(merged_symbols.back(), left), -word.count, index);
            change(pair_key(merged_symbols.back(), merged_id), word.count, index);
          }
          change(best.pair, -word.count, index);
          if (i + 2 < symbols.size()) {
            change(pair_key(right, symbols[i + 2]), -word.count, index);
            change(pair_key(merged_id, symbols[i + 2]), word.count, index);
          }
          merged_symbols.push_back(merged_id);
          i += 2;
        } else {
          merged_symbols.push_back(symbols[i]);
          ++i;
        }
      }
      if (merged_symbols.size() != symbols.size()) word.symbols = std::move(merged_symbols);
    }
    queue_changed();
  }
}

}  // namespace

void BpeTokenizer::index() {
  ids_.clear();
  token_bytes_.assign(tokens_.size(), "");
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const auto [entry, is_new] = ids_.emplace(tokens_[id], static_cast<int32_t>(id));
    EDDY_CHECK(is_new, "tokenizer: token \"", tokens_[id], "\" has two ids, ", entry->second, " and ", id);
    token_bytes_[id] = bytes_of_token(tokens_[id]);
  }
  std::vector<bool> made_by_bpe(tokens_.size(), false);
  for (int byte = 0; byte < 256; ++byte) {
    auto found = ids_.find(byte_characters()[byte]);
    byte_token_ids_[byte] = found == ids_.end() ? -1 : found->second;
    if (found != ids_.end()) made_by_bpe[found->second] = true;
  }
  merge_of_pair_.clear();
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const auto [left, right] = merges_[rank];
    // A repeated merge keeps its last rank, as in Hugging Face's reader.
    const int32_t result = ids_.at(tokens_[left] + tokens_[right]);
    merge_of_pair_.insert_or_assign(pair_key(left, right), Merge{static_cast<int32_t>(rank), result});
    made_by_bpe[result] = true;
  }
  added_token_first_bytes_.clear();
  for (const AddedToken& added : added_tokens_) {
    // An added token is written as its text, unless BPE makes it too (a byte's token, a merge's
    // result: tokenizers gives such an added text the vocabulary's id), where text that never held
    // it decodes through that id as well: added "é" or "Ġthe" turned "in the end" into "inĠthe end".
    if (!made_by_bpe[added.id]) token_bytes_[added.id] = tokens_[added.id];
    const char first = tokens_[added.id].front();
    if (added_token_first_bytes_.find(first) == std::string::npos) added_token_first_bytes_ += first;
  }
}

template <typename OnText, typename OnAdded>
void BpeTokenizer::split_on_added_tokens(std::string_view text, OnText on_text, OnAdded on_added) const {
  split_on_added_tokens(
      text, false, [&](std::string_view between) { split_on_added_tokens(between, true, on_text, on_added); },
      on_added);
}

template <typename OnText, typename OnAdded>
void BpeTokenizer::split_on_added_tokens(std::string_view text, bool normalized, OnText on_text,
                                         OnAdded on_added) const {
  size_t piece_start = 0;
  size_t position = text.find_first_of(added_token_first_bytes_);
  while (position != std::string_view::npos) {
    int32_t longest = -1;
    for (const AddedToken& added : added_tokens_) {
      const std::string& content = tokens_[added.id];
      if (added.normalized == normalized && text.substr(position).starts_with(content) &&
          (longest < 0 || content.size() > tokens_[longest].size())) {
        longest = added.id;
      }
    }
    if (longest < 0) {
      position = text.find_first_of(added_token_first_bytes_, position + 1);
      continue;
    }
    if (position > piece_start) on_text(text.substr(piece_start, position - piece_start));
    on_added(longest);
    piece_start = position + tokens_[longest].size();
    position = text.find_first_of(added_token_first_bytes_, piece_start);
  }
  if (piece_start < text.size()) on_text(text.substr(piece_start));
}

void BpeTokenizer::append_word(std::string_view word, std::vector<int32_t>& ids) const {
  // The word's symbols as a linked list over byte positions; a merge keeps the left position.
  const auto size = static_cast<int32_t>(word.size());
  std::vector<int32_t> symbols(size), next(size), previous(size);
  for (int32_t i = 0; i < size; ++i) {
    const auto byte = static_cast<unsigned char>(word[i]);
    symbols[i] = byte_token_ids_[byte];
    EDDY_CHECK(symbols[i] >= 0, "tokenizer: byte 0x", std::hex, int(byte), " has no token in this vocabulary");
    next[i] = i + 1 < size ? i + 1 : -1;
    previous[i] = i - 1;
  }
  // Candidates by (rank, position): the lowest rank first and, within a rank, the leftmost,
  // which is what applying each merge left to right in rank order gives.
  using Candidate = std::pair<int32_t, int32_t>;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> candidates;
  auto consider = [&](int32_t position) {
    if (position < 0 || next[position] < 0) return;
    auto found = merge_of_pair_.find(pair_key(symbols[position], symbols[next[position]]));
    if (found != merge_of_pair_.end()) candidates.emplace(found->second.rank, position);
  };
  for (int32_t i = 0; i + 1 < size; ++i) consider(i);
  while (!candidates.empty()) {
    const auto [rank, position] = candidates.top();
    candidates.pop();
    if (symbols[position] < 0 || next[position] < 0) continue;
    auto found = merge_of_pair_.find(pair_key(symbols[position], symbols[next[position]]));
    if (found == merge_of_pair_.end() || found->second.rank != rank) continue;  // the pair changed since
    const int32_t right = next[position];
    symbols[position] = found->second.result;
    symbols[right] = -1;
    next[position] = next[right];
    if (next[right] >= 0) previous[next[right]] = position;
    consider(previous[position]);
    consider(position);
  }
  for (int32_t i = 0; i >= 0 && i < size; i = next[i]) ids.push_back(symbols[i]);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  split_on_added_tokens(
      text,
      [&](std::string_view piece) {
        word_splitter().for_each_word(piece, [&](std::string_view word) { append_word(word, ids); });
      },
      [&](int32_t id) { ids.push_back(id); });
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids) {
    EDDY_CHECK(id >= 0 && id < vocab_size(), "tokenizer: cannot decode id ", id, ", outside the vocabulary of ",
               vocab_size(), " tokens");
    text += token_bytes_[id];
  }
  return text;
}

std::optional<int32_t> BpeTokenizer::token_to_id(const std::string& token) const {
  auto found = ids_.find(token);
  if (found == ids_.end()) return std::nullopt;
  return found->second;
}

const std::string& BpeTokenizer::id_to_token(int32_t id) const {
  EDDY_CHECK(id >= 0 && id < vocab_size(), "tokenizer: id ", id, " is outside the vocabulary of ", vocab_size(),
             " tokens");
  return tokens_[id];
}

bool BpeTokenizer::is_added_token(int32_t id) const {
  return std::any_of(added_tokens_.begin(), added_tokens_.end(), [id](const AddedToken& added) { return added.id == id; });
}

std::vector<std::string> BpeTokenizer::special_tokens() const {
  std::vector<std::string> specials;
  for (const AddedToken& added : added_tokens_) {
    if (added.special) specials.push_back(tokens_[added.id]);
  }
  return specials;
}

std::vector<std::string> BpeTokenizer::split_words(std::string_view text) {
  std::vector<std::string> words;
  word_splitter().for_each_word(text, [&](std::string_view word) { words.emplace_back(word); });
  return words;
}

BpeTokenizer BpeTokenizer::train(const std::vector<std::string>& texts, const BpeTrainingOptions& options) {
  BpeTokenizer tokenizer;
  for (const std::string& special : options.special_tokens) {
    EDDY_CHECK(!special.empty(), "tokenizer training: a special token is empty");
    EDDY_CHECK(std::find(tokenizer.tokens_.begin(), tokenizer.tokens_.end(), special) == tokenizer.tokens_.end(),
               "tokenizer training: special token \"", special, "\" is listed twice");
    tokenizer.added_tokens_.push_back({static_cast<int32_t>(tokenizer.tokens_.size()), true});
    tokenizer.tokens_.push_back(special);
  }
  // A special token spelled as a byte's character ("!") is that byte's token too, as tokenizers'
  // trainer makes it (listing it twice was refused as a token with two ids).
  for (const std::string& character : byte_characters()) {
    const auto& specials = options.special_tokens;
    if (std::find(specials.begin(), specials.end(), character) == specials.end()) tokenizer.tokens_.push_back(character);
  }
  EDDY_CHECK(options.vocab_size >= tokenizer.vocab_size(), "tokenizer training: vocab_size ", options.vocab_size,
             " cannot hold the 256 byte tokens and ", options.special_tokens.size(), " special tokens");
  EDDY_CHECK(options.min_frequency >= 1, "tokenizer training: min_frequency must be at least 1, got ",
             options.min_frequency);
  tokenizer.index();

  std::unordered_map<std::string, int64_t> word_counts;
  for (const std::string& text : texts) {
    tokenizer.split_on_added_tokens(
        text,
        [&](std::string_view piece) {
          word_splitter().for_each_word(piece, [&](std::string_view word) { ++word_counts[std::string(word)]; });
        },
        [](int32_t) {});
  }
  std::vector<TrainingWord> words;
  for (const auto& [word, count] : word_counts) {
    if (word.size() < 2) continue;  // nothing to merge
    TrainingWord training_word{{}, count};
    for (char byte : word) training_word.symbols.push_back(tokenizer.byte_token_ids_[static_cast<unsigned char>(byte)]);
    words.push_back(std::move(training_word));
  }
  learn_merges(words, options.vocab_size, options.min_frequency, tokenizer.tokens_, tokenizer.merges_);
  tokenizer.index();
  return tokenizer;
}

BpeTokenizer BpeTokenizer::train_from_file(const std::string& path, const BpeTrainingOptions& options) {
  return train({read_file(path)}, options);
}

}  // namespace eddy::io
