// A parsed template ready to render: its statements and the name used in error messages.
#pragma once

#include <string>
#include <string_view>

#include "chat_template/ast.h"

namespace surogate::chat_template::detail {

struct CompiledTemplate {
  std::string source_name;
  StatementList body;
};

}  // namespace surogate::chat_template::detail
