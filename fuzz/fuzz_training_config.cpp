// libFuzzer target: any byte string is treated as the text of a training config YAML and run
// through load_config_from_string (YAML parsing, field decoding with types and lines, defaults,
// implications and every rule of config_rules.cpp / feature_support.cpp). The only acceptable
// outcomes are a Config, or a UserError; anything else (crash, sanitizer report, yaml-cpp or
// standard-library exception escaping) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config_loader.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    surogate::Config config = surogate::load_config_from_string(text, "fuzz/config.yaml");
    // The resolved config must also print (surogate sft --dry-run shows it).
    (void)surogate::dump_config_yaml(config);
  } catch (const surogate::UserError&) {
    // Rejected cleanly: fine.
  }
  return 0;
}
