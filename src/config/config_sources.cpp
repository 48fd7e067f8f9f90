#include "config/config_sources.h"

namespace surogate {

std::string ConfigSources::of(const std::string& key) const {
  // A key the file does not set (a required field left out of a dataset entry, a default that
  // conflicts with another option) is reported where its enclosing entry or section is written.
  for (std::string candidate = key;;) {
    auto found = by_key.find(candidate);
    if (found != by_key.end()) return found->second;
    const size_t cut = candidate.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) return "the default";
    candidate.resize(cut);
  }
}

}  // namespace surogate
