// Field access with one error style for every tokenizer component parser.
#include "tokenizer/json_fields.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace surogate::tokenizer {

JsonPath JsonPath::child(std::string_view key) const {
  return JsonPath(file_, key_.empty() ? std::string(key) : fmt::format("{}.{}", key_, key));
}

JsonPath JsonPath::index(size_t position) const {
  return JsonPath(file_, fmt::format("{}[{}]", key_, position));
}

void fail_at(const JsonPath& where, std::string_view problem) {
  if (where.key().empty()) fail_user("{}: {}", where.file(), problem);
  fail_user("{}: key '{}': {}", where.file(), where.key(), problem);
}

const nlohmann::json& require_field(const nlohmann::json& object, std::string_view key,
                                    const JsonPath& where) {
  if (!object.is_object())
    fail_at(where, fmt::format("expected a JSON object, found {}", object.type_name()));
  auto found = object.find(key);
  if (found == object.end())
    fail_at(where.child(key), "is missing; the file looks truncated or hand-edited");
  return *found;
}

const nlohmann::json* optional_field(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto found = object.find(key);
  if (found == object.end() || found->is_null()) return nullptr;
  return &*found;
}

std::string require_string(const nlohmann::json& object, std::string_view key,
                           const JsonPath& where) {
  const nlohmann::json& value = require_field(object, key, where);
  if (!value.is_string())
    fail_at(where.child(key), fmt::format("expected a string, found {}", value.type_name()));
  return value.get<std::string>();
}

std::optional<std::string> optional_string(const nlohmann::json& object, std::string_view key,
                                           const JsonPath& where) {
  const nlohmann::json* value = optional_field(object, key);
  if (!value) return std::nullopt;
  if (!value->is_string())
    fail_at(where.child(key), fmt::format("expected a string, found {}", value->type_name()));
  return value->get<std::string>();
}

bool bool_or(const nlohmann::json& object, std::string_view key, bool fallback,
             const JsonPath& where) {
  const nlohmann::json* value = optional_field(object, key);
  if (!value) return fallback;
  if (!value->is_boolean())
    fail_at(where.child(key), fmt::format("expected true or false, found {}", value->type_name()));
  return value->get<bool>();
}

int64_t require_integer(const nlohmann::json& object, std::string_view key, const JsonPath& where) {
  const nlohmann::json& value = require_field(object, key, where);
  if (!value.is_number_integer())
    fail_at(where.child(key), fmt::format("expected an integer, found {}", value.type_name()));
  return value.get<int64_t>();
}

char32_t single_character(const std::string& text, const JsonPath& where) {
  size_t length = 0;
  if (text.empty() || valid_sequence_length(text, 0) != text.size()) {
    fail_at(where, fmt::format("expected exactly one character, found {:?}", text));
  }
  return decode_code_point(text, 0, length);
}

std::string component_type(const nlohmann::json& component, const JsonPath& where) {
  return require_string(component, "type", where);
}

void fail_unsupported(const JsonPath& where, std::string_view kind, std::string_view type,
                      std::string_view supported) {
  fail_at(
      where.child("type"),
      fmt::format(
          "the {} '{}' is not supported by Surogate's tokenizer (supported: {}); use a tokenizer "
          "whose tokenizer.json only uses supported components",
          kind, type, supported));
}

}  // namespace surogate::tokenizer
