#include "gguf/special_tokens.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/tokenizer_json.h"

namespace surogate::gguf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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

}  // namespace

void add_special_tokens(Metadata& metadata, const json& tokenizer, std::optional<json> tokenizer_config,
                        const json& model_config, const fs::path& model_dir, int64_t vocab_size) {
  if (tokenizer.contains("normalizer")) add_normalizer_flags(metadata, tokenizer["normalizer"]);
  SpecialTokens(tokenizer, std::move(tokenizer_config), model_config, model_dir, vocab_size).write(metadata);
}

}  // namespace surogate::gguf
