#pragma once
// A byte-level BPE tokenizer, GPT-2's scheme, stored as Hugging Face's tokenizer.json: a file
// written here loads in the Python `tokenizers` package and gives the same ids for the same text,
// and a byte-level BPE file from there loads here (docs/lm.md says which files).
//
// Text is first cut at special tokens, which are matched whole. The rest is split into words by
// GPT-2's pattern (contractions, letters, numbers, other symbols, whitespace); each word's UTF-8
// bytes start as one token per byte and are merged pairwise by rank, lowest first. Since every
// byte has a token, any text encodes and decode(encode(text)) == text.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace eddy::io {

struct BpeTrainingOptions {
  // Special tokens, then the 256 byte tokens, then one token per merge, up to this many.
  int32_t vocab_size = 8192;
  // A pair seen fewer times than this in the corpus is never merged, so training may stop
  // before reaching vocab_size.
  int64_t min_frequency = 2;
  // Given ids 0, 1, ... in this order; matched whole in text and never merged with anything.
  std::vector<std::string> special_tokens;
};

class BpeTokenizer {
 public:
  // Learns merges from the words of `texts`: the most frequent adjacent pair first, ties going
  // to the pair of older tokens, so the same corpus always gives the same tokenizer.
  static BpeTokenizer train(const std::vector<std::string>& texts, const BpeTrainingOptions& options);
  // The same, with the whole file as one text.
  static BpeTokenizer train_from_file(const std::string& path, const BpeTrainingOptions& options);

  // Reads a tokenizer.json. Throws eddy::Error naming the file and the key for anything this
  // tokenizer cannot reproduce exactly (another model, normalizer or pre-tokenizer, ...).
  static BpeTokenizer load(const std::string& path);
  // Writes tokenizer.json atomically.
  void save(const std::string& path) const;
  // The file's text, and its parser; `source` names the file in errors.
  std::string to_json() const;
  static BpeTokenizer from_json(const std::string& text, const std::string& source);

  // Throws eddy::Error when `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text) const;
  // Throws eddy::Error for an id outside the vocabulary.
  std::string decode(const std::vector<int32_t>& ids) const;

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  // Tokens as tokenizer.json spells them: byte-level characters ("Ġ" is the space byte), or the
  // text of a special token.
  std::optional<int32_t> token_to_id(const std::string& token) const;
  const std::string& id_to_token(int32_t id) const;
  std::vector<std::string> special_tokens() const;
  // Whether `id` is an added token (special or not), which encoding matches whole.
  bool is_added_token(int32_t id) const;

  // GPT-2's split of text (without special tokens) into the words that BPE merges within.
  static std::vector<std::string> split_words(std::string_view text);

 private:
  BpeTokenizer() = default;  // tokenizers come from train, load or from_json

  struct AddedToken {
    int32_t id;
    bool special;  // tokenizer.json's flag; both kinds are matched whole in text
    // tokenizer.json's flag: matched in the text left between the other added tokens (below).
    bool normalized = false;
  };
  struct Merge {
    int32_t rank;
    int32_t result;
  };

  // Rebuilds the lookup tables from tokens_, merges_ and added_tokens_.
  void index();
  // Calls on_text(piece) for the text between added tokens and on_added(id) for each added token,
  // in order. As in `tokenizers`, the tokens with `normalized: false` (special tokens as they are
  // made) are matched first, over the whole text, and the others then in the text left between
  // them; within each pass a token matches at the leftmost position, the longest one there. (One
  // pass over both split "\n<|endoftext|>" into "\n<", an added token, and the special token's
  // bytes.)
  template <typename OnText, typename OnAdded>
  void split_on_added_tokens(std::string_view text, OnText on_text, OnAdded on_added) const;
  template <typename OnText, typename OnAdded>
  void split_on_added_tokens(std::string_view text, bool normalized, OnText on_text, OnAdded on_added) const;
  // Appends the ids of one word (bytes in, merges applied by rank).
  void append_word(std::string_view word, std::vector<int32_t>& ids) const;

  std::vector<std::string> tokens_;                 // by id, as tokenizer.json spells them
  std::vector<std::pair<int32_t, int32_t>> merges_;  // by rank
  std::vector<AddedToken> added_tokens_;

  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::string> token_bytes_;  // by id: what decode writes
  std::array<int32_t, 256> byte_token_ids_{};  // -1 where a file's vocabulary lacks the byte
  std::unordered_map<uint64_t, Merge> merge_of_pair_;
  std::string added_token_first_bytes_;
};

}  // namespace eddy::io
