// NVFP4 quantization and dequantization; see nvfp4.h.
#include "quant/nvfp4.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

#include "quant/fp8.h"

namespace surogate::quant {
namespace {

constexpr Fp8Format kScaleFormat = Fp8Format::E4M3;

// One block quantized with the limit L (6 or 4): its E4M3 scale code, the value that code stands
// for, and the block's E2M1 codes (one per value).
struct Candidate {
  uint8_t scale = 0;
  float scale_value = 0.0f;
  std::array<uint8_t, kNvfp4Block> codes{};
};

Candidate quantize_block(const float* x, int64_t count, float encode, float scaled_bmax, float limit) {
  Candidate candidate;
  candidate.scale = fp8_encode(scaled_bmax / limit, kScaleFormat);
  candidate.scale_value = fp8_decoded(kScaleFormat)[candidate.scale];
  if (candidate.scale_value > 0.0f) {
    const float factor = encode / candidate.scale_value;
    for (int64_t i = 0; i < count; ++i) candidate.codes[static_cast<size_t>(i)] = e2m1_encode(x[i] * factor);
  }
  return candidate;
}

// Σ (value_i − x_i)², in column order, each operation rounded to fp32.
float squared_error(const Candidate& candidate, const float* x, int64_t count, float decode) {
  float error = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    const float value = kE2m1Values[candidate.codes[static_cast<size_t>(i)]] * candidate.scale_value * decode;
    const float difference = value - x[i];
    const float square = difference * difference;
    error = error + square;
  }
  return error;
}

}  // namespace

const std::array<float, 16> kE2m1Values = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                           -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

uint8_t e2m1_encode(float x) {
  // The grid's magnitudes are 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0–7); the code of a magnitude is
  // the number of rounding boundaries it reaches. A boundary halfway between two values goes to
  // the one with the even code: so 0.25, 1.25, 2.5 and 5 (ties to 0, 1, 2 and 4) must be passed,
  // 0.75, 1.75 and 3.5 (ties to 1, 2 and 4, even codes 2, 4, 6) only reached. Above 6 (infinity
  // too) saturates at 7; a NaN is +6. No branches, so the block loop vectorizes.
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t magnitude_bits = bits & 0x7FFFFFFFu;
  const float m = std::bit_cast<float>(magnitude_bits);
  const int code = (m > 0.25f) + (m >= 0.75f) + (m > 1.25f) + (m >= 1.75f) + (m > 2.5f) + (m >= 3.5f) + (m > 5.0f);
  const auto sign = static_cast<uint8_t>((bits >> 31) << 3);
  return magnitude_bits > 0x7F800000u ? uint8_t{0x7} : static_cast<uint8_t>(sign | code);
}

Nvfp4TensorScale nvfp4_tensor_scale(float amax, Nvfp4ScaleRule rule) {
  const float largest = 6.0f * (rule == Nvfp4ScaleRule::FourOverSix ? 256.0f : 448.0f);
  Nvfp4TensorScale scale;
  if (amax > 0.0f && std::isfinite(amax)) scale.encode = std::min(largest / amax, FLT_MAX);
  scale.decode = 1.0f / scale.encode;
  return scale;
}

void quantize_nvfp4_rows(const float* values, const Nvfp4Shape& shape, const Nvfp4TensorScale& scale,
                         Nvfp4ScaleRule rule, int64_t first_row, int64_t end_row, uint8_t* packed,
                         uint8_t* block_scales) {
  for (int64_t row = first_row; row < end_row; ++row) {
    const float* x_row = values + row * shape.cols;
    uint8_t* packed_row = packed + row * shape.packed_cols();
    std::fill(packed_row, packed_row + shape.packed_cols(), uint8_t{0});
    for (int64_t block = 0; block < shape.scale_cols(); ++block) {
      const int64_t begin = block * kNvfp4Block;
      const int64_t count = std::min(kNvfp4Block, shape.cols - begin);
      const float* x = x_row + begin;
      float bmax = 0.0f;
      for (int64_t i = 0; i < count; ++i) bmax = std::max(bmax, std::fabs(x[i]));
      const float scaled_bmax = bmax * scale.encode;
      Candidate chosen = quantize_block(x, count, scale.encode, scaled_bmax, 6.0f);
      if (rule == Nvfp4ScaleRule::FourOverSix) {
        Candidate four = quantize_block(x, count, scale.encode, scaled_bmax, 4.0f);
        if (squared_error(four, x, count, scale.decode) < squared_error(chosen, x, count, scale.decode)) {
          chosen = four;
        }
      }
      block_scales[row * shape.scale_cols() + block] = chosen.scale;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t column = begin + i;
        const uint8_t code = chosen.codes[static_cast<size_t>(i)];
        packed_row[column / 2] |= static_cast<uint8_t>(column % 2 == 0 ? code : code << 4);
      }
    }
  }
}

void dequantize_nvfp4_rows(const uint8_t* packed, const uint8_t* block_scales, float decode, const Nvfp4Shape& shape,
                           int64_t first_row, int64_t end_row, float* out) {
  const std::array<float, 256>& scales = fp8_decoded(kScaleFormat);
  for (int64_t row = first_row; row < end_row; ++row) {
    const uint8_t* packed_row = packed + row * shape.packed_cols();
    const uint8_t* scale_row = block_scales + row * shape.scale_cols();
    for (int64_t column = 0; column < shape.cols; ++column) {
      const uint8_t byte = packed_row[column / 2];
      const uint8_t code = column % 2 == 0 ? byte & 0x0F : byte >> 4;
      const float scale = scales[scale_row[column / kNvfp4Block]];
      out[row * shape.cols + column] = kE2m1Values[code] * scale * decode;
    }
  }
}

}  // namespace surogate::quant
