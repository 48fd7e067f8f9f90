// One reading of the environment for the clients of io/ (hub, object stores, cloud credentials):
// a variable that is unset and one set to the empty string mean the same, "not given".
#pragma once

#include <optional>
#include <string>

namespace surogate::io {

// The value of environment variable `name`, or nothing when it is unset or empty.
std::optional<std::string> environment_variable(const char* name);

}  // namespace surogate::io
