// Environment variables; see environment.h.
#include "io/environment.h"

#include <cstdlib>

namespace surogate::io {

std::optional<std::string> environment_variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

}  // namespace surogate::io
