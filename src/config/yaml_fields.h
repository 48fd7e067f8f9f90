// Typed decoding of YAML values into struct fields, with errors that name the option, where it
// was set and what was expected. A FieldTable<Owner> lists the options of one struct (Config,
// DatasetConfig, DistributedConfig); decoding, unknown-key detection and printing the resolved
// configuration all walk the same table, so an option cannot be parsed but not printed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config_enums.h"

namespace surogate::config_detail {

// "a, b, c".
std::string join_names(const std::vector<std::string>& names);

// Where a value came from, for messages: the option's full path and "file:line" or "--key=value".
struct Where {
  std::string key;
  std::string source;  // "config.yaml:12" or "command line --key=value"
  std::string file;    // the YAML file, empty for values from the command line
};

// Where a key node read from `file` sits ("file:line"), or `fallback` for command-line values.
std::string source_of_key(const std::string& file, const YAML::Node& key, const std::string& fallback);

// Throws UserError "<source>: <message>".
[[noreturn]] void fail_user_at(const std::string& source, const std::string& message);

[[noreturn]] void type_error(const Where& where, const std::string& expected, const YAML::Node& node);
std::string describe_node(const YAML::Node& node);

void decode(const YAML::Node& node, const Where& where, bool& out);
void decode(const YAML::Node& node, const Where& where, int64_t& out);
void decode(const YAML::Node& node, const Where& where, double& out);
void decode(const YAML::Node& node, const Where& where, std::string& out);
void decode(const YAML::Node& node, const Where& where, std::vector<std::string>& out);
void decode(const YAML::Node& node, const Where& where, std::vector<int64_t>& out);
void decode(const YAML::Node& node, const Where& where, std::vector<double>& out);
void decode(const YAML::Node& node, const Where& where, std::map<std::string, std::string>& out);

// An enum option: its value must be one of the spellings of EnumNames<E> (the message lists them
// and suggests the closest).
[[noreturn]] void choice_error(const Where& where, const std::string& value, const std::vector<std::string>& choices);

template <ConfigEnum E>
void decode(const YAML::Node& node, const Where& where, E& out) {
  if (!node.IsScalar()) type_error(where, "one of: " + join_names(enum_names<E>()), node);
  auto value = enum_from_string<E>(node.Scalar());
  if (!value) choice_error(where, node.Scalar(), enum_names<E>());
  out = *value;
}

// A list of enum values; a single value stands for a one-element list.
template <ConfigEnum E>
void decode(const YAML::Node& node, const Where& where, std::vector<E>& out) {
  std::vector<std::string> names;
  decode(node, where, names);
  out.clear();
  for (const auto& name : names) {
    auto value = enum_from_string<E>(name);
    if (!value) choice_error(where, name, enum_names<E>());
    out.push_back(*value);
  }
}

// Null unsets an optional option; anything else decodes as T. Declared after every other
// decode() so that it sees them all.
template <typename T>
void decode(const YAML::Node& node, const Where& where, std::optional<T>& out) {
  if (node.IsNull()) {
    out.reset();
    return;
  }
  T value{};
  decode(node, where, value);
  out = std::move(value);
}

std::string type_label(const bool&);
std::string type_label(const int64_t&);
std::string type_label(const double&);
std::string type_label(const std::string&);
std::string type_label(const std::vector<std::string>&);
std::string type_label(const std::vector<int64_t>&);
std::string type_label(const std::vector<double>&);
std::string type_label(const std::map<std::string, std::string>&);
template <ConfigEnum E>
std::string type_label(const E&) {
  return "one of: " + join_names(enum_names<E>());
}
template <typename T>
std::string type_label(const std::optional<T>&) {
  return type_label(T{}) + " or null";
}

YAML::Node encode(bool value);
YAML::Node encode(int64_t value);
YAML::Node encode(double value);
YAML::Node encode(const std::string& value);
YAML::Node encode(const std::vector<std::string>& value);
YAML::Node encode(const std::vector<int64_t>& value);
YAML::Node encode(const std::vector<double>& value);
YAML::Node encode(const std::map<std::string, std::string>& value);
template <ConfigEnum E>
YAML::Node encode(E value) {
  return YAML::Node(std::string(to_string(value)));
}
template <ConfigEnum E>
YAML::Node encode(const std::vector<E>& values) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (E value : values) list.push_back(std::string(to_string(value)));
  return list;
}
template <typename T>
YAML::Node encode(const std::optional<T>& value) {
  return value ? encode(*value) : YAML::Node(YAML::NodeType::Null);
}

template <typename Owner>
struct Field {
  std::string name;
  std::function<void(Owner&, const YAML::Node&, const Where&)> assign;
  std::function<YAML::Node(const Owner&)> dump;
};

template <typename Owner>
using FieldTable = std::vector<Field<Owner>>;

// The option `name` stored in `member`, decoded and printed according to the member's type.
template <typename Owner, typename Value>
Field<Owner> field(std::string name, Value Owner::*member) {
  return Field<Owner>{
      name, [member](Owner& owner, const YAML::Node& node, const Where& where) { decode(node, where, owner.*member); },
      [member](const Owner& owner) { return encode(owner.*member); }};
}

// The option `name` stored in `member` of the section `section` (Config's options are flat in the
// file and grouped into sections in the struct).
template <typename Owner, typename Section, typename Value>
Field<Owner> field(std::string name, Section Owner::*section, Value Section::*member) {
  return Field<Owner>{name,
                      [section, member](Owner& owner, const YAML::Node& node, const Where& where) {
                        decode(node, where, owner.*section.*member);
                      },
                      [section, member](const Owner& owner) { return encode(owner.*section.*member); }};
}

[[noreturn]] void unknown_option(const std::string& key, const std::string& prefix,
                                 const std::vector<std::string>& known, const std::string& source);

// Decodes every key of `map` into `owner` through `table`. Unknown keys are errors that suggest
// the closest known option. `prefix` is prepended to keys in messages ("datasets[0].").
template <typename Owner>
void decode_fields(const FieldTable<Owner>& table, const YAML::Node& map, const std::string& prefix,
                   const Where& parent, Owner& owner) {
  std::map<std::string, std::string> seen;  // key → where it was first set
  for (const auto& entry : map) {
    if (!entry.first.IsScalar()) {
      fail_user_at(source_of_key(parent.file, entry.first, parent.source),
                   "option names must be plain words, got " + describe_node(entry.first));
    }
    std::string key = entry.first.Scalar();
    std::string full_key = prefix + key;
    Where where{full_key, source_of_key(parent.file, entry.first, parent.source), parent.file};
    if (auto [previous, inserted] = seen.emplace(key, where.source); !inserted) {
      fail_user_at(where.source, "option '" + full_key + "' is set twice (first at " + previous->second +
                                     "); keep one of them");
    }
    auto found = std::find_if(table.begin(), table.end(), [&](const Field<Owner>& f) { return f.name == key; });
    if (found == table.end()) {
      std::vector<std::string> known;
      for (const auto& f : table) known.push_back(f.name);
      unknown_option(key, prefix, known, where.source);
    }
    found->assign(owner, entry.second, where);
  }
}

// The fields of `owner` as an ordered YAML map, in table order.
template <typename Owner>
YAML::Node encode_fields(const FieldTable<Owner>& table, const Owner& owner) {
  YAML::Node map(YAML::NodeType::Map);
  for (const auto& f : table) map[f.name] = f.dump(owner);
  return map;
}

}  // namespace surogate::config_detail
