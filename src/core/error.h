// Typed errors. A UserError is the user's to fix (bad config, arguments, files, data) and is
// printed as is, without a stack trace, with exit code 2. Anything else that escapes to the CLI
// is a bug in Surogate and exits with code 1.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace surogate {

class UserError : public std::runtime_error {
public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// An invariant of the engine itself was broken: a bug, not a user mistake.
class InternalError : public std::logic_error {
public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail_user(fmt::format_string<Args...> format, Args&&... args) {
  throw UserError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace surogate

// Internal invariant check: never used for user input (that gets a UserError).
#define SUROGATE_CHECK(condition, ...)                                                        \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      throw ::surogate::InternalError(fmt::format("{}:{}: check failed: {}: {}", __FILE__,    \
                                                  __LINE__, #condition,                       \
                                                  fmt::format(__VA_ARGS__)));                 \
    }                                                                                         \
  } while (0)
