// libFuzzer target: any byte string is treated as the Jinja text of a chat template (as found in
// a model folder's tokenizer_config.json) and rendered for a fixed small conversation (system,
// user, assistant with a tool call, tool result; with a tool schema; with and without the
// generation prompt). The only acceptable outcomes are rendered text or a UserError; anything
// else (crash, sanitizer report, other exception, a render that runs past libFuzzer's -timeout
// or memory limit) is a bug: a looping template must be stopped by the engine's limits.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat_template/chat_template.h"
#include "core/error.h"

namespace {

using surogate::chat_template::OrderedJson;

const OrderedJson& conversation() {
  static const OrderedJson messages = OrderedJson::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2? Use the tool."},
    {"role": "assistant", "content": "", "reasoning_content": "Add.",
     "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
    {"role": "tool", "name": "add", "content": "4"},
    {"role": "assistant", "content": "4"}
  ])");
  return messages;
}

const OrderedJson& tools() {
  static const OrderedJson list = OrderedJson::parse(R"([{"type": "function", "function": {"name": "add",
    "description": "Adds.", "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
    "b": {"type": "integer"}}, "required": ["a", "b"]}}}])");
  return list;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto chat = surogate::chat_template::ChatTemplate::from_source(text, "fuzz/chat_template.jinja");
    surogate::chat_template::ChatRenderInput input;
    input.messages = conversation();
    input.tools = tools();
    input.bos_token = "<s>";
    input.eos_token = "</s>";
    (void)chat.render_with_spans(input);
    input.add_generation_prompt = true;
    (void)chat.render(input);
  } catch (const surogate::UserError&) {
    // Rejected cleanly: fine.
  }
  return 0;
}
