#include "gguf/vocab_metadata.h"

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf/special_tokens.h"
#include "gguf/tokenizer_json.h"

namespace surogate::gguf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// llama.cpp's llama_token_type.
enum TokenType : int32_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// The split regexes of the byte-level pre-tokenizers llama.cpp implements, by its `pre` name.
const std::vector<std::pair<std::string, std::string>>& known_split_patterns() {
  static const std::vector<std::pair<std::string, std::string>> patterns = {
      {"llama-bpe",
       R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
      {"qwen2",
       R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
  };
  return patterns;
}

bool looks_special(const std::string& token) {
  const auto wrapped = [&](std::string_view open, std::string_view close) {
    return token.size() >= open.size() + close.size() && token.starts_with(open) && token.ends_with(close);
  };
  return token == "<pad>" || token == "<mask>" || token == "<2mass>" || token == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

struct AddedToken {
  std::string content;
  bool special = false;
};

struct Vocabulary {
  std::map<int64_t, std::string> tokens;  // id → text, model vocabulary and added tokens
  std::map<int64_t, AddedToken> added;
  int64_t model_size = 0;                 // ids of model.vocab only (HF's tokenizer.vocab_size)
};

Vocabulary read_vocabulary(const json& tokenizer, const std::string& source) {
  Vocabulary vocabulary;
  const json& model = tokenizer["model"];
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail_user("{}: model.vocab must be an object", source);
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) fail_user("{}: model.vocab['{}'] must be an integer id", source, text);
    vocabulary.tokens[id.get<int64_t>()] = text;
  }
  vocabulary.model_size = static_cast<int64_t>(model["vocab"].size());
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array()) {
    for (const json& entry : tokenizer["added_tokens"]) {
      if (!entry.contains("id") || !entry["id"].is_number_integer() || !token_content(entry)) continue;
      const int64_t id = entry["id"].get<int64_t>();
      const bool special = entry.value("special", false);
      vocabulary.added[id] = AddedToken{*token_content(entry), special};
      vocabulary.tokens[id] = *token_content(entry);
    }
  }
  return vocabulary;
}

// The byte-level pre-tokenizer's name in llama.cpp, from tokenizer.json's pre_tokenizer.
std::string byte_level_pre_name(const json& tokenizer, const std::string& source) {
  const json& pre = tokenizer.contains("pre_tokenizer") ? tokenizer["pre_tokenizer"] : json();
  std::vector<json> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
    for (const json& step : pre["pretokenizers"]) steps.push_back(step);
  } else if (pre.is_object()) {
    steps.push_back(pre);
  }
  std::vector<std::string> regexes;
  bool byte_level = false, byte_level_regex = false;
  for (const json& step : steps) {
    const std::string type = step.value("type", "");
    if (type == "Split" && step.contains("pattern") && step["pattern"].contains("Regex")) {
      regexes.push_back(step["pattern"]["Regex"].get<std::string>());
    } else if (type == "ByteLevel") {
      byte_level = true;
      byte_level_regex = step.value("use_regex", true);
    }
  }
  if (!byte_level) {
    fail_user("{}: a BPE tokenizer that is neither byte-level (a ByteLevel pre-tokenizer: GPT-2, Llama 3, Qwen) nor "
              "SentencePiece-style (byte_fallback with a Sequence decoder: Llama 2, Mistral); llama.cpp's gpt2 and "
              "llama tokenizers cannot reproduce it, so surogate export does not write it", source);
  }
  if (regexes.empty() && byte_level_regex) return "gpt-2";
  if (regexes.size() == 1 && !byte_level_regex) {
    for (const auto& [name, pattern] : known_split_patterns()) {
      if (regexes[0] == pattern) return name;
    }
  }
  fail_user("{}: the byte-level pre-tokenizer ({}) is none that surogate export recognises (Llama 3's split regex, "
            "Qwen2's, or GPT-2's ByteLevel); llama.cpp needs its name (tokenizer.ggml.pre) to tokenize like the model",
            source, regexes.empty() ? std::string("no split regex") : fmt::format("split regex '{}'", regexes[0]));
}

std::vector<std::string> merges_of(const json& tokenizer, const std::string& source) {
  std::vector<std::string> merges;
  const json& model = tokenizer["model"];
  if (!model.contains("merges") || !model["merges"].is_array()) return merges;
  for (const json& merge : model["merges"]) {
    if (merge.is_string()) {
      merges.push_back(merge.get<std::string>());
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      // The pair form (transformers ≥ 4.45) may hold spaces; gguf-py encodes them as U+0120 + 256 - 32
      // ("Ġ" shifted: chr(ord(' ') + 256)) so the joined string splits back in two.
      const auto encode = [](const std::string& part) { return replace_all(part, " ", "\xC4\xA0"); };
      merges.push_back(encode(merge[0].get<std::string>()) + " " + encode(merge[1].get<std::string>()));
    } else {
      fail_user("{}: model.merges holds an entry that is neither \"a b\" nor [\"a\", \"b\"]", source);
    }
  }
  return merges;
}

void add_gpt2_vocabulary(Metadata& metadata, const json& tokenizer, const Vocabulary& vocabulary, int64_t vocab_size,
                         const std::string& source) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int64_t id = 0; id < vocab_size; ++id) {
    const auto found = vocabulary.tokens.find(id);
    if (found == vocabulary.tokens.end()) {
      tokens.push_back(fmt::format("[PAD{}]", id));
      types.push_back(kUnused);
      continue;
    }
    std::string token = found->second;
    const auto added = vocabulary.added.find(id);
    if (added == vocabulary.added.end()) {
      types.push_back(kNormal);
    } else if (added->second.special || looks_special(token)) {
      types.push_back(kControl);
    } else {
      token = replace_all(token, "\xE2\x96\x81", " ");  // user-defined pieces with SentencePiece spaces
      types.push_back(kUserDefined);
    }
    tokens.push_back(std::move(token));
  }
  metadata.set_string("tokenizer.ggml.model", "gpt2");
  metadata.set_string("tokenizer.ggml.pre", byte_level_pre_name(tokenizer, source));
  metadata.set_string_array("tokenizer.ggml.tokens", tokens);
  metadata.set_i32_array("tokenizer.ggml.token_type", types);
}

void add_sentencepiece_vocabulary(Metadata& metadata, const json& tokenizer, const json& tokenizer_config,
                                  const Vocabulary& vocabulary, int64_t vocab_size) {
  // HF's all_special_ids: the named special tokens of tokenizer_config.json and its
  // additional_special_tokens.
  std::set<std::string> special_texts;
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (tokenizer_config.contains(name)) {
      if (auto content = token_content(tokenizer_config[name])) special_texts.insert(*content);
    }
  }
  if (tokenizer_config.contains("additional_special_tokens") && tokenizer_config["additional_special_tokens"].is_array()) {
    for (const json& entry : tokenizer_config["additional_special_tokens"]) {
      if (auto content = token_content(entry)) special_texts.insert(*content);
    }
  }
  std::map<std::string, int64_t> merge_rank;
  const std::vector<std::string> merges = merges_of(tokenizer, "tokenizer.json");
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const size_t space = merges[rank].find(' ');
    merge_rank.emplace(merges[rank].substr(0, space) + merges[rank].substr(space + 1), static_cast<int64_t>(rank));
  }
  static const std::regex byte_token("<0x[0-9A-Fa-f]{2}>");
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int64_t id = 0; id < vocab_size; ++id) {
    const auto found = vocabulary.tokens.find(id);
    if (found == vocabulary.tokens.end()) {
      tokens.push_back(fmt::format("[PAD{}]", id));
      scores.push_back(0.0f);
      types.push_back(kUnused);
      continue;
    }
    const std::string& token = found->second;
    const bool special = special_texts.contains(token);
    if (id >= vocabulary.model_size) {
      types.push_back(special ? kControl : kUserDefined);
    } else if (std::regex_match(token, byte_token)) {
      types.push_back(kByte);
    } else {
      types.push_back(special ? kControl : kNormal);
    }
    const auto rank = merge_rank.find(token);
    scores.push_back(rank == merge_rank.end() ? 0.0f : -static_cast<float>(rank->second));
    tokens.push_back(token);
  }
  metadata.set_string("tokenizer.ggml.model", "llama");
  metadata.set_string("tokenizer.ggml.pre", "default");
  metadata.set_string_array("tokenizer.ggml.tokens", tokens);
  metadata.set_f32_array("tokenizer.ggml.scores", scores);
  metadata.set_i32_array("tokenizer.ggml.token_type", types);
}

void add_tokenizer_keys(Metadata& metadata, const fs::path& model_dir, const io::ModelConfig& config) {
  const fs::path tokenizer_path = model_dir / "tokenizer.json";
  const std::optional<json> tokenizer = read_json(tokenizer_path);
  if (!tokenizer) {
    fail_user("{}: missing; a GGUF file carries the tokenizer, so the model folder needs its tokenizer.json (copy it "
              "from the base model)", tokenizer_path.string());
  }
  const std::string source = tokenizer_path.string();
  if (!tokenizer->contains("model") || !(*tokenizer)["model"].is_object() ||
      (*tokenizer)["model"].value("type", "") != "BPE") {
    fail_user("{}: model.type must be BPE (byte-level or SentencePiece-style); llama.cpp's gpt2 / llama tokenizers "
              "read nothing else", source);
  }
  const std::optional<json> tokenizer_config = read_json(model_dir / "tokenizer_config.json");
  const Vocabulary vocabulary = read_vocabulary(*tokenizer, source);
  const int64_t largest = vocabulary.tokens.empty() ? -1 : vocabulary.tokens.rbegin()->first;
  if (largest >= config.vocab_size) {
    fail_user("{}: token id {} is beyond config.json's vocab_size {}: the tokenizer does not belong to this model",
              source, largest, config.vocab_size);
  }
  const json& model = (*tokenizer)["model"];
  const bool sentencepiece_style = model.value("byte_fallback", false) && tokenizer->contains("decoder") &&
                                   (*tokenizer)["decoder"].is_object() &&
                                   (*tokenizer)["decoder"].value("type", "") == "Sequence";
  if (sentencepiece_style) {
    add_sentencepiece_vocabulary(metadata, *tokenizer, tokenizer_config.value_or(json::object()), vocabulary,
                                 config.vocab_size);
  } else {
    add_gpt2_vocabulary(metadata, *tokenizer, vocabulary, config.vocab_size, source);
    metadata.set_string_array("tokenizer.ggml.merges", merges_of(*tokenizer, source));
  }
  const json model_config = config.source_json.empty() ? json::object() : json::parse(config.source_json, nullptr, false);
  add_special_tokens(metadata, *tokenizer, tokenizer_config, model_config, model_dir, config.vocab_size);
}

}  // namespace

void add_vocab_metadata(Metadata& metadata, const fs::path& model_dir, const io::ModelConfig& config) {
  try {
    add_tokenizer_keys(metadata, model_dir, config);
  } catch (const nlohmann::json::exception& error) {
    // A key of an unexpected JSON type somewhere in the tokenizer files (the checks above cover the
    // keys a valid tokenizer needs; this covers the rest of what a hand-edited file can hold).
    fail_user("{}: tokenizer.json / tokenizer_config.json hold a value of an unexpected type ({}); compare them with "
              "the base model's", model_dir.string(), error.what());
  }
}

}  // namespace surogate::gguf
