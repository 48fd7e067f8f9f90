// NF4 (QLoRA's 4-bit NormalFloat) blockwise quantization, byte for byte as bitsandbytes'
// quantize_4bit(quant_type="nf4") on CUDA (tests/quant/test_nf4.cpp checks against what
// bitsandbytes wrote, tests/fixtures/nf4/):
//   - values in blocks of `block_size` (an even count); per block absmax = max |x|;
//   - each value's code is NF4's level nearest to x · (1 / absmax), by bitsandbytes' decision
//     tree on the fp32 reciprocal-times-value (so ties fall as they fall there); two codes per
//     byte, the earlier value in the high nibble; an odd count pads the last low nibble with the
//     code of 0;
//   - a block of zeros has absmax 0 and every code 0 (0 · (1/0) is NaN, which the tree sends to
//     code 0; bitsandbytes' CPU path writes code 7 there instead: both dequantize to 0).
// Double quantization (bitsandbytes' compress_statistics=True): offset = the mean of the absmax
// values (their sum in fp32 times fp32 1/n; bitsandbytes sums in torch's reduction order, so on
// large tensors the offset can differ in its last bit), and absmax − offset is quantized with the
// 8-bit dynamic map (quant/dynamic_map.h) in blocks of 256: one code per absmax, one fp32 absmax2
// per 256 of them.
// Dequantization: value = level[code] · absmax in fp32, then rounded to the weight's dtype; with
// double quantization the block's absmax is first kDynamicMap[code] · absmax2 + offset (fp32).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace surogate::quant {

// NF4's 16 levels, code order (bitsandbytes' nf4_dequantization_lut).
extern const std::array<float, 16> kNf4Levels;

// The code of x · (1 / absmax) (bitsandbytes' dQuantizeNF4).
uint8_t nf4_code(float scaled);

inline constexpr int64_t kAbsmaxBlock = 256;  // double quantization's block over the absmax values

struct Nf4Shape {
  int64_t numel = 0;
  int64_t block_size = 64;
  bool double_quant = false;
  int64_t packed_bytes() const { return (numel + 1) / 2; }
  int64_t blocks() const { return (numel + block_size - 1) / block_size; }
  int64_t absmax2_count() const { return (blocks() + kAbsmaxBlock - 1) / kAbsmaxBlock; }
};

// Quantizes the blocks [first_block, end_block) of `values` (numel values): their bytes of
// `packed` and their entries of `absmax`. Ranges of blocks are independent (callers split the work
// over threads).
void quantize_nf4_blocks(const float* values, const Nf4Shape& shape, int64_t first_block, int64_t end_block,
                         uint8_t* packed, float* absmax);

// Double quantization of `absmax` (see the file comment).
struct QuantizedAbsmax {
  std::vector<uint8_t> codes;   // one per absmax value
  std::vector<float> absmax2;   // one per 256 codes
  float offset = 0.0f;
};
QuantizedAbsmax quantize_absmax(std::span<const float> absmax);
// Its two parts, for callers that split the work over threads: the offset (one serial sum, so the
// result does not depend on the split), then the 256-blocks [first_block, end_block) of codes and
// absmax2, independent of each other.
float absmax_offset(std::span<const float> absmax);
void quantize_absmax_blocks(std::span<const float> absmax, float offset, int64_t first_block, int64_t end_block,
                            uint8_t* codes, float* absmax2);

// A quantized weight as the dequantizer reads it: `absmax` (plain), or `absmax_codes`, `absmax2`
// and `offset` (double quantization).
struct Nf4View {
  Nf4Shape shape;
  const uint8_t* packed = nullptr;
  const float* absmax = nullptr;
  const uint8_t* absmax_codes = nullptr;
  const float* absmax2 = nullptr;
  float offset = 0.0f;
  // The absmax of `block`.
  float block_absmax(int64_t block) const {
    if (!shape.double_quant) return absmax[block];
    return dynamic_map_value(absmax_codes[block]) * absmax2[block / kAbsmaxBlock] + offset;
  }
  static float dynamic_map_value(uint8_t code);
};

// The fp32 values of the blocks [first_block, end_block) into `out` (numel floats in all).
void dequantize_nf4_blocks(const Nf4View& view, int64_t first_block, int64_t end_block, float* out);

}  // namespace surogate::quant
