#pragma once

#include <string>

#include <gtest/gtest.h>

#include "config/config_loader.h"
#include "core/error.h"

namespace surogate::testing_util {

inline const char* kMinimalConfig = R"(model: ./my-model
datasets:
  - path: data.jsonl
    type: text
)";

// Loads YAML text and returns the UserError message (fails the test if loading succeeds).
inline std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_from_string(yaml, "config.yaml", overrides);
  } catch (const UserError& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a UserError for:\n" << yaml;
  return "";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace surogate::testing_util
