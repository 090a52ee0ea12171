// Hugging Face's tokenizer.json for eddy's byte-level BPE. The reader accepts exactly the files
// eddy encodes as the `tokenizers` package would, and names the key of anything else.

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "eddy/core/error.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/tokenizer.h"

namespace eddy::io {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// What `tokenizers` writes for the ByteLevel pre-tokenizer and decoder of GPT-2's scheme.
ordered_json byte_level_stage() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
}

class FileChecks {
 public:
  explicit FileChecks(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw Error(cat(source_, ": ", key, ": ", problem));
  }
  const json& required(const json& object, const std::string& name, const std::string& key) const {
    if (!object.contains(name)) fail(key, "missing");
    return object[name];
  }
  // A stage (normalizer, pre_tokenizer, ...) is absent, null, or an object with a string "type".
  std::string stage_type(const json& file, const std::string& key) const {
    if (!file.contains(key) || file[key].is_null()) return "";
    const json& stage = file[key];
    if (!stage.is_object() || !stage.contains("type") || !stage["type"].is_string()) {
      fail(key, "must be null or an object with a string \"type\"");
    }
    return stage["type"].get<std::string>();
  }
  // An optional setting that eddy supports only at its default (`expected`, or null).
  void require_default(const json& object, const std::string& name, const json& expected, const std::string& key,
                       const std::string& why) const {
    if (!object.contains(name) || object[name].is_null() || object[name] == expected) return;
    fail(key, cat(object[name].dump(), " is not supported (", why, ")"));
  }

 private:
  const std::string& source_;
};

// Whether a TemplateProcessing post-processor leaves the ids as they are: its templates hold the
// texts alone ({"Sequence": ...} pieces, one in `single`) and it names no special tokens.
// transformers 5 writes such a template into every tokenizer.json it saves, eddy's own exported
// one included.
bool template_adds_nothing(const json& stage) {
  auto texts_only = [&](const char* name, size_t count) {
    if (!stage.contains(name)) return count != 1;
    const json& pieces = stage[name];
    if (!pieces.is_array() || (count == 1 && pieces.size() != 1)) return false;
    return std::all_of(pieces.begin(), pieces.end(),
                       [](const json& piece) { return piece.is_object() && piece.size() == 1 && piece.contains("Sequence"); });
  };
  const bool no_special_tokens =
      !stage.contains("special_tokens") || (stage["special_tokens"].is_object() && stage["special_tokens"].empty());
  return no_special_tokens && texts_only("single", 1) && texts_only("pair", 0);
}

// The stages around the model: no normalizer, truncation or padding; GPT-2's byte-level split;
// byte-level or no decoding, and post-processing that adds no tokens (ByteLevel post-processing
// only moves offsets).
void check_stages(const json& file, const FileChecks& checks) {
  for (const char* absent : {"truncation", "padding"}) {
    checks.require_default(file, absent, nullptr, absent, "eddy encodes whole texts without padding");
  }
  const std::string normalizer = checks.stage_type(file, "normalizer");
  if (!normalizer.empty()) {
    checks.fail("normalizer", cat("unsupported normalizer \"", normalizer, "\" (eddy reads files without one)"));
  }
  const std::string pre_tokenizer = checks.stage_type(file, "pre_tokenizer");
  if (pre_tokenizer != "ByteLevel") {
    checks.fail("pre_tokenizer", pre_tokenizer.empty()
                                     ? std::string("missing; eddy reads the ByteLevel pre-tokenizer")
                                     : cat("unsupported pre-tokenizer \"", pre_tokenizer,
                                           "\" (eddy reads the ByteLevel pre-tokenizer)"));
  }
  const json& byte_level = file["pre_tokenizer"];
  if (!byte_level.contains("add_prefix_space") || byte_level["add_prefix_space"] != false) {
    checks.fail("pre_tokenizer.add_prefix_space", "must be false (eddy does not add a leading space)");
  }
  checks.require_default(byte_level, "use_regex", true, "pre_tokenizer.use_regex",
                         "eddy always splits with GPT-2's pattern");
  const std::string decoder = checks.stage_type(file, "decoder");
  if (!decoder.empty() && decoder != "ByteLevel") {
    checks.fail("decoder", cat("unsupported decoder \"", decoder, "\" (eddy reads ByteLevel or null)"));
  }
  const std::string post_processor = checks.stage_type(file, "post_processor");
  if (!post_processor.empty() && post_processor != "ByteLevel" &&
      !(post_processor == "TemplateProcessing" && template_adds_nothing(file["post_processor"]))) {
    checks.fail("post_processor", cat("unsupported post_processor \"", post_processor,
                                      "\" (eddy reads ByteLevel, null, or a TemplateProcessing that adds no tokens)"));
  }
}

void check_model_options(const json& model, const FileChecks& checks) {
  // Older files leave the type out, and `tokenizers` then reads them as BPE first.
  if (model.contains("type") && model["type"] != "BPE") {
    checks.fail("model.type", cat(model["type"].dump(), " is not supported (eddy reads BPE models)"));
  }
  checks.require_default(model, "dropout", nullptr, "model.dropout", "encoding is deterministic");
  checks.require_default(model, "unk_token", nullptr, "model.unk_token", "every byte has its own token");
  checks.require_default(model, "continuing_subword_prefix", "", "model.continuing_subword_prefix",
                         "byte-level tokens carry no prefix");
  checks.require_default(model, "end_of_word_suffix", "", "model.end_of_word_suffix",
                         "byte-level tokens carry no suffix");
  checks.require_default(model, "byte_fallback", false, "model.byte_fallback", "tokens are bytes already");
  checks.require_default(model, "ignore_merges", false, "model.ignore_merges", "every word is merged by rank");
}

// A merge entry as its two tokens: "left right", or ["left", "right"] as newer `tokenizers` write.
std::pair<std::string, std::string> merge_tokens(const json& entry, const std::string& key, const FileChecks& checks) {
  if (entry.is_string()) {
    const std::string text = entry.get<std::string>();
    const size_t space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
      checks.fail(key, cat("\"", text, "\" is not two tokens separated by one space"));
    }
    return {text.substr(0, space), text.substr(space + 1)};
  }
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
    return {entry[0].get<std::string>(), entry[1].get<std::string>()};
  }
  checks.fail(key, "must be a \"left right\" string or a [\"left\", \"right\"] pair");
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(const std::string& text, const std::string& source) {
  json file;
  try {
    file = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(cat(source, ": invalid JSON at byte ", e.byte, " (", e.what(), ")"));
  } catch (const json::exception& e) {  // a number beyond double's range (1e400) is out_of_range
    throw Error(cat(source, ": invalid JSON (", e.what(), ")"));
  }
  const FileChecks checks(source);
  if (!file.is_object()) checks.fail("(top level)", "not a JSON object, so not a tokenizer.json");
  check_stages(file, checks);
  const json& model = checks.required(file, "model", "model");
  if (!model.is_object()) checks.fail("model", "must be an object");
  check_model_options(model, checks);

  // Every id from 0 up names one token: model.vocab's, and added tokens (usually in both).
  std::map<int64_t, std::string> token_of_id;
  std::map<std::string, int64_t> id_of_token;
  auto claim = [&](const std::string& token, const json& id, const std::string& key) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      checks.fail(key, cat("id ", id.dump(), " is not an integer from 0 to ", INT32_MAX));
    }
    const auto [by_id, id_is_new] = token_of_id.try_emplace(id.get<int64_t>(), token);
    if (!id_is_new && by_id->second != token) {
      checks.fail(key, cat("id ", id.dump(), " is given to both \"", by_id->second, "\" and \"", token, "\""));
    }
    const auto [by_token, token_is_new] = id_of_token.try_emplace(token, id.get<int64_t>());
    if (!token_is_new && by_token->second != id.get<int64_t>()) {
      checks.fail(key, cat("\"", token, "\" has two ids, ", by_token->second, " and ", id.dump()));
    }
  };
  const json& vocab = checks.required(model, "vocab", "model.vocab");
  if (!vocab.is_object()) checks.fail("model.vocab", "must be an object of token: id");
  for (const auto& [token, id] : vocab.items()) claim(token, id, cat("model.vocab[\"", token, "\"]"));

  BpeTokenizer tokenizer;
  const json& added_tokens = file.contains("added_tokens") ? file["added_tokens"] : json::array();
  if (!added_tokens.is_array()) checks.fail("added_tokens", "must be an array");
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const std::string key = cat("added_tokens[", i, "]");
    const json& added = added_tokens[i];
    if (!added.is_object()) checks.fail(key, "must be an object");
    const json& content = checks.required(added, "content", key + ".content");
    if (!content.is_string() || content.get<std::string>().empty()) checks.fail(key + ".content", "must be a non-empty string");
    claim(content.get<std::string>(), checks.required(added, "id", key + ".id"), key + ".id");
    for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
      checks.require_default(added, flag, false, cat(key, ".", flag), "added tokens match exactly their text");
    }
    auto boolean_flag = [&](const char* name, bool otherwise) {
      if (!added.contains(name)) return otherwise;
      if (!added[name].is_boolean()) checks.fail(cat(key, ".", name), "must be true or false");
      return added[name].get<bool>();
    };
    const bool special = boolean_flag("special", false);
    // `tokenizers` requires `normalized`; without it, what its AddedToken constructor gives.
    const bool normalized = boolean_flag("normalized", !special);
    tokenizer.added_tokens_.push_back(
        {static_cast<int32_t>(id_of_token.at(content.get<std::string>())), special, normalized});
  }
  int64_t expected_id = 0;
  for (auto& [id, token] : token_of_id) {
    if (id != expected_id) checks.fail("model.vocab", cat("no token has id ", expected_id, "; ids must run from 0 without gaps"));
    tokenizer.tokens_.push_back(std::move(token));
    ++expected_id;
  }

  const json& merges = checks.required(model, "merges", "model.merges");
  if (!merges.is_array()) checks.fail("model.merges", "must be an array");
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string key = cat("model.merges[", rank, "]");
    const auto [left, right] = merge_tokens(merges[rank], key, checks);
    for (const std::string* token : {&left, &right}) {
      if (!id_of_token.contains(*token)) checks.fail(key, cat("names \"", *token, "\", which is not in model.vocab"));
    }
    if (!id_of_token.contains(left + right)) {
      checks.fail(key, cat("merges into \"", left + right, "\", which is not in model.vocab"));
    }
    tokenizer.merges_.emplace_back(id_of_token.at(left), id_of_token.at(right));
  }
  tokenizer.index();
  return tokenizer;
}

BpeTokenizer BpeTokenizer::load(const std::string& path) { return from_json(read_file(path), path); }

std::string BpeTokenizer::to_json() const {
  ordered_json added = ordered_json::array();
  for (const AddedToken& token : added_tokens_) {
    added.push_back({{"id", token.id}, {"content", tokens_[token.id]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", token.normalized}, {"special", token.special}});
  }
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < tokens_.size(); ++id) vocab[tokens_[id]] = id;
  // "left right" strings are read by every version of `tokenizers`; byte-level tokens hold no
  // space, so only a file loaded with other tokens needs the [left, right] pairs.
  bool tokens_hold_spaces = false;
  for (const auto& [left, right] : merges_) {
    tokens_hold_spaces |= tokens_[left].find(' ') != std::string::npos || tokens_[right].find(' ') != std::string::npos;
  }
  ordered_json merges = ordered_json::array();
  for (const auto& [left, right] : merges_) {
    if (tokens_hold_spaces) {
      merges.push_back({tokens_[left], tokens_[right]});
    } else {
      merges.push_back(tokens_[left] + " " + tokens_[right]);
    }
  }
  ordered_json model = {{"type", "BPE"},         {"dropout", nullptr},      {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr},           {"end_of_word_suffix", nullptr},
                        {"fuse_unk", false},     {"byte_fallback", false},  {"ignore_merges", false},
                        {"vocab", vocab},        {"merges", merges}};
  ordered_json file = {{"version", "1.0"},          {"truncation", nullptr},          {"padding", nullptr},
                       {"added_tokens", added},     {"normalizer", nullptr},          {"pre_tokenizer", byte_level_stage()},
                       {"post_processor", nullptr}, {"decoder", byte_level_stage()}, {"model", model}};
  try {
    return file.dump(2) + "\n";
  } catch (const json::type_error& e) {
    throw Error(cat("tokenizer: a token is not valid UTF-8, which tokenizer.json cannot hold (", e.what(), ")"));
  }
}

void BpeTokenizer::save(const std::string& path) const { write_file_atomically(path, to_json()); }

}  // namespace eddy::io
