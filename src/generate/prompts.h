// Prompts as token ids, from what a user writes: plain text (tokenized as transformers'
// tokenizer(text) does, special tokens added), a conversation (rendered with the model folder's
// chat template and the generation prompt, then tokenized without special tokens, as
// apply_chat_template(tokenize=True, add_generation_prompt=True) does), or ids given directly.
// The tokenizer and the template are loaded on first use, so an input of ids needs neither.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace surogate::generate {

class PromptBuilder {
public:
  // `enable_thinking`, when set, is passed to the chat template (Qwen3's thinking switch).
  PromptBuilder(std::filesystem::path model_dir, std::optional<bool> enable_thinking);

  std::vector<int32_t> from_text(const std::string& text);
  // `messages`: [{"role", "content"}, ...]; a row's own enable_thinking overrides the builder's.
  std::vector<int32_t> from_messages(const chat_template::OrderedJson& messages,
                                     std::optional<bool> enable_thinking = std::nullopt);
  // A JSONL row: exactly one of "prompt" (text), "messages" (a conversation) or "input_ids"; the
  // row may hold "enable_thinking" (bool). UserError naming `where` (file:line) and the field.
  std::vector<int32_t> from_row(const nlohmann::ordered_json& row, const std::string& where);

  // The folder's tokenizer (UserError naming the folder when it has no tokenizer.json).
  const tokenizer::Tokenizer& tokenizer();
  bool has_tokenizer() const;

private:
  std::filesystem::path model_dir_;
  std::optional<bool> enable_thinking_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::optional<chat_template::ChatTemplate> template_;
};

}  // namespace surogate::generate
