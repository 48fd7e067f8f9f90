// Encoding float32 values in the GGUF tensor types, bit for bit as ggml's reference quantizers
// (the `quantize_row_*_ref` functions llama-quantize uses when no importance matrix is given, and
// gguf-py's numpy ports of them that convert_hf_to_gguf.py uses): the same float32 arithmetic in
// the same order, the same round-to-nearest-even / round-half-away rules, the same fp16 scales. The
// files are compiled without floating-point contraction so no fused multiply-add changes a bit.
// Decoding is here too, for the tests' round trips and for reading a file back.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "gguf/ggml_type.h"

namespace surogate::gguf {

// `values` in `type`: values.size() must be a whole number of blocks. Appends to `out`.
void quantize(GgmlType type, std::span<const float> values, std::vector<std::byte>& out);
std::vector<std::byte> quantize(GgmlType type, std::span<const float> values);

// The float32 values `data` encodes (`elements` of them).
std::vector<float> dequantize(GgmlType type, std::span<const std::byte> data, int64_t elements);

}  // namespace surogate::gguf
