// The API key check (auth.h).
#include "serve/auth.h"

namespace surogate::serve {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer one is visited; a length difference is folded into the result.
  const size_t length = a.size() > b.size() ? a.size() : b.size();
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < length; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference = static_cast<unsigned char>(difference | (x ^ y));
  }
  return difference == 0;
}

bool bearer_matches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.substr(0, kScheme.size()) != kScheme) return false;
  return constant_time_equal(authorization.substr(kScheme.size()), key);
}

}  // namespace surogate::serve
