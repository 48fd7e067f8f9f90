// Python's json.dumps(value, ensure_ascii=False[, indent=N]) for a JSON value: the text a chat
// template's `tojson` filter prints, for code outside templates that must write JSON exactly as
// the model's own template would (the agent templates of data/agent_template.h).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace surogate::chat_template {

// ", " and ": " separators on one line, or with `indent` spaces per level ("," at line ends).
// Keys keep their order. Throws UserError for values JSON cannot hold.
std::string python_json(const nlohmann::ordered_json& value, std::optional<int> indent = std::nullopt);

}  // namespace surogate::chat_template
