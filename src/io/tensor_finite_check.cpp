// See tensor_finite_check.h.
#include "io/tensor_finite_check.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace surogate::io {
namespace {

// The exponent field of each format: all ones is an infinity (zero mantissa) or a NaN.
template <typename Bits>
struct FloatLayout {
  Bits exponent;
  Bits mantissa;
  Bits sign;
};

// Scans in blocks whose inner loop has no early exit, so it vectorizes; only a block that holds
// a non-finite value is searched element by element.
template <typename Bits>
std::optional<NonFiniteValue> scan(const std::byte* data, int64_t count, FloatLayout<Bits> layout) {
  constexpr int64_t kBlock = 4096;
  Bits block_values[kBlock];
  for (int64_t first = 0; first < count; first += kBlock) {
    const int64_t size = std::min(kBlock, count - first);
    std::memcpy(block_values, data + first * static_cast<int64_t>(sizeof(Bits)), static_cast<size_t>(size) * sizeof(Bits));
    bool any = false;
    for (int64_t i = 0; i < size; ++i) any |= (block_values[i] & layout.exponent) == layout.exponent;
    if (!any) continue;
    for (int64_t i = 0; i < size; ++i) {
      const Bits bits = block_values[i];
      if ((bits & layout.exponent) != layout.exponent) continue;
      const char* value = (bits & layout.mantissa) != 0 ? "nan" : (bits & layout.sign) != 0 ? "-inf" : "inf";
      return NonFiniteValue{first + i, value};
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<NonFiniteValue> find_non_finite(const SafetensorsTensor& tensor) {
  const int64_t count = tensor.element_count();
  const std::byte* data = tensor.bytes.data();
  switch (tensor.dtype) {
    case DType::F64:
      return scan<uint64_t>(data, count, {0x7FF0000000000000ull, 0x000FFFFFFFFFFFFFull, 0x8000000000000000ull});
    case DType::F32:
      return scan<uint32_t>(data, count, {0x7F800000u, 0x007FFFFFu, 0x80000000u});
    case DType::F16:
      return scan<uint16_t>(data, count, {0x7C00, 0x03FF, 0x8000});
    case DType::BF16:
      return scan<uint16_t>(data, count, {0x7F80, 0x007F, 0x8000});
    default:
      return std::nullopt;
  }
}

void require_finite(const SafetensorsTensor& tensor, std::string_view where, std::string_view remedy) {
  if (const std::optional<NonFiniteValue> bad = find_non_finite(tensor)) {
    fail_user("{}: tensor {} holds a non-finite value ({} at element {}); {}", where, tensor.name, bad->value,
              bad->element, remedy);
  }
}

}  // namespace surogate::io
