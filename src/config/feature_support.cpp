// Options that are valid but not implemented yet in this build. Setting one to anything other
// than its default is rejected with a message naming it, never silently ignored. When a feature
// lands, delete its row (and update docs/configuration.md).
#include <functional>
#include <string>
#include <vector>

#include "config/config_rules.h"
#include "core/error.h"

namespace surogate {
namespace {

struct UnsupportedOption {
  std::string key;
  std::function<bool(const Config&)> is_used;
};

const std::vector<UnsupportedOption>& unsupported_options() {
  static const std::vector<UnsupportedOption> table = {
      {"max_pixels", [](const Config& c) { return c.max_pixels.has_value(); }},
      {"norm_bbox", [](const Config& c) { return c.norm_bbox.has_value(); }},
  };
  return table;
}

}  // namespace

void check_feature_support(const Config& config) {
  for (const auto& option : unsupported_options()) {
    if (option.is_used(config)) {
      fail_user("{}: option '{}' is valid but not implemented yet in this version of Surogate; remove it or "
                "set it back to its default (docs/configuration.md lists what is not implemented yet)",
                config.source_of(option.key), option.key);
    }
  }
}

}  // namespace surogate
