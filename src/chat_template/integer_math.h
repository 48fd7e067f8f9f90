// 64-bit integer arithmetic for templates, with overflow reported instead of undefined behaviour.
// Python's integers are unbounded; the interpreter's are int64, so `2 ** 76`, `-(-2**63)`, the
// floor division -2**63 // -1 (which also traps on x86) or a sum past 2**63 have no result here.
// Each function returns nullopt where the exact result does not fit; callers fail with a message
// naming the template line. Floor division and modulo round toward negative infinity, as Python.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

namespace surogate::chat_template::integer_math {

inline std::optional<int64_t> add(int64_t a, int64_t b) {
  int64_t result = 0;
  return __builtin_add_overflow(a, b, &result) ? std::nullopt : std::optional<int64_t>(result);
}

inline std::optional<int64_t> subtract(int64_t a, int64_t b) {
  int64_t result = 0;
  return __builtin_sub_overflow(a, b, &result) ? std::nullopt : std::optional<int64_t>(result);
}

inline std::optional<int64_t> multiply(int64_t a, int64_t b) {
  int64_t result = 0;
  return __builtin_mul_overflow(a, b, &result) ? std::nullopt : std::optional<int64_t>(result);
}

inline std::optional<int64_t> negate(int64_t a) { return subtract(0, a); }

// b != 0 (callers report division by zero first).
inline std::optional<int64_t> floor_divide(int64_t a, int64_t b) {
  if (a == std::numeric_limits<int64_t>::min() && b == -1) return std::nullopt;
  int64_t quotient = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --quotient;
  return quotient;
}

// b != 0; the result takes the sign of b, as Python's.
inline int64_t modulo(int64_t a, int64_t b) {
  if (b == -1) return 0;  // also avoids the trap of INT64_MIN % -1
  int64_t remainder = a % b;
  if (remainder != 0 && ((remainder < 0) != (b < 0))) remainder += b;
  return remainder;
}

// A float truncated toward zero, as Python's int(); nullopt for inf, nan or beyond int64.
inline std::optional<int64_t> truncate(double value) {
  // ±2**63 are exact doubles; every double in [-2**63, 2**63) converts without overflow.
  constexpr double kTwoToThe63 = 9223372036854775808.0;
  if (!(value >= -kTwoToThe63 && value < kTwoToThe63)) return std::nullopt;  // also nan
  return static_cast<int64_t>(value);
}

// exponent >= 0; by squaring, so a huge exponent of 0, 1 or -1 takes 63 steps, not 10**18.
inline std::optional<int64_t> power(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (true) {
    if (exponent & 1) {
      auto product = multiply(result, base);
      if (!product) return std::nullopt;
      result = *product;
    }
    exponent >>= 1;
    if (exponent == 0) return result;
    auto square = multiply(base, base);
    if (!square) return std::nullopt;
    base = *square;
  }
}

}  // namespace surogate::chat_template::integer_math
