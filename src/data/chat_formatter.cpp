// Conversation rows: message normalisation (property mappings, ShareGPT roles) and the loss mask
// of assistant turns. The mask comes from rendering the conversation prefix by prefix: assistant
// turn i starts where render(messages[:i], add_generation_prompt) ends and ends where
// render(messages[:i+1]) ends. Templates that render an earlier assistant turn differently once
// later turns follow (Qwen3 adds an empty <think> block to the last turn only) are handled by
// locating the turn's content in the full text and its end-of-turn suffix from the prefix
// rendering. With `agent_template` the tools and tool turns are first written as text
// (data/agent_template.h), and the calls / results it wrote are located in each turn for the
// loss_scale. The text is then tokenized span by span so the mask is exact.
#include <algorithm>
#include <set>

#include "core/error.h"
#include "data/agent_template.h"
#include "data/formatter.h"
#include "data/text_checks.h"
#include "data/loss_scale.h"
#include "data/tool_turns.h"

namespace surogate::data {
namespace {


std::optional<std::string> canonical_role(const std::string& role) {
  if (role == "user" || role == "human") return "user";
  if (role == "assistant" || role == "gpt" || role == "model" || role == "bot" || role == "chatgpt") return "assistant";
  if (role == "system") return "system";
  if (role == "tool" || role == "function" || role == "observation" || role == "ipython") return "tool";
  if (role == "tool_response") return "tool_response";
  if (role == "tool_call" || role == "function_call") return "tool_call";
  return std::nullopt;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

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
  const RowValue& first = found->front();
  bool default_mapping = mapping.count("role") && mapping["role"] == "role" && mapping.count("content") &&
                         mapping["content"] == "content";
  if (default_mapping && first.is_object() && !first.contains("role") && first.contains("from") && first.contains("value")) {
    mapping["role"] = "from";  // ShareGPT layout
    mapping["content"] = "value";
  }
  const std::string role_key = mapping.count("role") ? mapping["role"] : "role";
  const std::string content_key = mapping.count("content") ? mapping["content"] : "content";
  std::set<std::string> mapped_sources;
  for (const auto& entry : mapping) mapped_sources.insert(entry.second);

  RowValue messages = RowValue::array();
  std::string system = dataset_.system_field ? optional_string(row.value, *dataset_.system_field, origin, "system_field") : "";
  size_t index = 0;
  for (const RowValue& message : *found) {
    ++index;
    if (!message.is_object()) {
      fail_user("{}: message {} of '{}' is a {}, expected an object with '{}' and '{}'", origin.describe(), index,
                dataset_.messages_field, message.type_name(), role_key, content_key);
    }
    std::string role_name = required_string(message, role_key, origin, "message_property_mappings.role");
    auto role = canonical_role(role_name);
    if (!role) {
      fail_user("{}: message {} has unknown role '{}'; use user/human, assistant/gpt, system, tool/tool_response or "
                "tool_call, or map the role names in message_property_mappings",
                origin.describe(), index, role_name);
    }
    RowValue out = RowValue::object();
    out["role"] = *role;
    // Unmapped properties (tool_calls, tool_call_id, name, reasoning_content, ...) pass through
    // under their own names; mapped ones under their target names.
    for (const auto& [key, value] : message.items()) {
      if (!mapped_sources.count(key) && key != "role" && key != "content") out[key] = value;
    }
    for (const auto& [target, source] : mapping) {
      if (target == "role" || target == "content") continue;
      if (message.contains(source)) out[target] = message[source];
    }
    auto content = message.find(content_key);
    if ((content == message.end() || content->is_null()) && out.contains("tool_calls")) {
      out["content"] = "";
    } else if (*role == "tool_call" && content != message.end() && content->is_object()) {
      out["content"] = *content;  // the call written as an object instead of a JSON string
    } else if (options_.content_parts && content != message.end() && content->is_array()) {
      out["content"] = *content;
    } else {
      out["content"] = required_string(message, content_key, origin, "message_property_mappings.content");
    }
    messages.push_back(std::move(out));
  }
  const std::string tools_field = dataset_.tools_field.value_or("tools");
  RowValue tools = read_tools(row.value, tools_field, origin);
  messages = normalise_tool_turns(messages, tools, origin);
  bool has_system = messages.front()["role"] == "system";
  if (!has_system) {
    if (system.empty() && options_.system) system = *options_.system;
    if (!system.empty()) messages.insert(messages.begin(), RowValue{{"role", "system"}, {"content", system}});
  }
  bool any_assistant = std::any_of(messages.begin(), messages.end(), [](const RowValue& m) { return m["role"] == "assistant"; });
  if (!any_assistant && !options_.train_on_inputs) {
    FormattedRow dropped;
    dropped.drop_reason = "no assistant turn";
    return dropped;
  }
  return tokenize_chat(messages, tools, origin);
}

namespace {

// Where assistant turn `i` ends in `full`, given that it starts at `begin` and renders as
// `turn_text` when it is the last message. Usually `turn_text` is exactly what `full` holds at
// `begin`. Templates that add text to the last turn only (Qwen3's empty <think> block, or the
// reasoning of turns after the last user message) put it first: the turn inside the conversation
// is then the longest suffix of `turn_text` that `full` holds at `begin`. Templates that end
// every rendering with the same text (`epilogue`; the original Llama 3 template always writes an
// assistant header last) have it after the turn: it is not part of the turn.
std::optional<size_t> turn_end(const std::string& full, size_t begin, std::string_view turn_text,
                               std::string_view epilogue) {
  if (!epilogue.empty() && turn_text.ends_with(epilogue)) {
    if (auto end = turn_end(full, begin, turn_text.substr(0, turn_text.size() - epilogue.size()), {})) return end;
  }
  for (size_t skip = 0; skip < turn_text.size(); ++skip) {
    size_t length = turn_text.size() - skip;
    if (full.compare(begin, length, turn_text, skip, length) != 0) continue;
    std::string_view matched = turn_text.substr(skip, length);
    if (matched.find_first_not_of(" \t\n") == std::string_view::npos) return std::nullopt;
    return begin + length;
  }
  return std::nullopt;
}

// The names of the tool calls of `message` that do not appear in `text`: a template that drops
// tool calls would train the model on turns that lost them.
std::string dropped_tool_calls(const RowValue& message, std::string_view text) {
  std::string missing;
  auto calls = message.find("tool_calls");
  if (calls == message.end() || !calls->is_array()) return missing;
  for (const auto& call : *calls) {
    std::string name = function_name(call);
    if (!name.empty() && text.find(name) == std::string_view::npos) missing += (missing.empty() ? "" : ", ") + name;
  }
  return missing;
}

}  // namespace

FormattedRow Formatter::tokenize_chat(const RowValue& given_messages, const RowValue& given_tools,
                                      const RowOrigin& origin) const {
  RowValue messages = given_messages;
  RowValue tools = given_tools;
  // With an agent template the tools and tool turns are text in ordinary messages: the chat
  // template gets no tools, and `marks` say which text of each message is a call or a result.
  std::vector<std::vector<AgentMark>> marks;
  if (options_.agent_template) {
    AgentConversation converted = apply_agent_template(*options_.agent_template, messages, tools, origin);
    messages = std::move(converted.messages);
    marks = std::move(converted.marks);
    tools = nullptr;
  }
  if (options_.response_prefix) {
    for (auto& message : messages) {
      if (message["role"] != "assistant" || !message["content"].is_string()) continue;
      const std::string& content = message["content"].get_ref<const std::string&>();
      if (!content.starts_with(*options_.response_prefix)) message["content"] = *options_.response_prefix + content;
    }
  }
  if (!renderer_ || !options_.use_chat_template) {
    fail_user("{}: this row is a conversation, which needs a chat template: set use_chat_template: true and use a "
              "tokenizer whose tokenizer_config.json has chat_template (or set `template` to a built-in name)",
              origin.describe());
  }
  auto render = [&](const RowValue& subset, bool generation_prompt) {
    try {
      return renderer_(subset, tools, generation_prompt);
    } catch (const UserError& error) {
      fail_user("{}: the chat template failed on this conversation: {}", origin.describe(), error.what());
    }
  };
  FormattedRow result;
  result.text = render(messages, false);
  // What the template writes after any conversation: its rendering of none, when this one ends
  // with it too (templates that need a message fail on none: then there is no epilogue).
  std::string epilogue;
  try {
    epilogue = renderer_(RowValue::array(), RowValue(), false);
  } catch (const UserError&) {
  }
  if (!result.text.ends_with(epilogue)) epilogue.clear();

  std::vector<AssistantTurn> turns;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i]["role"] != "assistant") continue;
    RowValue before(messages.begin(), messages.begin() + static_cast<long>(i));
    RowValue through(messages.begin(), messages.begin() + static_cast<long>(i + 1));
    std::string start_text = render(before, true);
    std::string end_text = render(through, false);
    if (!starts_with(result.text, start_text) || end_text.size() < start_text.size() ||
        end_text.compare(0, start_text.size(), start_text) != 0) {
      fail_user("{}: the chat template renders the conversation before assistant turn {} differently from the whole "
                "conversation, so its loss mask cannot be computed; use another template (`template:`)",
                origin.describe(), i + 1);
    }
    std::string missing = dropped_tool_calls(messages[i], std::string_view(end_text).substr(start_text.size()));
    if (!missing.empty()) {
      fail_user("{}: the chat template does not render the tool calls of assistant turn {} ({}), so the model would "
                "not learn them; set agent_template (hermes, llama3 or react_en) to write tool calls as text",
                origin.describe(), i + 1, missing);
    }
    auto end = turn_end(result.text, start_text.size(), std::string_view(end_text).substr(start_text.size()), epilogue);
    if (!end) {
      fail_user("{}: cannot locate assistant turn {} in the rendered conversation; the chat template changes the "
                "turn's text once later turns follow, so its loss mask cannot be computed; use another template "
                "(`template:`)",
                origin.describe(), i + 1);
    }
    if (*end <= start_text.size()) continue;
    AssistantTurn turn{{start_text.size(), *end, 1.0f}, std::nullopt, {}};
    if (options_.agent_template) {
      auto placed = place_agent_marks(result.text, turn.span, marks[i]);
      if (!placed) {
        fail_user("{}: the chat template changed the tool calls or tool results that agent_template {} wrote into "
                  "assistant turn {}, so their loss cannot be placed; use another template (`template:`)",
                  origin.describe(), agent_template_name(*options_.agent_template), i + 1);
      }
      turn = std::move(*placed);
    }
    turns.push_back(std::move(turn));
  }
  const LossScale scale = options_.train_on_inputs ? LossScale::All : options_.loss_scale;
  std::vector<WeightedSpan> spans = loss_spans(scale, result.text, turns);

  TokenizedSample sample;
  sample.origin = origin;
  bool weighted = false;
  size_t cursor = 0;
  auto append = [&](size_t begin, size_t end, float weight) {
    if (end <= begin) return;
    std::vector<int32_t> ids = codec_.encode(std::string_view(result.text).substr(begin, end - begin), false);
    for (int32_t id : ids) {
      sample.input_ids.push_back(id);
      sample.labels.push_back(weight > 0.0f ? id : kIgnoreLabel);
      sample.weights.push_back(weight);
    }
    weighted = weighted || (weight != 0.0f && weight != 1.0f);
  };
  for (const WeightedSpan& span : spans) {
    append(cursor, span.begin, 0.0f);
    append(span.begin, span.end, span.weight);
    cursor = span.end;
  }
  append(cursor, result.text.size(), 0.0f);
  if (!sample.labels.empty()) {
    sample.labels[0] = kIgnoreLabel;
    sample.weights[0] = 0.0f;
  }
  // Weights of 0 and 1 say no more than the labels: such samples carry none (see sample.h).
  if (!weighted) sample.weights.clear();
  result.tokenization_differs = codec_.encode(result.text, false) != sample.input_ids;
  result.sample = std::move(sample);
  return result;
}

}  // namespace surogate::data
