#include "config/config_loader.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "config/config_fields.h"
#include "config/config_rules.h"
#include "config/data_option_names.h"
#include "core/error.h"

namespace surogate {
namespace {

using config_detail::Where;

// Records "file:line" for every key of the file, so later checks can say where a value was set.
void record_sources(const YAML::Node& node, const std::string& prefix, const std::string& file, Config& config) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) continue;  // decode_fields reports it with its line
      std::string key = prefix + entry.first.Scalar();
      config.sources[key] = config_detail::source_of_key(file, entry.first, file);
      record_sources(entry.second, key + ".", file, config);
    }
  } else if (node.IsSequence()) {
    std::string base = prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1);
    for (size_t index = 0; index < node.size(); ++index) {
      // The entry itself too ("datasets[0]"), so a field missing from it is reported at its line.
      if (node[index].Mark().line >= 0)
        config.sources[fmt::format("{}[{}]", base, index)] = fmt::format("{}:{}", file, node[index].Mark().line + 1);
      record_sources(node[index], fmt::format("{}[{}].", base, index), file, config);
    }
  }
}

YAML::Node parse_override_value(const std::string& text) {
  try {
    YAML::Node node = YAML::Load(text);
    return node.IsDefined() ? node : YAML::Node(text);
  } catch (const YAML::Exception&) {
    return YAML::Node(text);  // not YAML: take it as a plain string
  }
}

void apply_override(const std::string& raw, Config& config) {
  std::string text = raw.starts_with("--") ? raw.substr(2) : raw;
  auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0) {
    fail_user("command line: override '{}' must look like --key=value", raw);
  }
  std::string key = text.substr(0, equals);
  for (char& c : key) c = (c == '-') ? '_' : c;
  std::string source = fmt::format("command line {}", raw.starts_with("--") ? raw : "--" + raw);
  YAML::Node value = parse_override_value(text.substr(equals + 1));
  config.sources[key] = source;

  auto dot = key.find('.');
  if (dot == std::string::npos) {
    YAML::Node map(YAML::NodeType::Map);
    map[key] = value;
    config_detail::decode_fields(config_detail::config_fields(), map, "", Where{"", source, ""}, config);
    return;
  }
  std::string head = key.substr(0, dot);
  std::string rest = key.substr(dot + 1);
  YAML::Node map(YAML::NodeType::Map);
  map[rest] = value;
  if (head == "distributed") {
    config_detail::decode_fields(config_detail::distributed_fields(), map, "distributed.", Where{"", source, ""},
                                 config.distributed);
    return;
  }
  if (head == "loss") {  // surogate dpo's loss mapping: --loss.dpo_beta=0.2
    config_detail::decode_fields(config_detail::loss_fields(), map, "loss.", Where{"", source, ""}, config.loss);
    return;
  }
  if (head == "grpo") {  // surogate grpo's mapping: --grpo.num_generations=4
    config_detail::decode_fields(config_detail::grpo_fields(), map, "grpo.", Where{"", source, ""}, config.grpo);
    return;
  }
  // datasets.0.path / validation_datasets.1.type: edit one field of an existing entry.
  if (head == "datasets" || head == "validation_datasets") {
    auto& list = head == "datasets" ? config.data.datasets : config.eval.validation_datasets;
    auto second_dot = rest.find('.');
    std::string index_text = rest.substr(0, second_dot);
    size_t index = 0;
    // At most 9 digits: a longer index names no entry anyway, and would overflow std::stoul.
    bool numeric = !index_text.empty() && index_text.size() <= 9 &&
                   index_text.find_first_not_of("0123456789") == std::string::npos;
    if (numeric) index = std::stoul(index_text);
    if (!numeric || second_dot == std::string::npos || index >= list.size()) {
      fail_user("{}: '{}' must name an existing entry and field, like {}.0.path ({} has {} entries)", source, key,
                head, head, list.size());
    }
    YAML::Node field_map(YAML::NodeType::Map);
    field_map[rest.substr(second_dot + 1)] = value;
    config_detail::decode_fields(config_detail::dataset_fields(), field_map, fmt::format("{}[{}].", head, index),
                                 Where{"", source, ""}, list[index]);
    return;
  }
  fail_user("{}: '{}' is not a nested option: only distributed.*, loss.*, datasets.N.* and "
            "validation_datasets.N.* take a dotted key", source, key);
}

}  // namespace

Config load_config_from_string(const std::string& yaml_text, const std::string& file_label,
                               const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& error) {
    fail_user("{}:{}:{}: invalid YAML: {}", file_label, error.mark.line + 1, error.mark.column + 1, error.msg);
  }
  Config config;
  if (root.IsNull() || !root.IsDefined()) {
    if (overrides.empty()) fail_user("{} is empty: it needs at least `model:` and `datasets:`", file_label);
  } else if (!root.IsMap()) {
    fail_user("{}: the configuration must be a mapping of option: value, not {}", file_label,
              config_detail::describe_node(root));
  } else {
    record_sources(root, "", file_label, config);
    config_detail::decode_fields(config_detail::config_fields(), root, "", Where{"", file_label, file_label}, config);
  }
  for (const auto& override_text : overrides) apply_override(override_text, config);
  apply_implications(config);
  validate_config(config, file_label);
  check_data_option_names(config.data, config.sources);
  return config;
}

Config load_config(const std::filesystem::path& yaml_file, const std::vector<std::string>& overrides) {
  if (std::filesystem::is_directory(yaml_file)) {
    fail_user("the config file '{}' is a folder; give the YAML file (e.g. {}/config.yaml)", yaml_file.string(),
              yaml_file.string());
  }
  std::ifstream in(yaml_file);
  if (!in) fail_user("cannot read the config file '{}': check the path", yaml_file.string());
  std::stringstream text;
  text << in.rdbuf();
  return load_config_from_string(text.str(), yaml_file.string(), overrides);
}

std::vector<std::string> collect_overrides(const std::vector<std::string>& arguments) {
  std::vector<std::string> overrides;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const std::string& argument = arguments[i];
    if (!argument.starts_with("--") || argument.size() == 2) {
      fail_user("command line: unexpected argument '{}'; options are given as --key=value", argument);
    }
    if (argument.find('=') != std::string::npos) {
      overrides.push_back(argument);
    } else if (i + 1 < arguments.size() && !arguments[i + 1].starts_with("--")) {
      overrides.push_back(argument + "=" + arguments[i + 1]);
      ++i;
    } else {
      overrides.push_back(argument + "=true");
    }
  }
  return overrides;
}

std::string dump_config_yaml(const Config& config) {
  YAML::Emitter emitter;
  emitter << config_detail::encode_fields(config_detail::config_fields(), config);
  std::string text = emitter.c_str();
  text += "\n";
  for (const auto& note : config.sources.notes) text += "# implied: " + note + "\n";
  return text;
}

}  // namespace surogate
