#include "config/yaml_fields.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/strings.h"

namespace surogate::config_detail {
namespace {

const std::string& scalar_or_fail(const YAML::Node& node, const Where& where, const std::string& expected) {
  if (!node.IsScalar()) type_error(where, expected, node);
  return node.Scalar();
}

}  // namespace

std::string source_of_key(const std::string& file, const YAML::Node& key, const std::string& fallback) {
  if (file.empty() || key.Mark().line < 0) return fallback;
  return fmt::format("{}:{}", file, key.Mark().line + 1);
}

std::string describe_node(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing (null)";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar: return fmt::format("'{}'", node.Scalar());
    default: return "an undefined value";
  }
}

void fail_user_at(const std::string& source, const std::string& message) { fail_user("{}: {}", source, message); }

void type_error(const Where& where, const std::string& expected, const YAML::Node& node) {
  fail_user("{}: option '{}' expects {}, got {}", where.source, where.key, expected, describe_node(node));
}

void decode(const YAML::Node& node, const Where& where, bool& out) {
  const std::string& text = scalar_or_fail(node, where, "true or false");
  if (text == "true" || text == "True" || text == "TRUE") {
    out = true;
  } else if (text == "false" || text == "False" || text == "FALSE") {
    out = false;
  } else {
    type_error(where, "true or false", node);
  }
}

void decode(const YAML::Node& node, const Where& where, int64_t& out) {
  const std::string& text = scalar_or_fail(node, where, "an integer");
  auto result = std::from_chars(text.data(), text.data() + text.size(), out);
  if (result.ec != std::errc() || result.ptr != text.data() + text.size()) type_error(where, "an integer", node);
}

void decode(const YAML::Node& node, const Where& where, double& out) {
  const std::string& text = scalar_or_fail(node, where, "a number");
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(out)) type_error(where, "a number", node);
}

void decode(const YAML::Node& node, const Where& where, std::string& out) {
  out = scalar_or_fail(node, where, "a string");
}

void decode(const YAML::Node& node, const Where& where, std::vector<std::string>& out) {
  out.clear();
  if (node.IsScalar()) {  // a single value stands for a one-element list
    out.push_back(node.Scalar());
    return;
  }
  if (node.IsNull()) return;
  if (!node.IsSequence()) type_error(where, "a list of strings", node);
  for (const auto& item : node) {
    if (!item.IsScalar()) type_error(where, "a list of strings", node);
    out.push_back(item.Scalar());
  }
}

namespace {

// A list of numbers; a single value stands for a one-element list.
template <typename T>
void decode_number_list(const YAML::Node& node, const Where& where, std::vector<T>& out, const char* label) {
  out.clear();
  if (node.IsNull()) return;
  if (node.IsScalar()) {
    out.emplace_back();
    decode(node, where, out.back());
    return;
  }
  if (!node.IsSequence()) type_error(where, label, node);
  for (const auto& item : node) {
    if (!item.IsScalar()) type_error(where, label, node);
    out.emplace_back();
    decode(item, where, out.back());
  }
}

}  // namespace

void decode(const YAML::Node& node, const Where& where, std::vector<int64_t>& out) {
  decode_number_list(node, where, out, "a list of integers");
}
void decode(const YAML::Node& node, const Where& where, std::vector<double>& out) {
  decode_number_list(node, where, out, "a list of numbers");
}

void decode(const YAML::Node& node, const Where& where, std::map<std::string, std::string>& out) {
  if (!node.IsMap()) type_error(where, "a mapping of strings to strings", node);
  out.clear();
  for (const auto& entry : node) {
    if (!entry.second.IsScalar()) type_error(where, "a mapping of strings to strings", node);
    out[entry.first.as<std::string>()] = entry.second.Scalar();
  }
}

std::string type_label(const bool&) { return "true or false"; }
std::string type_label(const int64_t&) { return "an integer"; }
std::string type_label(const double&) { return "a number"; }
std::string type_label(const std::string&) { return "a string"; }
std::string type_label(const std::vector<std::string>&) { return "a list of strings"; }
std::string type_label(const std::vector<int64_t>&) { return "a list of integers"; }
std::string type_label(const std::vector<double>&) { return "a list of numbers"; }
std::string type_label(const std::map<std::string, std::string>&) { return "a mapping"; }

YAML::Node encode(bool value) { return YAML::Node(value); }
YAML::Node encode(int64_t value) { return YAML::Node(value); }
YAML::Node encode(double value) {
  // Shortest text that reads back to the same double (0.003, not 0.0030000000000000001).
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return YAML::Node(text);
}
YAML::Node encode(const std::string& value) { return YAML::Node(value); }
YAML::Node encode(const std::vector<std::string>& value) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& item : value) list.push_back(item);
  return list;
}
YAML::Node encode(const std::vector<int64_t>& value) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (int64_t item : value) list.push_back(item);
  return list;
}
YAML::Node encode(const std::vector<double>& value) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (double item : value) list.push_back(encode(item));
  return list;
}
YAML::Node encode(const std::map<std::string, std::string>& value) {
  YAML::Node map(YAML::NodeType::Map);
  for (const auto& [key, item] : value) map[key] = item;
  return map;
}

std::string join_names(const std::vector<std::string>& names) { return fmt::format("{}", fmt::join(names, ", ")); }

void choice_error(const Where& where, const std::string& value, const std::vector<std::string>& choices) {
  auto suggestion = closest_match(value, choices);
  fail_user("{}: option '{}' is '{}', which is not one of: {}{}", where.source, where.key, value,
            fmt::join(choices, ", "), suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : "");
}

void unknown_option(const std::string& key, const std::string& prefix, const std::vector<std::string>& known,
                    const std::string& source) {
  auto suggestion = closest_match(key, known);
  if (suggestion) {
    fail_user("{}: unknown option '{}{}' — did you mean '{}{}'?", source, prefix, key, prefix, *suggestion);
  }
  fail_user("{}: unknown option '{}{}' (see docs/configuration.md for the options)", source, prefix, key);
}

}  // namespace surogate::config_detail
