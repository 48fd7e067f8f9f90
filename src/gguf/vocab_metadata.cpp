#include "gguf/vocab_metadata.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

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

std::optional<json> read_json(const fs::path& path) {
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream stream(path, std::ios::binary);
  std::stringstream text;
  text << stream.rdbuf();
  json parsed = json::parse(text.str(), nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) fail_user("{}: not a valid JSON object", path.string());
  return parsed;
}

std::optional<std::string> token_content(const json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) {
    return entry["content"].get<std::string>();
  }
  return std::nullopt;
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
  bool byte_level_regex = false;
  for (const json& step : steps) {
    const std::string type = step.value("type", "");
    if (type == "Split" && step.contains("pattern") && step["pattern"].contains("Regex")) {
      regexes.push_back(step["pattern"]["Regex"].get<std::string>());
    } else if (type == "ByteLevel") {
      byte_level_regex = step.value("use_regex", true);
    }
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

// gguf-py's SpecialVocab: special token ids, add_*_token flags, the chat template.
class SpecialTokens {
 public:
  SpecialTokens(const json& tokenizer, std::optional<json> tokenizer_config, const json& model_config,
                const fs::path& model_dir, int64_t vocab_size)
      : vocab_size_(vocab_size) {
    const json added = tokenizer.contains("added_tokens") ? tokenizer["added_tokens"] : json::array();
    read_post_processor(tokenizer, tokenizer_config);
    if (tokenizer_config) read_tokenizer_config(*tokenizer_config, added, model_dir);
    for (const std::string& type : types_) {
      const std::string key = type + "_token_id";
      if (model_config.contains(key)) set(type, model_config[key]);
    }
  }

  void write(Metadata& metadata) const {
    static const std::map<std::string, std::string> id_keys = {
        {"bos", "tokenizer.ggml.bos_token_id"},     {"eos", "tokenizer.ggml.eos_token_id"},
        {"unk", "tokenizer.ggml.unknown_token_id"}, {"sep", "tokenizer.ggml.seperator_token_id"},
        {"pad", "tokenizer.ggml.padding_token_id"}, {"mask", "tokenizer.ggml.mask_token_id"},
        {"eot", "tokenizer.ggml.eot_token_id"},     {"eom", "tokenizer.ggml.eom_token_id"}};
    static const std::map<std::string, std::string> add_keys = {{"bos", "tokenizer.ggml.add_bos_token"},
                                                                {"eos", "tokenizer.ggml.add_eos_token"},
                                                                {"sep", "tokenizer.ggml.add_sep_token"}};
    for (const auto& [type, id] : ids_) {
      if (auto key = id_keys.find(type); key != id_keys.end()) metadata.set_u32(key->second, static_cast<uint32_t>(id));
    }
    for (const auto& [type, value] : add_) {
      if (auto key = add_keys.find(type); key != add_keys.end()) metadata.set_bool(key->second, value);
    }
    if (chat_template_.is_string()) {
      metadata.set_string("tokenizer.chat_template", chat_template_.get<std::string>());
    } else if (chat_template_.is_array()) {
      write_named_templates(metadata);
    }
  }

 private:
  void set(const std::string& type, const json& id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size_) return;
    for (const auto& entry : ids_) {
      if (entry.first == type) return;  // the first source wins
    }
    ids_.emplace_back(type, id.get<int64_t>());
  }
  void set_add_default(const std::string& type, bool value) {
    for (const auto& entry : add_) {
      if (entry.first == type) return;
    }
    add_.emplace_back(type, value);
  }
  void set_add(const std::string& type, bool value) {
    for (auto& entry : add_) {
      if (entry.first == type) {
        entry.second = value;
        return;
      }
    }
    add_.emplace_back(type, value);
  }

  static std::optional<std::string> special_id(const json& piece) {
    if (piece.contains("SpecialToken") && piece["SpecialToken"].contains("id")) {
      return piece["SpecialToken"]["id"].get<std::string>();
    }
    return std::nullopt;
  }

  // The converter's crude reading of a TemplateProcessing: a leading special token means add_bos, a
  // trailing one add_eos, one between the pair's sequences add_sep.
  void read_post_processor(const json& tokenizer, std::optional<json>& config) {
    if (!tokenizer.contains("post_processor") || !tokenizer["post_processor"].is_object()) return;
    const json& post = tokenizer["post_processor"];
    const auto config_text = [&](const char* key) -> std::optional<std::string> {
      if (!config || !config->contains(key)) return std::nullopt;
      return token_content((*config)[key]);
    };
    std::optional<std::string> bos = config_text("bos_token"), eos = config_text("eos_token");
    std::optional<std::string> cls = config_text("cls_token"), sep = config_text("sep_token");
    if (!bos && cls && config) (*config)["bos_token"] = *(bos = cls);
    if (!eos && sep && config) (*config)["eos_token"] = *(eos = sep);
    const json processors = post.contains("processors") ? post["processors"] : json::array({post});
    for (const json& processor : processors) {
      const std::string type = processor.value("type", "");
      if (type == "ByteLevel") {  // adds nothing: unless something else says so, neither bos nor eos
        set_add_default("bos", false);
        set_add_default("eos", false);
        continue;
      }
      if (type == "RobertaProcessing") {
        set_add("bos", true);
        set_add("eos", true);
        set_add("sep", true);
        continue;
      }
      if (type != "TemplateProcessing") continue;
      const json single = processor.value("single", json::array());
      json pair = processor.value("pair", json::array());
      std::optional<std::string> first, last;
      if (single.size() > 1) {
        if ((first = special_id(single.front()))) {
          if (!config) {
            bos = first;
          } else if (first != bos && first != cls) {  // the template's leading token is the bos / cls token
            if (!bos) (*config)["bos_token"] = *(bos = first);
            if (!cls) (*config)["cls_token"] = *(cls = first);
          }
          set_add("bos", first == bos || first == cls);
        }
        if ((last = special_id(single.back()))) {
          if (!config) {
            eos = last;
          } else if (last != eos) {
            if (std::find(types_.begin(), types_.end(), "eot") == types_.end()) {
              types_.push_back("eot");
              if (eos) (*config)["eot_token"] = *eos;
            } else if (std::find(types_.begin(), types_.end(), "eom") == types_.end()) {
              types_.push_back("eom");
              if (eos) (*config)["eom_token"] = *eos;
            }
            (*config)["eos_token"] = *last;
            eos = last;
          }
          set_add("eos", last == eos);
        }
      }
      if (pair.empty()) continue;
      size_t start = first && special_id(pair.front()) == first ? 1 : 0;
      size_t stop = last && special_id(pair.back()) == last ? pair.size() - 1 : pair.size();
      if (stop <= start) continue;
      json middle(json::array());
      for (size_t i = start; i < stop; ++i) middle.push_back(pair[i]);
      const auto sequence_id = [](const json& piece) -> std::string {
        return piece.contains("Sequence") ? piece["Sequence"].value("id", "") : "";
      };
      if (sequence_id(middle.front()) != "A" || sequence_id(middle.back()) != "B" || middle.size() < 3) continue;
      bool add_sep = false;
      const auto separator = [&](const json& piece) {
        const std::optional<std::string> id = special_id(piece);
        return id && (id == sep || id == eos);
      };
      if (separator(middle[1]) && !last) add_sep = true;
      if (middle.size() - 2 == 2 && separator(middle[2])) add_sep = true;
      set_add("sep", add_sep);
      if (add_sep && !sep && config && eos) (*config)["sep_token"] = *eos;
    }
  }

  void read_tokenizer_config(const json& config, const json& added, const fs::path& model_dir) {
    json alternative;
    if (fs::exists(model_dir / "chat_template.jinja")) {
      std::ifstream stream(model_dir / "chat_template.jinja", std::ios::binary);
      std::stringstream text;
      text << stream.rdbuf();
      alternative = text.str();
    } else if (auto file = read_json(model_dir / "chat_template.json")) {
      alternative = file->value("chat_template", json());
    }
    chat_template_ = config.contains("chat_template") ? config["chat_template"] : alternative;
    for (const std::string& type : types_) {
      if (config.contains("add_" + type + "_token") && config["add_" + type + "_token"].is_boolean()) {
        set_add(type, config["add_" + type + "_token"].get<bool>());
      }
      if (!config.contains(type + "_token")) continue;
      const std::optional<std::string> content = token_content(config[type + "_token"]);
      if (!content) continue;
      for (const json& token : added) {
        if (token.contains("content") && token["content"] == *content) {
          set(type, token["id"]);
          break;
        }
      }
    }
  }

  void write_named_templates(Metadata& metadata) const {
    std::optional<std::string> fallback;
    std::set<std::string> names;
    for (const json& choice : chat_template_) {
      if (!choice.is_object() || !choice.contains("template") || !choice["template"].is_string()) continue;
      std::string name = choice.value("name", "");
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      if (name.empty()) continue;
      if (name == "default") {
        fallback = choice["template"].get<std::string>();
      } else {
        names.insert(name);
        metadata.set_string("tokenizer.chat_template." + name, choice["template"].get<std::string>());
      }
    }
    if (!names.empty()) metadata.set_string_array("tokenizer.chat_templates", {names.begin(), names.end()});
    if (fallback) metadata.set_string("tokenizer.chat_template", *fallback);
  }

  int64_t vocab_size_;
  std::vector<std::string> types_ = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  std::vector<std::pair<std::string, int64_t>> ids_;
  std::vector<std::pair<std::string, bool>> add_;
  json chat_template_;
};

// tokenizer.ggml.normalizer.lowercase / .strip_accents from Lowercase, StripAccents or BertNormalizer
// steps of the normalizer (a Sequence is searched), as gguf-py's SpecialVocab reads them.
void add_normalizer_flags(Metadata& metadata, const json& normalizer) {
  if (!normalizer.is_object()) return;
  const std::string type = normalizer.value("type", "");
  if (type == "Lowercase") {
    metadata.set_bool("tokenizer.ggml.normalizer.lowercase", true);
  } else if (type == "StripAccents") {
    metadata.set_bool("tokenizer.ggml.normalizer.strip_accents", true);
  } else if (type == "BertNormalizer") {
    if (normalizer.contains("lowercase") && normalizer["lowercase"].is_boolean()) {
      metadata.set_bool("tokenizer.ggml.normalizer.lowercase", normalizer["lowercase"].get<bool>());
    }
    if (normalizer.contains("strip_accents") && normalizer["strip_accents"].is_boolean()) {
      metadata.set_bool("tokenizer.ggml.normalizer.strip_accents", normalizer["strip_accents"].get<bool>());
    }
  } else if (type == "Sequence" && normalizer.contains("normalizers") && normalizer["normalizers"].is_array()) {
    for (const json& step : normalizer["normalizers"]) add_normalizer_flags(metadata, step);
  }
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
  if (tokenizer->contains("normalizer")) add_normalizer_flags(metadata, (*tokenizer)["normalizer"]);
  const json model_config = config.source_json.empty() ? json::object() : json::parse(config.source_json, nullptr, false);
  SpecialTokens(*tokenizer, tokenizer_config, model_config, model_dir, config.vocab_size).write(metadata);
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
