// libFuzzer target: one line of a user's JSONL dataset, parsed as the JSONL reader does, then
// formatted as a training document by data::Formatter (the text / instruction / conversation /
// auto formatters, with the built-in Qwen chat template, an agent template and loss_scale
// strategies). The first byte picks the dataset type and options; the rest is the line. The only
// acceptable outcomes are a formatted (or deliberately dropped) row whose labels line up with its
// tokens, or a UserError; anything else (crash, sanitizer report, nlohmann::json type error or
// other exception escaping) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "chat_template/chat_template.h"
#include "core/error.h"
#include "data/formatter.h"

namespace {

using namespace surogate;
using namespace surogate::data;

// Token = byte value; 256 is EOS (as tests/data/test_helpers.h).
TextCodec byte_codec() {
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
  return codec;
}

ChatRenderer qwen_renderer() {
  static const auto chat = std::make_shared<chat_template::ChatTemplate>(chat_template::ChatTemplate::builtin("qwen"));
  return [](const RowValue& messages, const RowValue& tools, bool generation_prompt) {
    chat_template::ChatRenderInput input;
    input.messages = messages;
    input.tools = tools;
    input.add_generation_prompt = generation_prompt;
    return chat->render(input);
  };
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t choice = data[0];
  const std::string line(reinterpret_cast<const char*>(data + 1), size - 1);

  DatasetConfig dataset;
  dataset.path = "fuzz/data.jsonl";
  dataset.type = static_cast<DatasetType>(choice & 3);  // Text, Instruction, Conversation, Auto
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

  try {
    // As the JSONL reader: one JSON object per line, else a UserError naming the line.
    RowValue value = RowValue::parse(line, nullptr, false);
    if (value.is_discarded() || !value.is_object()) return 0;
    Row row{std::move(value), RowOrigin{dataset.path, 1, true}};
    Formatter formatter(dataset, options, byte_codec(), qwen_renderer());
    FormattedRow formatted = formatter.format(row);
    if (formatted.sample) {
      const TokenizedSample& sample = *formatted.sample;
      const bool consistent = sample.labels.size() == sample.input_ids.size() &&
                              (sample.weights.empty() || sample.weights.size() == sample.input_ids.size());
      if (!consistent) std::abort();
    } else if (formatted.drop_reason.empty()) {
      std::abort();  // a dropped row must say why
    }
  } catch (const UserError&) {
    // Rejected cleanly: fine.
  }
  return 0;
}
