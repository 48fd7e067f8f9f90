// Implementation of JsonFields: strict typing, integral floats (e.g. 4096.0) accepted as integers.
#include "io/json_fields.h"

#include <cmath>

#include "core/error.h"

namespace surogate::io {

const nlohmann::json* JsonFields::find(std::string_view key) const {
  if (!object_.is_object()) return nullptr;
  auto found = object_.find(std::string(key));
  if (found == object_.end() || found->is_null()) return nullptr;
  return &*found;
}

bool JsonFields::has(std::string_view key) const { return find(key) != nullptr; }

void JsonFields::fail(std::string_view key, std::string_view problem) const {
  fail_user("{}: '{}{}' {}", source_, prefix_, key, problem);
}

std::optional<int64_t> JsonFields::integer(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->is_number_integer()) return value->get<int64_t>();
  if (value->is_number_float()) {
    double number = value->get<double>();
    if (std::isfinite(number) && std::floor(number) == number && std::fabs(number) < 9.0e18) {
      return static_cast<int64_t>(number);
    }
  }
  fail(key, "must be an integer");
}

std::optional<double> JsonFields::number(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) fail(key, "must be a number");
  double number = value->get<double>();
  if (!std::isfinite(number)) fail(key, "must be a finite number");
  return number;
}

std::optional<bool> JsonFields::boolean(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) fail(key, "must be true or false");
  return value->get<bool>();
}

std::optional<std::string> JsonFields::text(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) fail(key, "must be a string");
  return value->get<std::string>();
}

int64_t JsonFields::required_positive_integer(std::string_view key) const {
  std::optional<int64_t> value = integer(key);
  if (!value) fail(key, "is missing; the model's config.json must set it");
  if (*value <= 0) fail(key, fmt::format("must be positive (got {})", *value));
  return *value;
}

int64_t JsonFields::positive_integer_or(std::string_view key, int64_t fallback) const {
  std::optional<int64_t> value = integer(key);
  if (!value) return fallback;
  if (*value <= 0) fail(key, fmt::format("must be positive (got {})", *value));
  return *value;
}

double JsonFields::positive_number_or(std::string_view key, double fallback) const {
  std::optional<double> value = number(key);
  if (!value) return fallback;
  if (*value <= 0) fail(key, fmt::format("must be positive (got {})", *value));
  return *value;
}

}  // namespace surogate::io
