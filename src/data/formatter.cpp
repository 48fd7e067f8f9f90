// Text and instruction formatting and dataset-type detection; conversations (and instruction
// rows rendered through a chat template) are in chat_formatter.cpp. See formatter.h.
#include "data/formatter.h"

#include "core/error.h"
#include "data/kto_formatter.h"
#include "data/preference_formatter.h"
#include "data/text_checks.h"

namespace surogate::data {
namespace {

const char* const kDefaultPromptWithInput =
    "{system}### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n{output}";
const char* const kDefaultPromptNoInput = "{system}### Instruction:\n{instruction}\n\n### Response:\n{output}";

void append_eos(std::vector<int32_t>& ids, const TextCodec& codec) {
  if (codec.eos_id && (ids.empty() || ids.back() != *codec.eos_id)) ids.push_back(*codec.eos_id);
}

}  // namespace

std::string fill_prompt_format(const std::string& format, const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out;
  size_t i = 0;
  while (i < format.size()) {
    bool replaced = false;
    if (format[i] == '{') {
      for (const auto& [name, value] : values) {
        if (format.compare(i + 1, name.size(), name) == 0 && i + 1 + name.size() < format.size() &&
            format[i + 1 + name.size()] == '}') {
          out += value;
          i += name.size() + 2;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += format[i++];
  }
  return out;
}

Formatter::Formatter(DatasetConfig dataset, FormatOptions options, TextCodec codec, ChatRenderer renderer)
    : dataset_(std::move(dataset)), options_(std::move(options)), codec_(std::move(codec)), renderer_(std::move(renderer)) {
  switch (dataset_.type) {
    case DatasetType::Text: type_ = "text"; break;
    case DatasetType::Instruction: type_ = "instruction"; break;
    case DatasetType::Conversation: type_ = "conversation"; break;
    case DatasetType::Auto: break;
    case DatasetType::Preference: type_ = "preference"; break;
    case DatasetType::Kto: type_ = "kto"; break;
    case DatasetType::Prompt: type_ = "prompt"; break;  // surogate grpo reads these itself (data/prompt_rows.h)
  }
  if (type_ == "instruction" && (!dataset_.instruction_field || !dataset_.output_field)) {
    fail_user("dataset {}: type instruction needs instruction_field and output_field", dataset_.path);
  }
}

void Formatter::detect_type(const Row& row) {
  const auto& value = row.value;
  if (value.contains(dataset_.messages_field)) {
    type_ = "conversation";
  } else if (value.contains("conversations") && dataset_.messages_field == "messages") {
    dataset_.messages_field = "conversations";
    type_ = "conversation";
  } else if (value.contains(dataset_.instruction_field.value_or("instruction")) &&
             value.contains(dataset_.output_field.value_or("output"))) {
    dataset_.instruction_field = dataset_.instruction_field.value_or("instruction");
    dataset_.output_field = dataset_.output_field.value_or("output");
    if (!dataset_.input_field && value.contains("input")) dataset_.input_field = "input";
    type_ = "instruction";
  } else if (value.contains(dataset_.text_field)) {
    type_ = "text";
  } else {
    std::string present;
    for (auto it = value.begin(); it != value.end(); ++it) present += (present.empty() ? "" : ", ") + it.key();
    fail_user("{}: type auto cannot tell the format from the fields ({}); expected '{}' (conversation), "
              "'instruction' + 'output' (instruction) or '{}' (text). Set type and the *_field options",
              row.origin.describe(), present, dataset_.messages_field, dataset_.text_field);
  }
}

FormattedRow Formatter::format(const Row& row) {
  if (type_.empty()) detect_type(row);
  if (type_ == "text") return format_text(row);
  if (type_ == "instruction") return format_instruction(row);
  if (type_ == "preference") return format_preference_row(dataset_, codec_, renderer_, row, options_.preference_max_length);
  if (type_ == "kto") return format_kto_row(dataset_, codec_, renderer_, row, options_.preference_max_length);
  return format_conversation(row);
}

FormattedRow Formatter::format_text(const Row& row) const {
  FormattedRow result;
  result.text = required_string(row.value, dataset_.text_field, row.origin, "text_field");
  if (result.text.empty()) {
    result.drop_reason = "empty text";
    return result;
  }
  TokenizedSample sample;
  sample.origin = row.origin;
  sample.input_ids = codec_.encode(result.text, true);
  append_eos(sample.input_ids, codec_);
  sample.labels = sample.input_ids;
  if (!sample.labels.empty()) sample.labels[0] = kIgnoreLabel;
  result.sample = std::move(sample);
  return result;
}

FormattedRow Formatter::format_instruction(const Row& row) const {
  const RowOrigin& origin = row.origin;
  std::string instruction = required_string(row.value, *dataset_.instruction_field, origin, "instruction_field");
  std::string output = required_string(row.value, *dataset_.output_field, origin, "output_field");
  std::string input = dataset_.input_field ? optional_string(row.value, *dataset_.input_field, origin, "input_field") : "";
  std::string system;
  if (dataset_.system_prompt_type == SystemPromptType::Field) {
    if (!dataset_.system_prompt_field) {
      fail_user("dataset {}: system_prompt_type: field needs system_prompt_field", dataset_.path);
    }
    system = optional_string(row.value, *dataset_.system_prompt_field, origin, "system_prompt_field");
  } else if (dataset_.system_prompt_type == SystemPromptType::Fixed) {
    if (!dataset_.system_prompt) fail_user("dataset {}: system_prompt_type: fixed needs system_prompt", dataset_.path);
    system = *dataset_.system_prompt;
  }
  if (output.empty()) {
    FormattedRow dropped;
    dropped.drop_reason = "empty output";
    return dropped;
  }

  bool custom_format = dataset_.prompt_format || dataset_.prompt_format_no_input;
  if (options_.use_chat_template && !custom_format) {
    RowValue messages = RowValue::array();
    if (system.empty() && options_.system) system = *options_.system;
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", input.empty() ? instruction : instruction + "\n\n" + input}});
    messages.push_back({{"role", "assistant"}, {"content", output}});
    return tokenize_chat(messages, RowValue(), origin);
  }

  std::string format;
  if (input.empty()) {
    format = dataset_.prompt_format_no_input.value_or(dataset_.prompt_format.value_or(kDefaultPromptNoInput));
  } else {
    format = dataset_.prompt_format.value_or(kDefaultPromptWithInput);
  }
  // The built-in layouts put the system prompt in its own paragraph, and drop it when empty.
  std::string system_value = custom_format || system.empty() ? system : system + "\n\n";
  std::vector<std::pair<std::string, std::string>> values = {
      {"system", system_value}, {"instruction", instruction}, {"input", input}};
  size_t marker = format.find("{output}");
  std::string prompt = fill_prompt_format(format.substr(0, marker), values);
  std::string completion = options_.response_prefix.value_or("") + output;
  if (marker != std::string::npos) completion += fill_prompt_format(format.substr(marker + 8), values);

  FormattedRow result;
  result.text = prompt + completion;
  TokenizedSample sample;
  sample.origin = origin;
  sample.input_ids = codec_.encode(prompt, true);
  size_t prompt_tokens = sample.input_ids.size();
  std::vector<int32_t> completion_ids = codec_.encode(completion, false);
  sample.input_ids.insert(sample.input_ids.end(), completion_ids.begin(), completion_ids.end());
  append_eos(sample.input_ids, codec_);
  sample.labels = sample.input_ids;
  if (!options_.train_on_inputs) {
    for (size_t i = 0; i < prompt_tokens; ++i) sample.labels[i] = kIgnoreLabel;
  }
  if (!sample.labels.empty()) sample.labels[0] = kIgnoreLabel;
  result.sample = std::move(sample);
  return result;
}

}  // namespace surogate::data
