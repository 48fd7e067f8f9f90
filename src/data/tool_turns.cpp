// Tool turns → OpenAI layout, with the checks listed in tool_turns.h.
#include "data/tool_turns.h"

#include <set>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::data {
namespace {

// A JSON value that may be stored as a JSON string; `what` names it in the error.
RowValue parse_json_text(const RowValue& value, const RowOrigin& origin, const std::string& what) {
  if (!value.is_string()) return value;
  RowValue parsed = RowValue::parse(value.get_ref<const std::string&>(), nullptr, false);
  if (parsed.is_discarded()) {
    fail_user("{}: {} is a string but not valid JSON: {}", origin.describe(), what, value.get_ref<const std::string&>());
  }
  return parsed;
}

std::set<std::string> tool_names(const RowValue& tools) {
  std::set<std::string> names;
  if (tools.is_array()) {
    for (const auto& tool : tools) names.insert(function_name(tool));
  }
  return names;
}

// Checks one call of an assistant's tool_calls (OpenAI layout) or of a tool_call turn.
void check_call(const RowValue& call, const std::set<std::string>& known, const RowOrigin& origin, size_t index) {
  const RowValue& function = call.contains("function") ? call["function"] : call;
  if (!function.is_object()) {
    fail_user("{}: message {}: a tool call must be an object {{\"name\", \"arguments\"}}, got {}", origin.describe(),
              index, call.dump());
  }
  std::string name = function_name(call);
  if (name.empty()) {
    fail_user("{}: message {}: the tool call has no \"name\": {}", origin.describe(), index, call.dump());
  }
  if (!known.empty() && !known.count(name)) {
    std::string listed;
    for (const auto& tool : known) listed += (listed.empty() ? "" : ", ") + tool;
    fail_user("{}: message {}: the tool call names '{}', which is not among the row's tools ({})", origin.describe(),
              index, name, listed);
  }
  auto arguments = function.find("arguments");
  if (arguments == function.end() || arguments->is_null()) return;
  if (arguments->is_string()) {
    parse_json_text(*arguments, origin, fmt::format("message {}: the arguments of tool call '{}'", index, name));
  } else if (!arguments->is_object()) {
    fail_user("{}: message {}: the arguments of tool call '{}' must be a JSON object (or a JSON string of one), got {}",
              origin.describe(), index, name, arguments->dump());
  }
}

// A tool_call turn's content → {"type": "function", "function": {"name", "arguments"}}.
RowValue call_from_turn(const RowValue& message, const std::set<std::string>& known, const RowOrigin& origin,
                        size_t index) {
  RowValue content = parse_json_text(message["content"], origin, fmt::format("message {} (tool_call)", index));
  if (!content.is_object()) {
    fail_user("{}: message {} (tool_call) must be a JSON object {{\"name\": ..., \"arguments\": {{...}}}}, got {}",
              origin.describe(), index, content.dump());
  }
  check_call(content, known, origin, index);
  RowValue function = RowValue::object();
  function["name"] = function_name(content);
  const RowValue& source = content.contains("function") ? content["function"] : content;
  RowValue arguments = source.value("arguments", RowValue::object());
  // Arguments written as a JSON string become the object, so templates print them with tojson.
  function["arguments"] = arguments.is_null() ? RowValue::object() : parse_json_text(arguments, origin, "arguments");
  RowValue call = RowValue::object();
  call["type"] = "function";
  call["function"] = std::move(function);
  return call;
}

}  // namespace

std::string function_name(const RowValue& entry) {
  if (!entry.is_object()) return "";
  const RowValue* holder = &entry;
  auto function = entry.find("function");
  if (function != entry.end() && function->is_object()) holder = &*function;
  auto name = holder->find("name");
  return name != holder->end() && name->is_string() ? name->get<std::string>() : "";
}

RowValue read_tools(const RowValue& row, const std::string& field, const RowOrigin& origin) {
  auto found = row.find(field);
  if (found == row.end() || found->is_null()) return nullptr;
  RowValue tools = parse_json_text(*found, origin, fmt::format("field '{}' (tools_field)", field));
  if (!tools.is_array()) {
    fail_user("{}: field '{}' (tools_field) must be a list of tool definitions, got a {}", origin.describe(), field,
              tools.type_name());
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    if (function_name(tools[i]).empty()) {
      fail_user("{}: tool {} of '{}' has no name; write {{\"type\": \"function\", \"function\": {{\"name\": ..., "
                "\"description\": ..., \"parameters\": {{...}}}}}}",
                origin.describe(), i + 1, field);
    }
  }
  return tools;
}

RowValue normalise_tool_turns(const RowValue& messages, const RowValue& tools, const RowOrigin& origin) {
  const std::set<std::string> known = tool_names(tools);
  bool uses_calls = false;
  for (const auto& message : messages) {
    uses_calls = uses_calls || message["role"] == "tool_call" || message.contains("tool_calls");
  }
  RowValue out = RowValue::array();
  bool call_open = false;  // the last non-tool message was an assistant turn with tool calls
  for (size_t i = 0; i < messages.size(); ++i) {
    const RowValue& message = messages[i];
    const std::string& role = message["role"].get_ref<const std::string&>();
    const size_t index = i + 1;
    if (role == "tool_call") {
      RowValue call = call_from_turn(message, known, origin, index);
      bool attach = !out.empty() && out.back()["role"] == "assistant";
      if (!attach) {
        RowValue assistant = RowValue::object();
        assistant["role"] = "assistant";
        assistant["content"] = "";
        out.push_back(std::move(assistant));
      }
      RowValue& assistant = out.back();
      if (!assistant.contains("tool_calls") || assistant["tool_calls"].is_null()) assistant["tool_calls"] = RowValue::array();
      assistant["tool_calls"].push_back(std::move(call));
      call_open = true;
      continue;
    }
    if (role == "tool" || role == "tool_response") {
      bool strict = role == "tool_response" || uses_calls;
      if (strict && !call_open) {
        fail_user("{}: message {} is a tool response with no tool call before it; a tool_response (or role tool) "
                  "must follow an assistant turn with tool_calls (or a tool_call turn)",
                  origin.describe(), index);
      }
      RowValue response = message;
      response["role"] = "tool";
      out.push_back(std::move(response));
      continue;
    }
    if (role == "assistant" && message.contains("tool_calls") && !message["tool_calls"].is_null()) {
      if (!message["tool_calls"].is_array()) {
        fail_user("{}: message {}: tool_calls must be a list, got {}", origin.describe(), index, message["tool_calls"].dump());
      }
      for (const auto& call : message["tool_calls"]) check_call(call, known, origin, index);
      call_open = !message["tool_calls"].empty();
    } else {
      call_open = false;
    }
    out.push_back(message);
  }
  return out;
}

}  // namespace surogate::data
