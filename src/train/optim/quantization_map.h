// Block-wise 8-bit quantisation with a dynamic (exponent + fraction) code book, the scheme
// 8-bit Adam uses for its moments: each block of values is scaled by its absolute maximum,
// and each scaled value in [-1, 1] is stored as the index of the nearest of 256 code values.
// The code values are dense near zero (many decades of exponent) so small moments keep
// relative precision, unlike linear int8.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace surogate::train {

constexpr int64_t kQuantizationBlockSize = 2048;

// 256 sorted code values. Signed maps span [-1, 1] (first moments); unsigned maps span [0, 1]
// (second moments, which are never negative) and so spend every code on magnitudes.
const std::array<float, 256>& dynamic_quantization_map(bool is_signed);

// values.size() elements, blocks of kQuantizationBlockSize; absmax has one entry per block.
void quantize_blockwise(std::span<const float> values, const std::array<float, 256>& code,
                        std::span<uint8_t> codes_out, std::span<float> absmax_out);
void dequantize_blockwise(std::span<const uint8_t> codes, std::span<const float> absmax,
                          const std::array<float, 256>& code, std::span<float> values_out);

// Index of the code value nearest to x (x already scaled into the map's range).
uint8_t nearest_code(const std::array<float, 256>& code, float x);

inline int64_t quantization_blocks(int64_t size) {
  return (size + kQuantizationBlockSize - 1) / kQuantizationBlockSize;
}

}  // namespace surogate::train
