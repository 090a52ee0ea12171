// The byte-level BPE tokenizer: GPT-2's word split, training (by hand-counted merges, and
// determinism), special tokens, lossless round trips, tokenizer.json save/load, and the errors of
// files it cannot read. tests/python/test_tokenizer_hf.py compares it with Hugging Face's.

#include <gtest/gtest.h>
#include <unistd.h>

#include "support/expect_error.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "eddy/io/atomic_file.h"
#include "eddy/io/tokenizer.h"

namespace eddy::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kSpecials = {"<|endoftext|>", "<pad>"};

// Each line three times, so that pairs within a line pass min_frequency.
std::vector<std::string> corpus() {
  const std::vector<std::string> lines = {"The quick brown fox doesn't jump over the lazy dog; the dog didn't care, and the fox ran.",
          "Numbers: 12345, 3.14159 and 2024-11-29. Spaces:   three,\ttabs\t\there.",
          "Café, naïve, résumé, déjà vu; 東京タワー and 北京; emoji 😀🚀 and ❤️.",
          "the the the then there these those they they're we'll I've you'd<|endoftext|>",
          "line one\nline two\r\n\nline four  \n   indented line<|endoftext|>the end"};
  std::vector<std::string> texts;
  for (int copy = 0; copy < 3; ++copy) texts.insert(texts.end(), lines.begin(), lines.end());
  return texts;
}

BpeTrainingOptions options(int32_t vocab_size, const std::vector<std::string>& special_tokens = {}) {
  BpeTrainingOptions options;
  options.vocab_size = vocab_size;
  options.min_frequency = 2;
  options.special_tokens = special_tokens;
  return options;
}

BpeTokenizer trained_tokenizer() {
  return BpeTokenizer::train(corpus(), options(400, kSpecials));
}

std::vector<std::string> samples() {
  return {"",
          "Hello, world! It's 42.",
          "don't won't they'll I'd we've she's",
          "Café crème brûlée, naïve façade",
          "中文字符和日本語のテキスト",
          "emoji: 😀 👍🏽 🇫🇷 👨‍👩‍👧",
          "   leading, inner   runs,\t\ttabs and trailing   ",
          "line\nbreaks\r\n\n\nand a last one\n",
          "special <|endoftext|> in the middle, <pad><pad> twice, and a partial <|endoftext",
          "the quick brown fox"};
}

std::string scratch_path(const std::string& name) {
  const fs::path folder = fs::temp_directory_path() / ("eddy_tokenizer_test_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  return (folder / name).string();
}

TEST(Tokenizer, SplitsWordsWithGpt2Pattern) {
  EXPECT_EQ(BpeTokenizer::split_words("I don't  like 123 cats!!\n\n  ok"),
            (std::vector<std::string>{"I", " don", "'t", " ", " like", " 123", " cats", "!!", "\n\n ", " ok"}));
  EXPECT_EQ(BpeTokenizer::split_words("héllo 世界 😀😀 end  "),
            (std::vector<std::string>{"héllo", " 世界", " 😀😀", " end", "  "}));
  EXPECT_EQ(BpeTokenizer::split_words("we'll they've I'm"),
            (std::vector<std::string>{"we", "'ll", " they", "'ve", " I", "'m"}));
  // U+180E is no whitespace to `tokenizers` (Unicode 6.3 on), as it was to PCRE2's \s:
  // tokenizers splits as recorded here.
  EXPECT_EQ(BpeTokenizer::split_words("x  \u180e a\u180eb"),
            (std::vector<std::string>{"x", " ", " \u180e", " a", "\u180e", "b"}));
}

TEST(Tokenizer, BaseVocabularySpellsBytesAsGpt2Does) {
  BpeTokenizer tokenizer = BpeTokenizer::train({}, options(258, kSpecials));
  ASSERT_EQ(tokenizer.vocab_size(), 258);
  EXPECT_EQ(tokenizer.id_to_token(0), "<|endoftext|>");
  EXPECT_EQ(tokenizer.id_to_token(1), "<pad>");
  EXPECT_EQ(tokenizer.id_to_token(2 + 'A'), "A");
  EXPECT_EQ(tokenizer.id_to_token(2 + ' '), "Ġ");   // U+0120
  EXPECT_EQ(tokenizer.id_to_token(2 + '\n'), "Ċ");  // U+010A
  EXPECT_EQ(tokenizer.id_to_token(2 + 0xFF), "ÿ");
  EXPECT_EQ(tokenizer.id_to_token(2 + 0xAD), "Ń");  // the soft hyphen is the last stand-in, U+0143
  EXPECT_EQ(tokenizer.token_to_id("Ġ"), 2 + ' ');
  EXPECT_EQ(tokenizer.token_to_id("absent"), std::nullopt);
  EXPECT_EQ(tokenizer.encode("é"), (std::vector<int32_t>{2 + 0xC3, 2 + 0xA9}));
  EXPECT_EQ(tokenizer.special_tokens(), kSpecials);
}

TEST(Tokenizer, TrainingMergesTheMostFrequentPairFirst) {
  // Words "hello" x1, " hello" x2, " world" x1. Four pairs of "hello" occur 3 times; ties go to
  // the smaller ids, so "el" (e=101) comes first, then "hel" (h=104), "lo" (l=108), "hello",
  // then " hello" (twice). Every other pair occurs once, below min_frequency.
  BpeTokenizer tokenizer = BpeTokenizer::train({"hello hello hello world"}, options(1000));
  ASSERT_EQ(tokenizer.vocab_size(), 261);
  EXPECT_EQ(tokenizer.id_to_token(256), "el");
  EXPECT_EQ(tokenizer.id_to_token(257), "hel");
  EXPECT_EQ(tokenizer.id_to_token(258), "lo");
  EXPECT_EQ(tokenizer.id_to_token(259), "hello");
  EXPECT_EQ(tokenizer.id_to_token(260), "Ġhello");
  EXPECT_EQ(tokenizer.encode("hello hello world"), (std::vector<int32_t>{259, 260, ' ', 'w', 'o', 'r', 'l', 'd'}));
  // Merges apply by rank inside words never seen: "yellow" holds "el" and "lo" but not "hel".
  EXPECT_EQ(tokenizer.encode("yellow"), (std::vector<int32_t>{'y', 256, 258, 'w'}));

  BpeTokenizer stopped = BpeTokenizer::train({"hello hello hello world"}, options(258));
  EXPECT_EQ(stopped.vocab_size(), 258);
  EXPECT_EQ(stopped.encode("hello"), (std::vector<int32_t>{257, 'l', 'o'}));
}

TEST(Tokenizer, TrainingIsDeterministic) {
  const std::string first = trained_tokenizer().to_json();
  EXPECT_EQ(trained_tokenizer().to_json(), first);
  std::vector<std::string> reversed = corpus();
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(BpeTokenizer::train(reversed, options(400, kSpecials)).to_json(),
            first);
}

TEST(Tokenizer, DecodeInvertsEncode) {
  BpeTokenizer tokenizer = trained_tokenizer();
  ASSERT_EQ(tokenizer.vocab_size(), 400);
  for (const std::string& text : samples()) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text) << text;
  }
  // The merges shorten text that looks like the corpus.
  const std::string line = corpus()[0];
  EXPECT_LT(tokenizer.encode(line).size(), line.size() / 2);
}

TEST(Tokenizer, SpecialTokensAreMatchedWholeAndNeverMerged) {
  BpeTokenizer tokenizer = trained_tokenizer();
  std::vector<int32_t> ids = tokenizer.encode("<|endoftext|>hi<pad><pad>");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(ids[ids.size() - 2], 1);
  EXPECT_EQ(ids.back(), 1);
  EXPECT_EQ(tokenizer.decode({0, 1}), "<|endoftext|><pad>");
  // A partial special token is plain text.
  for (int32_t id : tokenizer.encode("<|endoftext")) EXPECT_GE(id, 2);
  // The corpus holds "<|endoftext|>" twice, but no learnt token spans part of it.
  EXPECT_EQ(tokenizer.token_to_id("<|"), std::nullopt);
  EXPECT_EQ(tokenizer.token_to_id("|>"), std::nullopt);
  for (int32_t id = 2; id < tokenizer.vocab_size(); ++id) {
    EXPECT_EQ(tokenizer.id_to_token(id).find("endoftext|"), std::string::npos) << tokenizer.id_to_token(id);
  }

  // At one position the longest special token wins.
  BpeTokenizer nested = BpeTokenizer::train({}, options(258, {"<a>", "<a><b>"}));
  EXPECT_EQ(nested.encode("x<a><b>y<a>"), (std::vector<int32_t>{2 + 'x', 1, 2 + 'y', 0}));
}

TEST(Tokenizer, SaveAndLoadGiveTheSameEncodings) {
  BpeTokenizer original = trained_tokenizer();
  const std::string path = scratch_path("tokenizer.json");
  original.save(path);
  BpeTokenizer loaded = BpeTokenizer::load(path);
  EXPECT_EQ(loaded.vocab_size(), original.vocab_size());
  EXPECT_EQ(loaded.special_tokens(), kSpecials);
  EXPECT_EQ(loaded.to_json(), original.to_json());
  for (const std::string& text : samples()) EXPECT_EQ(loaded.encode(text), original.encode(text)) << text;

  json file = json::parse(read_file(path));
  EXPECT_EQ(file["model"]["type"], "BPE");
  EXPECT_EQ(file["pre_tokenizer"]["type"], "ByteLevel");
  EXPECT_EQ(file["pre_tokenizer"]["add_prefix_space"], false);
  EXPECT_EQ(file["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(file["added_tokens"][1]["content"], "<pad>");
  EXPECT_EQ(file["added_tokens"][1]["special"], true);
  EXPECT_EQ(file["model"]["merges"].size(), 400u - 258u);
}

TEST(Tokenizer, ReadsMergesAsStringsOrPairsAndAnUntypedModel) {
  BpeTokenizer original = trained_tokenizer();
  json file = json::parse(original.to_json());
  json pairs = json::array();
  for (const json& merge : file["model"]["merges"]) {
    const std::string text = merge.get<std::string>();
    pairs.push_back({text.substr(0, text.find(' ')), text.substr(text.find(' ') + 1)});
  }
  file["model"]["merges"] = pairs;
  BpeTokenizer from_pairs = BpeTokenizer::from_json(file.dump(), "pairs.json");
  for (const std::string& text : samples()) EXPECT_EQ(from_pairs.encode(text), original.encode(text)) << text;

  // Older files leave the model's type out.
  file["model"].erase("type");
  EXPECT_EQ(BpeTokenizer::from_json(file.dump(), "untyped.json").encode(samples()[1]), original.encode(samples()[1]));

  // transformers 5's save_pretrained writes a template of the text alone, which adds no tokens.
  file["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
      "special_tokens": {}})");
  const BpeTokenizer resaved = BpeTokenizer::from_json(file.dump(), "resaved.json");
  for (const std::string& text : samples()) EXPECT_EQ(resaved.encode(text), original.encode(text)) << text;
}

TEST(Tokenizer, RejectsBadTextAndIds) {
  BpeTokenizer tokenizer = trained_tokenizer();
  expect_error([&] { tokenizer.encode("ok \xC3\x28 bad"); }, {"not valid UTF-8", "byte 3"});
  expect_error([&] { tokenizer.decode({5, 400}); }, {"id 400", "400 tokens"});
  expect_error([&] { tokenizer.id_to_token(-1); }, {"id -1"});
  expect_error([] { BpeTokenizer::train({"text"}, options(100)); }, {"vocab_size 100", "256 byte tokens"});
  // A file may lack a byte's token (here "A", its id going to "ÿ"); text with that byte fails.
  json without_a = json::parse(BpeTokenizer::train({}, options(258, kSpecials)).to_json());
  without_a["model"]["vocab"].erase("A");
  without_a["model"]["vocab"]["ÿ"] = 2 + 'A';
  BpeTokenizer lacking = BpeTokenizer::from_json(without_a.dump(), "without_a.json");
  EXPECT_EQ(lacking.decode(lacking.encode("BCD")), "BCD");
  expect_error([&] { lacking.encode("BAD"); }, {"byte 0x41 has no token"});
  expect_error([] { BpeTokenizer::train({}, options(300, {"<s>", "<s>"})); },
               {"\"<s>\" is listed twice"});
}

// Writes the trained tokenizer's file changed by `change`, and expects load() to fail naming the
// file and every fragment.
void expect_load_error(const std::function<void(json&)>& change, const std::vector<std::string>& fragments) {
  json file = json::parse(trained_tokenizer().to_json());
  change(file);
  const std::string path = scratch_path("broken.json");
  write_file_atomically(path, file.dump());
  std::vector<std::string> expected = fragments;
  expected.push_back(path);
  expect_error([&] { BpeTokenizer::load(path); }, expected);
}

TEST(Tokenizer, FileErrorsNameTheFileAndKey) {
  expect_error([] { BpeTokenizer::load("/nonexistent/tokenizer.json"); }, {"/nonexistent/tokenizer.json"});
  const std::string truncated = scratch_path("truncated.json");
  write_file_atomically(truncated, R"({"model": {"type": "BPE", "vocab": )");
  expect_error([&] { BpeTokenizer::load(truncated); }, {truncated, "invalid JSON at byte 36"});

  expect_load_error([](json& f) { f["model"]["type"] = "WordPiece"; }, {"model.type", "\"WordPiece\"", "BPE"});
  expect_load_error([](json& f) { f["model"].erase("vocab"); }, {"model.vocab: missing"});
  expect_load_error([](json& f) { f["model"].erase("merges"); }, {"model.merges: missing"});
  expect_load_error([](json& f) { f["model"]["merges"][3] = "Ġ nowhere"; },
                    {"model.merges[3]", "\"nowhere\", which is not in model.vocab"});
  expect_load_error([](json& f) { f["model"]["merges"][0] = json::array({"q", "z"}); },
                    {"model.merges[0]", "\"qz\", which is not in model.vocab"});
  expect_load_error([](json& f) { f["model"]["merges"][0] = 7; }, {"model.merges[0]", "\"left right\""});
  expect_load_error([](json& f) { f["pre_tokenizer"] = {{"type", "Whitespace"}}; },
                    {"pre_tokenizer", "unsupported pre-tokenizer \"Whitespace\""});
  expect_load_error([](json& f) { f["pre_tokenizer"]["add_prefix_space"] = true; },
                    {"pre_tokenizer.add_prefix_space", "must be false"});
  expect_load_error([](json& f) { f["normalizer"] = {{"type", "NFC"}}; }, {"normalizer", "unsupported normalizer \"NFC\""});
  // A template that adds a token (a BOS) or names special tokens would change the ids.
  expect_load_error(
      [](json& f) {
        f["post_processor"] = json::parse(R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}},
            {"Sequence": {"id": "A"}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}})");
      },
      {"post_processor", "\"TemplateProcessing\"", "adds no tokens"});
  expect_load_error(
      [](json& f) {
        f["post_processor"] = json::parse(R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}})");
      },
      {"post_processor", "\"TemplateProcessing\""});
  expect_load_error([](json& f) { f["model"]["unk_token"] = "<unk>"; }, {"model.unk_token", "not supported"});
  expect_load_error([](json& f) { f["model"]["vocab"]["Ġ"] = 5000; }, {"model.vocab", "no token has id"});
  expect_load_error([](json& f) { f["model"]["vocab"]["Ġ"] = 0; }, {"model.vocab[\"Ġ\"]", "id 0 is given to both"});
  expect_load_error([](json& f) { f["added_tokens"][0]["lstrip"] = true; }, {"added_tokens[0].lstrip"});
}

}  // namespace
}  // namespace eddy::io
