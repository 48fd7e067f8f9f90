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

namespace {

// The midpoints between neighbouring levels, ascending, as bitsandbytes' dQuantizeNF4 writes them
// (double literals that a float is promoted to before the comparison).
constexpr std::array<double, 15> kNf4Midpoints = {
    -0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544, -0.23460740596055984,
    -0.13791173323988914, -0.045525018125772476, 0.03979014977812767, 0.1202552504837513, 0.2035212516784668,
    0.2920137718319893, 0.3893125355243683, 0.5016634166240692, 0.6427869200706482, 0.8614784181118011};

// The same thresholds as floats: for a float x, x > t (in double) ⇔ x > the largest float ≤ t.
const std::array<float, 15> kNf4Thresholds = [] {
  std::array<float, 15> floats{};
  for (size_t k = 0; k < floats.size(); ++k) {
    float below = static_cast<float>(kNf4Midpoints[k]);
    if (static_cast<double>(below) > kNf4Midpoints[k]) below = std::nextafter(below, -INFINITY);
    floats[k] = below;
  }
  return floats;
}();

// max |x| over `count` values as one chain of std::max(largest, |x|) from 0 finds it: NaNs never
// win a comparison, so the result is the largest of the others whatever the order, and eight
// chains side by side (which vectorize) give the same bits.
float largest_magnitude(const float* x, int64_t count) {
  constexpr int64_t kLanes = 8;
  std::array<float, kLanes> lanes{};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int64_t lane = 0; lane < kLanes; ++lane) lanes[lane] = std::max(lanes[lane], std::fabs(x[i + lane]));
  }
  float largest = 0.0f;
  for (; i < count; ++i) largest = std::max(largest, std::fabs(x[i]));
  for (float lane : lanes) largest = std::max(largest, lane);
  return largest;
}

}  // namespace

uint8_t nf4_code(float x) {
  // bitsandbytes' dQuantizeNF4 walks a search tree over the 15 midpoints with "greater than" at
  // each node; the code it reaches is the number of midpoints x exceeds (0 for a NaN, which exceeds
  // none, as the tree sends it to code 0). Counting needs no branches, so the block loop vectorizes.
  int32_t code = 0;  // 32 bits wide like x, so the comparisons' masks add up lane for lane
  for (float threshold : kNf4Thresholds) code += x > threshold ? 1 : 0;
  return static_cast<uint8_t>(code);
}

void quantize_nf4_blocks(const float* values, const Nf4Shape& shape, int64_t first_block, int64_t end_block,
                         uint8_t* packed, float* absmax) {
  const int64_t block_size = shape.block_size;
  for (int64_t block = first_block; block < end_block; ++block) {
    const int64_t begin = block * block_size;
    const int64_t end = std::min(shape.numel, begin + block_size);
    const float largest = largest_magnitude(values + begin, end - begin);
    absmax[block] = largest;
    const float inverse = 1.0f / largest;  // +inf for a block of zeros, as on the GPU
    // The codes first, in chunks of an even count (a loop without branches, vectorized), then two
    // per byte; an odd count pads the last low nibble with the code of 0.
    constexpr int64_t kChunk = 256;
    std::array<uint8_t, kChunk + 1> codes;
    for (int64_t chunk = begin; chunk < end; chunk += kChunk) {
      const int64_t count = std::min(kChunk, end - chunk);
      const float* x = values + chunk;
      for (int64_t i = 0; i < count; ++i) codes[static_cast<size_t>(i)] = nf4_code(x[i] * inverse);
      codes[static_cast<size_t>(count)] = nf4_code(0.0f * inverse);
      for (int64_t i = 0; i < count; i += 2) {
        packed[(chunk + i) / 2] =
            static_cast<uint8_t>(codes[static_cast<size_t>(i)] << 4 | codes[static_cast<size_t>(i) + 1]);
      }
    }
  }
}

float absmax_offset(std::span<const float> absmax) {
  double sum = 0.0;
  for (float value : absmax) sum += value;
  return static_cast<float>(sum) * (1.0f / static_cast<float>(absmax.size()));
}

void quantize_absmax_blocks(std::span<const float> absmax, float offset, int64_t first_block, int64_t end_block,
                            uint8_t* codes, float* absmax2) {
  const auto count = static_cast<int64_t>(absmax.size());
  for (int64_t block = first_block; block < end_block; ++block) {
    const int64_t begin = block * kAbsmaxBlock, end = std::min(count, begin + kAbsmaxBlock);
    float largest = 0.0f;
    for (int64_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(absmax[i] - offset));
    absmax2[block] = largest;
    const float inverse = 1.0f / largest;
    for (int64_t i = begin; i < end; ++i) codes[i] = dynamic_map_code((absmax[i] - offset) * inverse);
  }
}

QuantizedAbsmax quantize_absmax(std::span<const float> absmax) {
  QuantizedAbsmax result;
  const auto count = static_cast<int64_t>(absmax.size());
  const int64_t blocks = (count + kAbsmaxBlock - 1) / kAbsmaxBlock;
  result.offset = absmax_offset(absmax);
  result.codes.resize(absmax.size());
  result.absmax2.resize(static_cast<size_t>(blocks));
  quantize_absmax_blocks(absmax, result.offset, 0, blocks, result.codes.data(), result.absmax2.data());
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
