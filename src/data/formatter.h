// Formatters turn one dataset row into one tokenized document with its loss mask, following the
// dataset's `type`:
//   text          row[text_field], tokenized with the tokenizer's special tokens, EOS appended;
//                 every token carries loss (pre-training).
//   instruction   instruction / input / output (+ system prompt from a field or fixed). With
//                 use_chat_template the prompt becomes a user turn and the output an assistant
//                 turn rendered by the chat template; otherwise prompt_format(_no_input) with
//                 {system} {instruction} {input} {output} placeholders (an Alpaca layout by
//                 default). Loss on the output (and the EOS / end-of-turn after it) only.
//   conversation  row[messages_field] (OpenAI role/content, or ShareGPT from/value through
//                 message_property_mappings), optional system_field / tools_field; loss on
//                 assistant turns only.
//   auto          the first row decides: messages_field (or "conversations") → conversation,
//                 instruction_field (or "instruction") with output_field (or "output") →
//                 instruction, text_field → text.
// train_on_inputs: true puts loss on every token instead. Labels follow sample.h.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/agent_template.h"
#include "data/loss_scale.h"
#include "data/sample.h"

namespace surogate::data {

struct FormatOptions {
  bool use_chat_template = true;
  std::optional<std::string> system;  // top-level `system`: default system prompt for chats
  bool train_on_inputs = false;  // loss on every token (as loss_scale: all)
  LossScale loss_scale = LossScale::Default;
  // Text put before every assistant response (`response_prefix`), e.g. Qwen3's empty think block.
  std::optional<std::string> response_prefix;
  // `agent_template`: tools, tool calls and tool responses written as text in that format before
  // the chat template renders the conversation (data/agent_template.h).
  std::optional<AgentTemplate> agent_template;
  // type: preference (surogate dpo): each sequence's max_length (a pair's row holds two of them).
  size_t preference_max_length = 0;
  // Message contents may be lists of parts ({"type": "text", "text": ...}, {"type": "image"}),
  // which reach the chat template as they are (image rows, data/image_rows.h); off, a content
  // must be a string.
  bool content_parts = false;
};

// A formatted row: the text the model sees and its tokens, or the reason it was dropped.
struct FormattedRow {
  std::optional<TokenizedSample> sample;
  std::string text;         // the rendered text (for preview)
  std::string drop_reason;  // set when sample is empty
  bool tokenization_differs = false;  // segment-wise tokens differ from tokenizing the whole text
};

class Formatter {
public:
  // `renderer` may be empty when no chat template is available; conversation rows then fail
  // with a message saying how to configure one.
  Formatter(DatasetConfig dataset, FormatOptions options, TextCodec codec, ChatRenderer renderer);
  FormattedRow format(const Row& row);
  // The type in use ("text", "instruction", "conversation"); for auto, known after the first row.
  const std::string& resolved_type() const { return type_; }

private:
  FormattedRow format_text(const Row& row) const;
  FormattedRow format_instruction(const Row& row) const;
  FormattedRow format_conversation(const Row& row) const;
  // Renders messages through the chat template and tokenizes with assistant loss masks.
  FormattedRow tokenize_chat(const RowValue& messages, const RowValue& tools, const RowOrigin& origin) const;
  void detect_type(const Row& row);

  DatasetConfig dataset_;
  FormatOptions options_;
  TextCodec codec_;
  ChatRenderer renderer_;
  std::string type_;
};

// The placeholders of a prompt format replaced in one pass (values are never re-scanned).
std::string fill_prompt_format(const std::string& format, const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace surogate::data
