// What fuzz_dataset_row does with one input, shared with the CI test that replays its corpus
// (tests/data/test_dataset_row_corpus.cpp). The first byte picks the dataset type and options:
//   bits 0-1  type: 0 text, 1 instruction, 2 conversation, 3 auto
//   bit 2     extra fields: system_field / tools_field "system" / "tools", input_field "input",
//             system prompt from the "system" field
//   bit 3     ShareGPT message keys (from / value)
//   bit 4     no chat template (instruction rows use the prompt format)
//   bit 5     train_on_inputs (with an agent template: loss_scale hermes, else last_round)
//   bits 6-7  agent template: none, hermes, llama3, react_en
// The rest is one line of a JSONL dataset, parsed as the JSONL reader does (a line that is not a
// JSON object is that reader's error, so nullopt here), then formatted with a byte-level codec
// (token = byte, EOS 256) and the built-in Qwen chat template. Throws on bad rows (a UserError
// is the only acceptable exception).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "chat_template/chat_template.h"
#include "data/formatter.h"

namespace surogate::fuzz {

inline std::optional<data::FormattedRow> format_dataset_row_case(std::string_view bytes) {
  using namespace surogate::data;
  if (bytes.empty()) return std::nullopt;
  const auto choice = static_cast<uint8_t>(bytes[0]);
  DatasetConfig dataset;
  dataset.path = "fuzz/data.jsonl";
  dataset.type = static_cast<DatasetType>(choice & 3);
  if (dataset.type == DatasetType::Instruction) {  // the config rules require both for this type
    dataset.instruction_field = "instruction";
    dataset.output_field = "output";
  }
  if (choice & 4) {
    dataset.system_field = "system";
    dataset.tools_field = "tools";
    dataset.input_field = "input";
    dataset.system_prompt_type = SystemPromptType::Field;
    dataset.system_prompt_field = "system";
  }
  if (choice & 8) dataset.message_property_mappings = {{"role", "from"}, {"content", "value"}};
  FormatOptions options;
  options.use_chat_template = (choice & 16) == 0;
  options.train_on_inputs = (choice & 32) != 0;
  static const AgentTemplate kAgents[] = {AgentTemplate::Hermes, AgentTemplate::Llama3, AgentTemplate::ReactEn};
  if ((choice >> 6) != 0) {
    options.agent_template = kAgents[(choice >> 6) - 1];
    options.loss_scale = (choice & 32) ? LossScale::Hermes : LossScale::LastRound;
  }

  RowValue value = RowValue::parse(bytes.substr(1), nullptr, false);
  if (value.is_discarded() || !value.is_object()) return std::nullopt;

  TextCodec codec;
  codec.encode = [](std::string_view text, bool) {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  };
  codec.decode = [](std::span<const int32_t> ids) {
    std::string text;
    for (int32_t id : ids) text += id < 256 ? std::string(1, static_cast<char>(id)) : std::string("<eos>");
    return text;
  };
  codec.eos_id = 256;
  codec.pad_id = 257;
  static const auto chat = std::make_shared<chat_template::ChatTemplate>(chat_template::ChatTemplate::builtin("qwen"));
  ChatRenderer renderer = [](const RowValue& messages, const RowValue& tools, bool generation_prompt) {
    chat_template::ChatRenderInput input;
    input.messages = messages;
    input.tools = tools;
    input.add_generation_prompt = generation_prompt;
    return chat->render(input);
  };
  Formatter formatter(dataset, options, codec, renderer);
  return formatter.format(Row{std::move(value), RowOrigin{dataset.path, 1, true}});
}

}  // namespace surogate::fuzz
