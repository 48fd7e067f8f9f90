// Loading a run configuration: YAML file + command-line overrides → validated Config with
// every default and implication applied.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"

namespace surogate {

// Loads `yaml_file`, applies `overrides` ("key=value", "nested.key=value", or the same with a
// leading "--"; dashes in keys read as underscores), resolves implications and checks every
// constraint. Throws UserError naming the file, line and option on any problem.
Config load_config(const std::filesystem::path& yaml_file, const std::vector<std::string>& overrides = {});

// The same from YAML text; `file_label` names it in messages.
Config load_config_from_string(const std::string& yaml_text, const std::string& file_label,
                               const std::vector<std::string>& overrides = {});

// Turns CLI leftovers into "key=value" overrides: "--key=value", "--key value", and a bare
// "--flag" (meaning true). Anything else is a UserError naming the argument.
std::vector<std::string> collect_overrides(const std::vector<std::string>& arguments);

// The fully resolved configuration as YAML, options in reference order.
std::string dump_config_yaml(const Config& config);

}  // namespace surogate
