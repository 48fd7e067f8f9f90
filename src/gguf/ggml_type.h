// The tensor encodings of GGUF files that `surogate export` writes (a subset of ggml's types), with
// their ids as the GGUF format numbers them, their block sizes and their names as llama.cpp prints
// them. A quantized type stores a row of n values as n / block_elements blocks of block_bytes.
#pragma once

#include <cstdint>
#include <string_view>

namespace surogate::gguf {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

// The super-block of the k-quants (QK_K in ggml).
inline constexpr int64_t kSuperBlock = 256;

int64_t block_elements(GgmlType type);  // 1 for the float types
int64_t block_bytes(GgmlType type);
std::string_view type_name(GgmlType type);  // "F32", "Q4_K", ...
bool is_quantized(GgmlType type);
// Bytes of a row of `elements` values (elements must be a multiple of block_elements).
int64_t row_bytes(GgmlType type, int64_t elements);

}  // namespace surogate::gguf
