// The message of the UserError a test expects `body` to throw; empty when it throws none, so an
// assertion on the message's text fails then.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

namespace surogate {

inline std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

}  // namespace surogate
