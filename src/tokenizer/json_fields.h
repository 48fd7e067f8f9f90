// Reading fields of tokenizer.json / tokenizer_config.json with errors that name the file, the
// key path (e.g. `pre_tokenizer.pretokenizers[1].type`) and what the user should do.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace surogate::tokenizer {

// A location inside a JSON document: the file and the key path from its root.
class JsonPath {
 public:
  JsonPath(std::string file, std::string key = {}) : file_(std::move(file)), key_(std::move(key)) {}
  JsonPath child(std::string_view key) const;
  JsonPath index(size_t position) const;
  const std::string& file() const { return file_; }
  const std::string& key() const { return key_; }

 private:
  std::string file_;
  std::string key_;
};

// Throws UserError "<file>: key '<path>': <problem>".
[[noreturn]] void fail_at(const JsonPath& where, std::string_view problem);

// `object[key]` of an object; fails when `object` is not an object or lacks the key.
const nlohmann::json& require_field(const nlohmann::json& object, std::string_view key,
                                    const JsonPath& where);
// `object[key]` when present and not null.
const nlohmann::json* optional_field(const nlohmann::json& object, std::string_view key);

std::string require_string(const nlohmann::json& object, std::string_view key,
                           const JsonPath& where);
std::optional<std::string> optional_string(const nlohmann::json& object, std::string_view key,
                                           const JsonPath& where);
bool bool_or(const nlohmann::json& object, std::string_view key, bool fallback,
             const JsonPath& where);
int64_t require_integer(const nlohmann::json& object, std::string_view key, const JsonPath& where);

// The one character (code point) `text` must be, e.g. Metaspace's replacement "▁".
char32_t single_character(const std::string& text, const JsonPath& where);

// The component's `type` string, for dispatch on normalizers, pre-tokenizers, decoders, ...
std::string component_type(const nlohmann::json& component, const JsonPath& where);
// Error for a `type` this implementation does not handle, listing the supported ones.
[[noreturn]] void fail_unsupported(const JsonPath& where, std::string_view kind,
                                   std::string_view type, std::string_view supported);

}  // namespace surogate::tokenizer
