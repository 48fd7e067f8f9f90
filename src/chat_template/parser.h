// Parses the token stream of a template into statements (ast.h), following jinja2's grammar and
// operator precedence. Unsupported Jinja features (`include`, `extends`, `import`, `block`,
// recursive loops, unknown filters or tests, ...) are rejected here with a UserError naming the
// feature, the template source and the line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat_template/ast.h"
#include "chat_template/lexer.h"

namespace surogate::chat_template {

StatementList parse_template(const std::vector<Token>& tokens, const std::string& source_name);

// Filter and test registries (filters.cpp, tests.cpp): nullptr for an unknown name.
FilterFunction find_filter(std::string_view name);
TestFunction find_test(std::string_view name);
std::vector<std::string> filter_names();
std::vector<std::string> test_names();

}  // namespace surogate::chat_template
