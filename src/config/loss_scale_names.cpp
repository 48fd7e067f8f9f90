// loss_scale names (see loss_scale_names.h).
#include "config/loss_scale_names.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/strings.h"

namespace surogate {

const std::vector<std::string>& loss_scale_names() {
  static const std::vector<std::string> names = {"default", "last_round", "all", "ignore_empty_think", "hermes", "react"};
  return names;
}

void check_loss_scale_name(const Config& config) {
  const auto& names = loss_scale_names();
  if (std::find(names.begin(), names.end(), config.loss_scale) != names.end()) return;
  auto suggestion = closest_match(config.loss_scale, names);
  fail_user("{}: unknown loss_scale '{}'{}; the strategies are: {} (docs/data.md, \"Loss scale\")",
            config.source_of("loss_scale"), config.loss_scale,
            suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : std::string(), fmt::join(names, ", "));
}

}  // namespace surogate
