// Conversation rows: message normalisation (property mappings, ShareGPT roles) and the loss mask
// of assistant turns. The mask comes from rendering the conversation prefix by prefix: assistant
// turn i starts where render(messages[:i], add_generation_prompt) ends and ends where
// render(messages[:i+1]) ends. Templates that render an earlier assistant turn differently once
// later turns follow (Qwen3 adds an empty <think> block to the last turn only) are handled by
// locating the turn's content in the full text and its end-of-turn suffix from the prefix
// rendering. The text is then tokenized span by span so the mask is exact.
#include <algorithm>

#include "core/error.h"
#include "data/formatter.h"
#include "data/text_checks.h"

namespace surogate::data {
namespace {

using nlohmann::json;

std::optional<std::string> canonical_role(const std::string& role) {
  if (role == "user" || role == "human") return "user";
  if (role == "assistant" || role == "gpt" || role == "model" || role == "bot" || role == "chatgpt") return "assistant";
  if (role == "system") return "system";
  if (role == "tool" || role == "function" || role == "observation" || role == "ipython") return "tool";
  return std::nullopt;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

struct CharSpan {
  size_t begin;
  size_t end;
};

}  // namespace

FormattedRow Formatter::format_conversation(const Row& row) const {
  const RowOrigin& origin = row.origin;
  auto found = row.value.find(dataset_.messages_field);
  if (found == row.value.end() || found->is_null()) {
    fail_user("{}: missing field '{}' (messages_field); set messages_field to the column holding the messages",
              origin.describe(), dataset_.messages_field);
  }
  if (!found->is_array()) {
    fail_user("{}: field '{}' must be a list of messages but is a {}", origin.describe(), dataset_.messages_field,
              found->type_name());
  }
  if (found->empty()) fail_user("{}: the conversation in '{}' is empty; remove the row", origin.describe(), dataset_.messages_field);

  std::map<std::string, std::string> mapping = dataset_.message_property_mappings;
  const json& first = found->front();
  bool default_mapping = mapping.count("role") && mapping["role"] == "role" && mapping.count("content") &&
                         mapping["content"] == "content";
  if (default_mapping && first.is_object() && !first.contains("role") && first.contains("from") && first.contains("value")) {
    mapping["role"] = "from";  // ShareGPT layout
    mapping["content"] = "value";
  }
  const std::string role_key = mapping.count("role") ? mapping["role"] : "role";
  const std::string content_key = mapping.count("content") ? mapping["content"] : "content";

  json messages = json::array();
  std::string system = dataset_.system_field ? optional_string(row.value, *dataset_.system_field, origin, "system_field") : "";
  size_t index = 0;
  for (const json& message : *found) {
    ++index;
    if (!message.is_object()) {
      fail_user("{}: message {} of '{}' is a {}, expected an object with '{}' and '{}'", origin.describe(), index,
                dataset_.messages_field, message.type_name(), role_key, content_key);
    }
    std::string role_name = required_string(message, role_key, origin, "message_property_mappings.role");
    auto role = canonical_role(role_name);
    if (!role) {
      fail_user("{}: message {} has unknown role '{}'; use user/human, assistant/gpt, system or tool, or map the "
                "role names in message_property_mappings",
                origin.describe(), index, role_name);
    }
    json out = json::object();
    out["role"] = *role;
    for (const auto& [target, source] : mapping) {
      if (target == "role" || target == "content") continue;
      if (message.contains(source)) out[target] = message[source];
    }
    auto content = message.find(content_key);
    if ((content == message.end() || content->is_null()) && out.contains("tool_calls")) {
      out["content"] = "";
    } else {
      out["content"] = required_string(message, content_key, origin, "message_property_mappings.content");
    }
    messages.push_back(std::move(out));
  }
  bool has_system = messages.front()["role"] == "system";
  if (!has_system) {
    if (system.empty() && options_.system) system = *options_.system;
    if (!system.empty()) messages.insert(messages.begin(), json{{"role", "system"}, {"content", system}});
  }
  json tools;
  if (dataset_.tools_field) {
    auto tools_value = row.value.find(*dataset_.tools_field);
    if (tools_value != row.value.end() && !tools_value->is_null()) {
      tools = *tools_value;
      if (tools.is_string()) {
        tools = json::parse(tools.get<std::string>(), nullptr, false);
        if (tools.is_discarded()) {
          fail_user("{}: field '{}' (tools_field) is a string but not valid JSON; store the tool list as JSON",
                    origin.describe(), *dataset_.tools_field);
        }
      }
      if (!tools.is_array()) {
        fail_user("{}: field '{}' (tools_field) must be a list of tool definitions", origin.describe(), *dataset_.tools_field);
      }
    }
  }
  bool any_assistant = std::any_of(messages.begin(), messages.end(), [](const json& m) { return m["role"] == "assistant"; });
  if (!any_assistant && !options_.train_on_inputs) {
    FormattedRow dropped;
    dropped.drop_reason = "no assistant turn";
    return dropped;
  }
  return tokenize_chat(messages, tools, origin);
}

FormattedRow Formatter::tokenize_chat(const json& messages, const json& tools, const RowOrigin& origin) const {
  if (!renderer_ || !options_.use_chat_template) {
    fail_user("{}: this row is a conversation, which needs a chat template: set use_chat_template: true and use a "
              "tokenizer whose tokenizer_config.json has chat_template (or set `template` to a built-in name)",
              origin.describe());
  }
  auto render = [&](const json& subset, bool generation_prompt) {
    try {
      return renderer_(subset, tools, generation_prompt);
    } catch (const UserError& error) {
      fail_user("{}: the chat template failed on this conversation: {}", origin.describe(), error.what());
    }
  };
  FormattedRow result;
  result.text = render(messages, false);

  std::vector<CharSpan> spans;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i]["role"] != "assistant") continue;
    json before(messages.begin(), messages.begin() + static_cast<long>(i));
    json through(messages.begin(), messages.begin() + static_cast<long>(i + 1));
    std::string start_text = render(before, true);
    std::string end_text = render(through, false);
    if (!starts_with(result.text, start_text)) {
      fail_user("{}: the chat template renders the conversation before assistant turn {} differently from the whole "
                "conversation, so its loss mask cannot be computed; use another template (`template:`)",
                origin.describe(), i + 1);
    }
    CharSpan span{start_text.size(), 0};
    if (starts_with(result.text, end_text) && end_text.size() >= span.begin) {
      span.end = end_text.size();
    } else {
      // The turn renders differently when it is last: find its content, then the end-of-turn text
      // that follows the content in the prefix rendering.
      const std::string& content = messages[i]["content"].get_ref<const std::string&>();
      size_t content_in_prefix = end_text.rfind(content);
      size_t content_in_full = result.text.find(content, span.begin);
      if (content.empty() || content_in_prefix == std::string::npos || content_in_full == std::string::npos) {
        fail_user("{}: cannot locate assistant turn {} in the rendered conversation; the chat template changes the "
                  "turn's text, so its loss mask cannot be computed; use another template (`template:`)",
                  origin.describe(), i + 1);
      }
      std::string suffix = end_text.substr(content_in_prefix + content.size());
      size_t content_end = content_in_full + content.size();
      if (result.text.compare(content_end, suffix.size(), suffix) != 0) {
        fail_user("{}: the end of assistant turn {} renders differently inside the conversation than at its end; "
                  "the loss mask cannot be computed; use another template (`template:`)",
                  origin.describe(), i + 1);
      }
      span.end = content_end + suffix.size();
    }
    if (span.end > span.begin) spans.push_back(span);
  }

  TokenizedSample sample;
  sample.origin = origin;
  size_t cursor = 0;
  auto append = [&](size_t begin, size_t end, bool loss) {
    if (end <= begin) return;
    std::vector<int32_t> ids = codec_.encode(std::string_view(result.text).substr(begin, end - begin), false);
    for (int32_t id : ids) {
      sample.input_ids.push_back(id);
      sample.labels.push_back(loss || options_.train_on_inputs ? id : kIgnoreLabel);
    }
  };
  for (const CharSpan& span : spans) {
    append(cursor, span.begin, false);
    append(span.begin, span.end, true);
    cursor = span.end;
  }
  append(cursor, result.text.size(), false);
  if (!sample.labels.empty()) sample.labels[0] = kIgnoreLabel;
  result.tokenization_differs = codec_.encode(result.text, false) != sample.input_ids;
  result.sample = std::move(sample);
  return result;
}

}  // namespace surogate::data
