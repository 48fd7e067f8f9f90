// The named templates users select with the config's `template:` option (chatml, qwen, llama3,
// llama2, mistral, alpaca). Each is Jinja source rendered by our interpreter and marks the
// assistant's tokens with `{% generation %}` so loss masks come straight from the render.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace surogate::chat_template {

struct BuiltinTemplate {
  std::string_view name;
  std::string_view description;
  std::string_view source;
  // Special tokens the template uses when the caller passes none.
  std::vector<std::pair<std::string, std::string>> default_tokens;
};

const std::vector<BuiltinTemplate>& builtin_templates();

}  // namespace surogate::chat_template
