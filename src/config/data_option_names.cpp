// loss_scale and agent_template names (see data_option_names.h).
#include "config/data_option_names.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/strings.h"

namespace surogate {
namespace {

void check_name(const ConfigSources& sources, const char* key, const std::string& value,
                const std::vector<std::string>& names, const char* what, const char* section) {
  if (std::find(names.begin(), names.end(), value) != names.end()) return;
  auto suggestion = closest_match(value, names);
  fail_user("{}: unknown {} '{}'{}; the {} are: {} (docs/data.md, \"{}\")", sources.of(key), key, value,
            suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : std::string(), what,
            fmt::join(names, ", "), section);
}

}  // namespace

const std::vector<std::string>& loss_scale_names() {
  static const std::vector<std::string> names = {"default", "last_round",         "all",
                                                 "ignore_empty_think", "hermes", "react"};
  return names;
}

const std::vector<std::string>& agent_template_names() {
  static const std::vector<std::string> names = {"hermes", "llama3", "react_en", "react"};
  return names;
}

void check_data_option_names(const config::Data& data, const ConfigSources& sources) {
  check_name(sources, "loss_scale", data.loss_scale, loss_scale_names(), "strategies", "Loss scale");
  if (data.agent_template) {
    check_name(sources, "agent_template", *data.agent_template, agent_template_names(), "agent templates",
               "Agent templates");
  }
}

}  // namespace surogate
