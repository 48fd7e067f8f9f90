// Agent templates (see agent_template.h): tools, tool calls and tool responses written as text.
#include "data/agent_template.h"

#include <fmt/format.h>

#include "chat_template/python_json.h"
#include "core/error.h"
#include "data/tool_turns.h"

namespace surogate::data {
namespace {

using chat_template::python_json;

// The Hermes format as Qwen2.5 / Qwen3 write it (their templates render exactly this text).
constexpr std::string_view kHermesToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "
    "signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kHermesToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>";
// Llama 3.1's instruction before the tools in the first user message (as its template writes it).
constexpr std::string_view kLlama3ToolsHead =
    "Given the following functions, please respond with a JSON for a function call with its proper arguments that "
    "best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of "
    "argument name and its value}.Do not use variables.\n\n";
constexpr std::string_view kReactObservation = "Observation:";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::string content_of(const RowValue& message) {
  auto content = message.find("content");
  return content != message.end() && content->is_string() ? content->get<std::string>() : std::string();
}

const RowValue& function_of(const RowValue& entry) {
  auto function = entry.find("function");
  return function != entry.end() && function->is_object() ? *function : entry;
}

// A call's arguments as written: a JSON string verbatim (tool_turns.h checked it), an object as
// Python's json.dumps, none as {}.
std::string arguments_text(const RowValue& call) {
  const RowValue& function = function_of(call);
  auto arguments = function.find("arguments");
  if (arguments == function.end() || arguments->is_null()) return "{}";
  return arguments->is_string() ? arguments->get<std::string>() : python_json(*arguments);
}

bool has_calls(const RowValue& message) {
  auto calls = message.find("tool_calls");
  return calls != message.end() && calls->is_array() && !calls->empty();
}

// The message without its tool calls and with `content`.
RowValue with_content(const RowValue& message, std::string content) {
  RowValue out = message;
  out.erase("tool_calls");
  out["content"] = std::move(content);
  return out;
}

std::string hermes_tools(const RowValue& tools) {
  std::string block(kHermesToolsHead);
  for (const auto& tool : tools) {
    block += '\n';
    block += python_json(tool);
  }
  return block + std::string(kHermesToolsTail);
}

std::string react_tools(const RowValue& tools) {
  std::string block = "Answer the user with the help of these tools:\n\n";
  std::string names;
  for (const auto& tool : tools) {
    const RowValue& function = function_of(tool);
    std::string name = function_name(tool);
    std::string description = function.contains("description") && function["description"].is_string()
                                  ? function["description"].get<std::string>()
                                  : std::string();
    auto parameters = function.find("parameters");
    std::string schema = parameters == function.end() || parameters->is_null() ? "{}"
                         : parameters->is_string()                            ? parameters->get<std::string>()
                                                                              : python_json(*parameters);
    block += name + (description.empty() ? "" : ": " + description) + "\nParameters: " + schema + "\n\n";
    names += (names.empty() ? "" : ", ") + name;
  }
  return block + "Use this format:\n\nThought: what to do next\nAction: the tool to call, one of [" + names +
         "]\nAction Input: the tool's arguments as a JSON object\nObservation: the tool's result\n... (Thought, "
         "Action, Action Input and Observation repeat as needed)\nThought: I know the final answer\nFinal Answer: "
         "the answer to the user";
}

// Builds the converted conversation message by message.
class Writer {
public:
  Writer(AgentTemplate format, const RowOrigin& origin) : format_(format), origin_(origin) {}

  void message(const RowValue& message) {
    const std::string role = message.value("role", "");
    if (role == "tool") return tool_response(content_of(message));
    tool_group_open_ = false;
    if (role == "assistant") return assistant(message);
    push(message, {});
    turn_open_ = false;
    results_open_ = false;
  }

  // The tool list goes into the system message (hermes, react_en) or the first user message (llama3).
  AgentConversation finish(const RowValue& tools) {
    if (tools.is_array() && !tools.empty()) {
      if (format_ == AgentTemplate::Llama3) {
        put_in_first_user_message(tools);
      } else {
        put_in_system_message(format_ == AgentTemplate::Hermes ? hermes_tools(tools) : react_tools(tools));
      }
    }
    return std::move(out_);
  }

private:
  void push(RowValue message, std::vector<AgentMark> marks) {
    out_.messages.push_back(std::move(message));
    out_.marks.push_back(std::move(marks));
  }

  void assistant(const RowValue& message) {
    std::string content = content_of(message);
    if (format_ == AgentTemplate::ReactEn) return react_assistant(message, content);
    if (!has_calls(message)) return push(message, {});
    std::vector<AgentMark> marks;
    std::string text = content;
    const RowValue& calls = message["tool_calls"];
    for (size_t index = 0; index < calls.size(); ++index) {
      const RowValue& call = calls[index];
      std::string written;
      if (format_ == AgentTemplate::Hermes) {
        // As Qwen's template: a newline before every call but a first one with no text before it.
        if (!content.empty() || index > 0) text += "\n";
        written = "<tool_call>\n{\"name\": \"" + function_name(call) + "\", \"arguments\": " + arguments_text(call) +
                  "}\n</tool_call>";
      } else {
        // One call per line; the newline before the next call belongs to this one ("}\n" is one
        // token of byte-level BPE tokenizers, and a loss boundary inside it would split it).
        if (index == 0 && !text.empty()) text += "\n";
        written = "{\"name\": \"" + function_name(call) + "\", \"parameters\": " + arguments_text(call) + "}";
        if (index + 1 < calls.size()) written += "\n";
      }
      text += written;
      marks.push_back({AgentMark::Kind::ToolCall, std::move(written)});
    }
    push(with_content(message, std::move(text)), std::move(marks));
  }

  void tool_response(const std::string& result) {
    switch (format_) {
      case AgentTemplate::Hermes: {
        std::string block = "<tool_response>\n" + result + "\n</tool_response>";
        if (tool_group_open_) {
          RowValue& group = out_.messages.back();
          group["content"] = group["content"].get<std::string>() + "\n" + block;
        } else {
          push(RowValue{{"role", "user"}, {"content", block}}, {});
          tool_group_open_ = true;
        }
        return;
      }
      case AgentTemplate::Llama3:
        return push(RowValue{{"role", "ipython"}, {"content", result}}, {});
      case AgentTemplate::ReactEn:
        return react_observation(result);
    }
  }

  // react_en: the assistant's text, then each call's Action / Action Input lines and
  // "Observation:". After tool results the next assistant message continues the same turn.
  void react_assistant(const RowValue& message, const std::string& content) {
    if (!results_open_) {
      push(with_content(message, ""), {});
      turn_open_ = true;
    }
    std::string text = out_.messages.back()["content"].get<std::string>() + content;
    std::vector<AgentMark>& marks = out_.marks.back();
    if (has_calls(message)) {
      if (!text.empty() && text.back() != '\n') text += "\n";
      for (const auto& call : message["tool_calls"]) {
        std::string written = "Action: " + function_name(call) + "\nAction Input: " + arguments_text(call) + "\n";
        text += written;
        marks.push_back({AgentMark::Kind::ToolCall, std::move(written)});
      }
      text += kReactObservation;
    }
    out_.messages.back()["content"] = std::move(text);
    results_open_ = false;
  }

  // One tool result: " result\n" after the turn's "Observation:" (added when the assistant's text
  // does not end with it), or "Observation: result\n" after an earlier result of the same step.
  void react_observation(const std::string& result) {
    if (!turn_open_) {
      fail_user("{}: a tool response ('{}') follows no assistant message; agent_template react_en writes a tool's "
                "result as the Observation inside the assistant turn that called the tool",
                origin_.describe(), result.substr(0, 40));
    }
    std::string text = out_.messages.back()["content"].get<std::string>();
    std::vector<AgentMark>& marks = out_.marks.back();
    std::string written;
    if (results_open_) {
      written = std::string(kReactObservation) + " " + result + "\n";
      marks.back().text += written;
    } else {
      if (!text.ends_with(kReactObservation)) {
        if (!text.empty() && text.back() != '\n') text += "\n";
        text += kReactObservation;
      }
      written = " " + result + "\n";
      marks.push_back({AgentMark::Kind::ToolResult, written});
      results_open_ = true;
    }
    out_.messages.back()["content"] = text + written;
  }

  void put_in_system_message(const std::string& block) {
    RowValue& messages = out_.messages;
    if (!messages.empty() && messages.front().value("role", "") == "system") {
      messages.front()["content"] = content_of(messages.front()) + "\n\n" + block;
      return;
    }
    messages.insert(messages.begin(), RowValue{{"role", "system"}, {"content", block}});
    out_.marks.insert(out_.marks.begin(), std::vector<AgentMark>{});
  }

  void put_in_first_user_message(const RowValue& tools) {
    for (auto& message : out_.messages) {
      if (message.value("role", "") != "user") continue;
      std::string text(kLlama3ToolsHead);
      for (const auto& tool : tools) text += python_json(tool, 4) + "\n\n";
      message["content"] = text + std::string(trimmed(content_of(message)));
      return;
    }
    fail_user("{}: agent_template llama3 puts the tool list in the first user message, but this conversation has "
              "no user message",
              origin_.describe());
  }

  AgentTemplate format_;
  const RowOrigin& origin_;
  AgentConversation out_;
  bool tool_group_open_ = false;  // hermes: the last message holds tool responses
  bool turn_open_ = false;        // react_en: the last message is an assistant turn
  bool results_open_ = false;     // react_en: that turn ends with tool results (the next assistant
                                  // message continues it)
};

}  // namespace

std::optional<AgentTemplate> parse_agent_template(std::string_view name) {
  if (name == "hermes") return AgentTemplate::Hermes;
  if (name == "llama3") return AgentTemplate::Llama3;
  if (name == "react_en" || name == "react") return AgentTemplate::ReactEn;
  return std::nullopt;
}

std::string_view agent_template_name(AgentTemplate format) {
  switch (format) {
    case AgentTemplate::Hermes:
      return "hermes";
    case AgentTemplate::Llama3:
      return "llama3";
    case AgentTemplate::ReactEn:
      return "react_en";
  }
  return "";
}

AgentConversation apply_agent_template(AgentTemplate format, const RowValue& messages, const RowValue& tools,
                                       const RowOrigin& origin) {
  Writer writer(format, origin);
  for (const auto& message : messages) writer.message(message);
  return writer.finish(tools);
}

std::optional<AssistantTurn> place_agent_marks(std::string_view text, const WeightedSpan& turn,
                                               const std::vector<AgentMark>& marks) {
  AssistantTurn placed;
  placed.span = turn;
  placed.tool_calls.emplace();
  size_t cursor = turn.begin;
  for (const AgentMark& mark : marks) {
    std::string_view needle = trimmed(mark.text);
    size_t begin = text.find(needle, cursor);
    if (begin == std::string_view::npos || begin + needle.size() > turn.end) return std::nullopt;
    size_t end = begin + needle.size();
    // The whitespace the mark ends with, where the rendering kept it.
    std::string_view tail =
        std::string_view(mark.text).substr(static_cast<size_t>(needle.data() - mark.text.data()) + needle.size());
    if (end + tail.size() <= turn.end && text.substr(end, tail.size()) == tail) end += tail.size();
    if (mark.kind == AgentMark::Kind::ToolResult) {
      while (begin > cursor && is_space(text[begin - 1])) --begin;
      while (end < turn.end && is_space(text[end])) ++end;
      placed.tool_results.push_back({begin, end, 0.0f});
    } else {
      placed.tool_calls->push_back({begin, end, 2.0f});
    }
    cursor = end;
  }
  return placed;
}

}  // namespace surogate::data
