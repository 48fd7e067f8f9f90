// How the interpreter reports a problem: one UserError naming the template's source (file or
// built-in name), the line, and what went wrong, e.g.
//   chat template tokenizer_config.json, line 12: unknown filter 'frobnicate'
#pragma once

#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::chat_template {

[[noreturn]] inline void fail_template(const std::string& source_name, int line, const std::string& message) {
  throw UserError(fmt::format("chat template {}, line {}: {}", source_name, line, message));
}

}  // namespace surogate::chat_template
