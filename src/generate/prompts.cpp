// Prompts as token ids (prompts.h).
#include "generate/prompts.h"

#include "core/error.h"

namespace surogate::generate {

PromptBuilder::PromptBuilder(std::filesystem::path model_dir, std::optional<bool> enable_thinking)
    : model_dir_(std::move(model_dir)), enable_thinking_(enable_thinking) {}

bool PromptBuilder::has_tokenizer() const { return std::filesystem::exists(model_dir_ / "tokenizer.json"); }

const tokenizer::Tokenizer& PromptBuilder::tokenizer() {
  if (!tokenizer_) {
    if (!has_tokenizer()) {
      fail_user("{} has no tokenizer.json: text prompts and conversations need the model's tokenizer files; give "
                "token ids instead ({{\"input_ids\": [...]}})", model_dir_.string());
    }
    tokenizer_ = tokenizer::Tokenizer::load(model_dir_);
  }
  return *tokenizer_;
}

std::vector<int32_t> PromptBuilder::from_text(const std::string& text) { return tokenizer().encode(text, true); }

std::vector<int32_t> PromptBuilder::from_messages(const chat_template::OrderedJson& messages,
                                                  std::optional<bool> enable_thinking) {
  const tokenizer::Tokenizer& codec = tokenizer();
  if (!template_) template_ = chat_template::ChatTemplate::from_tokenizer_directory(model_dir_);
  chat_template::ChatRenderInput input;
  input.messages = messages;
  input.add_generation_prompt = true;
  if (const std::optional<bool> thinking = enable_thinking ? enable_thinking : enable_thinking_) {
    input.extra_variables["enable_thinking"] = *thinking;
  }
  return codec.encode(template_->render(input), false);
}

std::vector<int32_t> PromptBuilder::from_row(const nlohmann::ordered_json& row, const std::string& where) {
  if (!row.is_object()) fail_user("{}: a prompt row must be a JSON object, got {}", where, row.type_name());
  const int given = static_cast<int>(row.contains("prompt")) + static_cast<int>(row.contains("messages")) +
                    static_cast<int>(row.contains("input_ids"));
  if (given != 1) {
    fail_user("{}: a row holds exactly one of \"prompt\" (text), \"messages\" (a conversation) or \"input_ids\"; "
              "this one has {}", where, given);
  }
  std::optional<bool> thinking;
  if (row.contains("enable_thinking")) {
    if (!row["enable_thinking"].is_boolean()) fail_user("{}: \"enable_thinking\" must be true or false", where);
    thinking = row["enable_thinking"].get<bool>();
  }
  if (row.contains("prompt")) {
    if (!row["prompt"].is_string()) fail_user("{}: \"prompt\" must be a string", where);
    return from_text(row["prompt"].get<std::string>());
  }
  if (row.contains("messages")) {
    const nlohmann::ordered_json& messages = row["messages"];
    if (!messages.is_array() || messages.empty()) fail_user("{}: \"messages\" must be a non-empty list", where);
    for (size_t i = 0; i < messages.size(); ++i) {
      if (!messages[i].is_object() || !messages[i].contains("role") || !messages[i]["role"].is_string()) {
        fail_user("{}: messages[{}] must be an object with a string \"role\"", where, i);
      }
    }
    try {
      return from_messages(messages, thinking);
    } catch (const UserError& error) {
      fail_user("{}: {}", where, error.what());
    }
  }
  const nlohmann::ordered_json& ids = row["input_ids"];
  if (!ids.is_array() || ids.empty()) fail_user("{}: \"input_ids\" must be a non-empty list of token ids", where);
  std::vector<int32_t> prompt;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer()) fail_user("{}: input_ids[{}] is not an integer", where, i);
    const int64_t id = ids[i].get<int64_t>();
    if (id < 0 || id > INT32_MAX) fail_user("{}: input_ids[{}] = {} is not a token id", where, i, id);
    prompt.push_back(static_cast<int32_t>(id));
  }
  return prompt;
}

}  // namespace surogate::generate
