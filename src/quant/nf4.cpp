// NF4 blockwise quantization; see nf4.h.
#include "quant/nf4.h"

#include <algorithm>
#include <cmath>

#include "quant/dynamic_map.h"

namespace surogate::quant {

const std::array<float, 16> kNf4Levels = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f};

uint8_t nf4_code(float x) {
  // bitsandbytes' dQuantizeNF4: the thresholds are the midpoints between neighbouring levels, and
  // every comparison is "greater than", so a NaN falls through to code 0.
  if (x > 0.03979014977812767f) {
    if (x > 0.3893125355243683f) {
      if (x > 0.6427869200706482f) return x > 0.8614784181118011f ? 0b1111 : 0b1110;
      return x > 0.5016634166240692f ? 0b1101 : 0b1100;
    }
    if (x > 0.2035212516784668f) return x > 0.2920137718319893f ? 0b1011 : 0b1010;
    return x > 0.1202552504837513f ? 0b1001 : 0b1000;
  }
  if (x > -0.33967943489551544f) {
    if (x > -0.13791173323988914f) return x > -0.045525018125772476f ? 0b0111 : 0b0110;
    return x > -0.23460740596055984f ? 0b0101 : 0b0100;
  }
  if (x > -0.6106329262256622f) return x > -0.4599952697753906f ? 0b0011 : 0b0010;
  return x > -0.8480964004993439f ? 0b0001 : 0b0000;
}

void quantize_nf4_blocks(const float* values, const Nf4Shape& shape, int64_t first_block, int64_t end_block,
                         uint8_t* packed, float* absmax) {
  const int64_t block_size = shape.block_size;
  for (int64_t block = first_block; block < end_block; ++block) {
    const int64_t begin = block * block_size;
    const int64_t end = std::min(shape.numel, begin + block_size);
    float largest = 0.0f;
    for (int64_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(values[i]));
    absmax[block] = largest;
    const float inverse = 1.0f / largest;  // +inf for a block of zeros, as on the GPU
    for (int64_t i = begin; i < end; i += 2) {
      const uint8_t high = nf4_code(values[i] * inverse);
      const uint8_t low = nf4_code((i + 1 < end ? values[i + 1] : 0.0f) * inverse);
      packed[i / 2] = static_cast<uint8_t>(high << 4 | low);
    }
  }
}

QuantizedAbsmax quantize_absmax(std::span<const float> absmax) {
  QuantizedAbsmax result;
  const auto count = static_cast<int64_t>(absmax.size());
  double sum = 0.0;
  for (float value : absmax) sum += value;
  result.offset = static_cast<float>(sum) * (1.0f / static_cast<float>(count));
  result.codes.resize(absmax.size());
  result.absmax2.resize(static_cast<size_t>((count + kAbsmaxBlock - 1) / kAbsmaxBlock));
  for (int64_t block = 0; block * kAbsmaxBlock < count; ++block) {
    const int64_t begin = block * kAbsmaxBlock, end = std::min(count, begin + kAbsmaxBlock);
    float largest = 0.0f;
    for (int64_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(absmax[i] - result.offset));
    result.absmax2[block] = largest;
    const float inverse = 1.0f / largest;
    for (int64_t i = begin; i < end; ++i) result.codes[i] = dynamic_map_code((absmax[i] - result.offset) * inverse);
  }
  return result;
}

float Nf4View::dynamic_map_value(uint8_t code) { return kDynamicMap[code]; }

void dequantize_nf4_blocks(const Nf4View& view, int64_t first_block, int64_t end_block, float* out) {
  const int64_t block_size = view.shape.block_size;
  for (int64_t block = first_block; block < end_block; ++block) {
    const float scale = view.block_absmax(block);
    const int64_t begin = block * block_size;
    const int64_t end = std::min(view.shape.numel, begin + block_size);
    for (int64_t i = begin; i < end; ++i) {
      const uint8_t byte = view.packed[i / 2];
      out[i] = kNf4Levels[(i % 2 == 0) ? byte >> 4 : byte & 0x0F] * scale;
    }
  }
}

}  // namespace surogate::quant
