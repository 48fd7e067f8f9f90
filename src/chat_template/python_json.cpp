// python_json (see python_json.h): the template engine's own json.dumps, so the two never differ.
#include "chat_template/python_json.h"

#include "chat_template/value.h"
#include "core/error.h"

namespace surogate::chat_template {

std::string python_json(const nlohmann::ordered_json& value, std::optional<int> indent) {
  JsonDumpOptions options;
  if (indent) options.indent = std::string(static_cast<size_t>(*indent), ' ');
  auto fail = [](const std::string& message) { fail_user("{}", message); };
  return python_json_dumps(Value::from_json(value), options, fail);
}

}  // namespace surogate::chat_template
