// One entry of `datasets` / `validation_datasets`.
// Fields are named exactly as their options in docs/configuration.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "config/config_enums.h"

namespace surogate {

struct DatasetConfig {
  std::string path;
  DatasetType type = DatasetType::Auto;  // required in the file; validated present
  std::optional<std::string> subset;
  std::string split = "train";
  std::optional<int64_t> samples;
  // text
  std::string text_field = "text";
  // instruction
  std::optional<std::string> instruction_field;
  std::optional<std::string> output_field;
  std::optional<std::string> input_field;
  std::optional<SystemPromptType> system_prompt_type;
  std::optional<std::string> system_prompt_field;
  std::optional<std::string> system_prompt;
  std::optional<std::string> prompt_format;
  std::optional<std::string> prompt_format_no_input;
  // conversation
  std::string messages_field = "messages";
  std::optional<std::string> system_field;
  std::optional<std::string> tools_field;
  std::map<std::string, std::string> message_property_mappings = {{"role", "role"}, {"content", "content"}};
  // preference ({prompt, chosen, rejected}) and kto ({prompt, completion, label}): surogate dpo
  std::string prompt_field = "prompt";
  std::string chosen_field = "chosen";
  std::string rejected_field = "rejected";
  std::string completion_field = "completion";
  std::string label_field = "label";
};

}  // namespace surogate
