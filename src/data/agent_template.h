// The config's `agent_template`: writes the tools, the tool calls and the tool responses of a
// conversation as text in ordinary messages, in one of the common tool-calling formats, before
// the model's chat template renders it. For models whose template has no tool support, or to
// override the template's own format (the template is then given no `tools`).
//   hermes    (Hermes / Qwen2.5 / Qwen3) the tools as JSON lines inside <tools></tools> in the
//             system message, each call as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
//             in the assistant message, consecutive tool responses as one user message of
//             <tool_response>\n...\n</tool_response> blocks: what Qwen3's own template renders.
//   llama3    (Llama 3.1 JSON tool calling) the tools, indented JSON, at the start of the first
//             user message after an instruction; each call as the assistant's text
//             {"name": ..., "parameters": {...}}; each tool response as a message of role ipython.
//   react_en  (ReAct, English; `react` is the same) the tools and the Thought / Action /
//             Action Input / Observation format in the system message; an assistant message, its
//             calls as "Action: name\nAction Input: {...}\n", then "Observation:" and the tool
//             results, and the assistant's next message form ONE assistant turn; the results
//             inside it carry no loss.
// Messages come after data/tool_turns.h's normalisation (roles system, user, assistant with
// optional tool_calls, tool). Rows with no tools and no tool turns come back unchanged.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/loss_scale.h"
#include "data/row_reader.h"

namespace surogate::data {

enum class AgentTemplate { Hermes, Llama3, ReactEn };

// nullopt for an unknown name (the config check names the known ones).
std::optional<AgentTemplate> parse_agent_template(std::string_view name);
std::string_view agent_template_name(AgentTemplate format);

// Text an agent template wrote inside an assistant message whose loss it decides: a tool call
// (weighed by the agent loss_scale strategies) or tool results inside the turn (no loss).
struct AgentMark {
  enum class Kind { ToolCall, ToolResult };
  Kind kind = Kind::ToolCall;
  std::string text;
};

struct AgentConversation {
  RowValue messages = RowValue::array();
  // marks[i]: the marks of messages[i], in text order (empty for other messages).
  std::vector<std::vector<AgentMark>> marks;
};

// UserError naming `origin` for conversations the format cannot write (llama3 without a user
// message to hold the tools; react_en with a tool response that follows no assistant message).
AgentConversation apply_agent_template(AgentTemplate format, const RowValue& messages, const RowValue& tools,
                                       const RowOrigin& origin);

// Where `marks` lie in the rendered assistant turn `turn` of `text`, found in order (the template
// may trim the message, so each is found without its surrounding whitespace, then keeps the
// whitespace it ends with where the rendering has it; tool results take all the whitespace
// around them). nullopt when one is missing (the template changed the text).
std::optional<AssistantTurn> place_agent_marks(std::string_view text, const WeightedSpan& turn,
                                               const std::vector<AgentMark>& marks);

}  // namespace surogate::data
