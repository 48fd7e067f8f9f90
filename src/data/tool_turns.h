// Tool-calling conversations, brought to the layout chat templates read (the OpenAI one, which is
// what transformers' apply_chat_template(messages, tools=...) takes):
//   tools               a list of tool schemas ({"type": "function", "function": {name, ...}} or
//                       bare {name, description, parameters}), or a JSON string of one.
//   role "tool_call"    (ms-swift's agent layout; ShareGPT "function_call") content is a JSON
//                       object {"name", "arguments"} (or a JSON string of one). Consecutive calls
//                       become one assistant message's `tool_calls`, attached to the assistant
//                       message right before them when there is one.
//   role "tool_response" / "tool"   the result of a call: role "tool".
//   assistant `tool_calls` (OpenAI)  kept as written; arguments that are a string must be JSON.
// Checks, each a UserError naming the row's file:line and the message: arguments that are not
// JSON, a call without a name, a name not among the row's tools (when it has tools), and a tool
// response with no tool call before it (for `tool_response`, and for `tool` messages in
// conversations that use tool calls at all; older datasets with hand-written calls keep working).
#pragma once

#include <string>

#include "data/row_reader.h"

namespace surogate::data {

// The row's tool list: row[field] as a list, or parsed from a JSON string; null when absent/null.
RowValue read_tools(const RowValue& row, const std::string& field, const RowOrigin& origin);

// `messages` has canonical roles (user, assistant, system, tool, tool_call, tool_response). Returns the messages
// with tool_call turns folded into assistant `tool_calls`, after the checks above.
RowValue normalise_tool_turns(const RowValue& messages, const RowValue& tools, const RowOrigin& origin);

// The function name of a tool schema or a tool call ({"function": {"name"}} or {"name"}); "" when
// there is none.
std::string function_name(const RowValue& entry);

}  // namespace surogate::data
