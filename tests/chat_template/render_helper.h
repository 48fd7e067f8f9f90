// Test helper: render a template source with variables given as JSON text.
#pragma once

#include <string>

#include "chat_template/chat_template.h"

namespace surogate::chat_template::testing {

inline std::string render_source(const std::string& source, const std::string& variables_json = "{}") {
  ChatTemplate chat = ChatTemplate::from_source(source, "test.jinja");
  ChatRenderInput input;
  input.extra_variables = OrderedJson::parse(variables_json);
  return chat.render(input);
}

}  // namespace surogate::chat_template::testing
