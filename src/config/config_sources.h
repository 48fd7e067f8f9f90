// Where each option's value came from, for error messages raised after loading, kept apart from
// the values themselves: an owner that takes only its section takes this lookup beside it when it
// has something to refuse.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace surogate {

struct ConfigSources {
  // Option path ("datasets[0].path") → "config.yaml:12" or "command line --key=value", for every
  // option set explicitly.
  std::map<std::string, std::string> by_key;
  // Why option implications changed values, in order ("recompute_block: true ⇒ recompute_att: true").
  std::vector<std::string> notes;

  std::string& operator[](const std::string& key) { return by_key[key]; }

  // "config.yaml:12" for an option set in the file (or where its enclosing entry or section is
  // written), else "the default".
  std::string of(const std::string& key) const;
};

}  // namespace surogate
