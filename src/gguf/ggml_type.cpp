#include "gguf/ggml_type.h"

#include "core/error.h"

namespace surogate::gguf {

int64_t block_elements(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return 1;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0: return 32;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return kSuperBlock;
  }
  SUROGATE_CHECK(false, "unknown ggml type {}", static_cast<uint32_t>(type));
  return 0;
}

int64_t block_bytes(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return 4;
    case GgmlType::F16:
    case GgmlType::BF16: return 2;
    case GgmlType::Q5_0: return 2 + 4 + 16;           // d, high bits, 32 low nibbles
    case GgmlType::Q5_1: return 2 + 2 + 4 + 16;       // d, m, high bits, low nibbles
    case GgmlType::Q8_0: return 2 + 32;               // d, 32 int8
    case GgmlType::Q4_K: return 2 + 2 + 12 + 128;     // d, dmin, 6-bit scales/mins, nibbles
    case GgmlType::Q5_K: return 2 + 2 + 12 + 32 + 128;  // Q4_K plus one high bit per value
    case GgmlType::Q6_K: return 128 + 64 + 16 + 2;    // low nibbles, high 2 bits, int8 scales, d
  }
  SUROGATE_CHECK(false, "unknown ggml type {}", static_cast<uint32_t>(type));
  return 0;
}

std::string_view type_name(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::BF16: return "BF16";
    case GgmlType::Q5_0: return "Q5_0";
    case GgmlType::Q5_1: return "Q5_1";
    case GgmlType::Q8_0: return "Q8_0";
    case GgmlType::Q4_K: return "Q4_K";
    case GgmlType::Q5_K: return "Q5_K";
    case GgmlType::Q6_K: return "Q6_K";
  }
  return "?";
}

bool is_quantized(GgmlType type) { return block_elements(type) > 1; }

int64_t row_bytes(GgmlType type, int64_t elements) {
  SUROGATE_CHECK(elements % block_elements(type) == 0, "{} values are not whole {} blocks", elements,
                 type_name(type));
  return elements / block_elements(type) * block_bytes(type);
}

}  // namespace surogate::gguf
