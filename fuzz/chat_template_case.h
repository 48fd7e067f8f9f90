// What fuzz_chat_template does with one input, shared with the CI test that replays its corpus
// (tests/chat_template/test_chat_template_corpus.cpp): the bytes are a chat template's Jinja text,
// rendered for a fixed small conversation (system, user, assistant with reasoning and a tool call,
// tool result, assistant) with one tool schema, with and without the generation prompt. Returns
// the rendered text or throws (a UserError is the only acceptable exception).
#pragma once

#include <string>
#include <string_view>

#include "chat_template/chat_template.h"

namespace surogate::fuzz {

inline std::string render_chat_template_case(std::string_view template_text, const std::string& source_name) {
  using chat_template::OrderedJson;
  static const OrderedJson messages = OrderedJson::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2? Use the tool."},
    {"role": "assistant", "content": "", "reasoning_content": "Add.",
     "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
    {"role": "tool", "name": "add", "content": "4"},
    {"role": "assistant", "content": "4"}
  ])");
  static const OrderedJson tools = OrderedJson::parse(R"([{"type": "function", "function": {"name": "add",
    "description": "Adds.", "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
    "b": {"type": "integer"}}, "required": ["a", "b"]}}}])");
  auto chat = chat_template::ChatTemplate::from_source(template_text, source_name);
  chat_template::ChatRenderInput input;
  input.messages = messages;
  input.tools = tools;
  input.bos_token = "<s>";
  input.eos_token = "</s>";
  std::string text = chat.render_with_spans(input).text;
  input.add_generation_prompt = true;
  return text + chat.render(input);
}

}  // namespace surogate::fuzz
