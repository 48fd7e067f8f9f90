// Percent-encoding; see percent_encoding.h.
#include "io/percent_encoding.h"

#include <cctype>

#include <fmt/format.h>

namespace surogate::io {

std::string percent_encode(std::string_view text) {
  std::string encoded;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded += static_cast<char>(c);
    } else {
      encoded += fmt::format("%{:02X}", c);
    }
  }
  return encoded;
}

}  // namespace surogate::io
