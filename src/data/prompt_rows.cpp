// `type: prompt` rows (see prompt_rows.h).
#include "data/prompt_rows.h"

#include "core/error.h"

namespace surogate::data {
namespace {

// The messages of a chat prompt, checked: each an object with a string role and a content.
void check_prompt_messages(const RowValue& messages, const RowOrigin& origin, const std::string& field) {
  if (messages.empty()) fail_user("{}: the prompt messages in '{}' are empty; remove the row", origin.describe(), field);
  for (size_t i = 0; i < messages.size(); ++i) {
    const RowValue& message = messages[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string() ||
        !message.contains("content")) {
      fail_user("{}: message {} of '{}' is not a {{\"role\": ..., \"content\": ...}} object", origin.describe(), i,
                field);
    }
  }
}

}  // namespace

PromptRow read_prompt_row(const Row& row, const TextCodec& codec, const ChatRenderer& renderer,
                          int64_t max_prompt_length, const std::string& prompt_field) {
  PromptRow result;
  result.origin = row.origin;
  const auto found = row.value.find(prompt_field);
  if (found == row.value.end() || found->is_null()) {
    fail_user("{}: a `type: prompt` row needs a '{}' column (a string, or a list of chat messages)",
              row.origin.describe(), prompt_field);
  }
  result.prompt = *found;
  if (found->is_string()) {
    result.text = found->get<std::string>();
    if (result.text.empty()) fail_user("{}: the prompt in '{}' is empty; remove the row", row.origin.describe(), prompt_field);
  } else if (found->is_array()) {
    check_prompt_messages(*found, row.origin, prompt_field);
    if (!renderer) {
      fail_user("{}: the prompt is chat messages but the model has no chat template; set `template:` to a built-in "
                "template or write the prompt as a string", row.origin.describe());
    }
    result.text = renderer(*found, RowValue(), true);
  } else {
    fail_user("{}: '{}' must be a string or a list of chat messages but is a {}", row.origin.describe(), prompt_field,
              found->type_name());
  }
  result.columns = RowValue::object();
  for (const auto& [key, value] : row.value.items()) {
    if (key != prompt_field) result.columns[key] = value;
  }
  result.prompt_ids = codec.encode(result.text, false);
  if (result.prompt_ids.empty()) fail_user("{}: the prompt tokenizes to no tokens", row.origin.describe());
  if (max_prompt_length > 0 && static_cast<int64_t>(result.prompt_ids.size()) > max_prompt_length) {
    result.prompt_ids.erase(result.prompt_ids.begin(),
                            result.prompt_ids.end() - static_cast<std::ptrdiff_t>(max_prompt_length));
  }
  return result;
}

}  // namespace surogate::data
