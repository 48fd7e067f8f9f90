// Typed access to keys of a JSON object (HF config.json and friends) with UserErrors that name
// the file and the key. A key that is absent or null yields std::nullopt; a key of the wrong
// type is an error, never silently ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace surogate::io {

class JsonFields {
 public:
  // `object` must outlive this; `source` names the file, `prefix` the enclosing key
  // (e.g. "rope_scaling.") in messages.
  JsonFields(const nlohmann::json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  bool has(std::string_view key) const;
  std::optional<int64_t> integer(std::string_view key) const;
  std::optional<double> number(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::string> text(std::string_view key) const;

  int64_t required_positive_integer(std::string_view key) const;
  int64_t positive_integer_or(std::string_view key, int64_t fallback) const;
  double positive_number_or(std::string_view key, double fallback) const;

  [[noreturn]] void fail(std::string_view key, std::string_view problem) const;
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json* find(std::string_view key) const;
  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

}  // namespace surogate::io
