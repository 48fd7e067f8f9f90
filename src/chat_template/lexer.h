// Splits Jinja template source into tokens: literal text and the tokens inside `{{ }}` and
// `{% %}` (comments are dropped). Whitespace control is applied here, with Hugging Face's
// settings: `{%-`/`-%}` strip all whitespace on that side, trim_blocks drops the newline after a
// block or comment tag, lstrip_blocks drops the spaces before one on its line (`{%+`/`+%}` opt
// out), and one trailing newline of the template is dropped (keep_trailing_newline=False).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace surogate::chat_template {

enum class TokenKind { kText, kVariableBegin, kVariableEnd, kBlockBegin, kBlockEnd, kName, kString, kInteger, kFloat,
                       kOperator, kEnd };

struct Token {
  TokenKind kind;
  std::string text;  // text, name, decoded string literal, number, or operator
  int line = 1;
};

// Throws UserError (naming `source_name` and the line) for malformed tags and literals.
std::vector<Token> tokenize_template(std::string_view source, const std::string& source_name);

}  // namespace surogate::chat_template
