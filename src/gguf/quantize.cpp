#include "gguf/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/bfloat16.h"
#include "core/error.h"
#include "gguf/quantize_k.h"

namespace surogate::gguf {
namespace {

void store_u16(uint8_t* at, uint16_t value) { std::memcpy(at, &value, sizeof(value)); }
uint16_t load_u16(const uint8_t* at) {
  uint16_t value;
  std::memcpy(&value, at, sizeof(value));
  return value;
}

// Q8_0: d = amax / 127 in fp16, 32 int8 codes round(x / d) (half away from zero, as roundf).
void quantize_q8_0_block(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(block, float_to_f16(d));
  for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * inverse)));
}

// Q5_0: the value of largest magnitude maps to -16; codes are trunc(x / d + 16.5) capped at 31, the
// low nibbles of value j and j + 16 share a byte, the fifth bits go to a 32-bit mask.
void quantize_q5_0_block(const float* x, uint8_t* block) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -16.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(block, float_to_f16(d));
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    const int first = std::min(31, static_cast<int>(x[j] * inverse + 16.5f));
    const int second = std::min(31, static_cast<int>(x[j + 16] * inverse + 16.5f));
    block[6 + j] = static_cast<uint8_t>((first & 0x0F) | ((second & 0x0F) << 4));
    high |= static_cast<uint32_t>((first & 0x10) >> 4) << j;
    high |= static_cast<uint32_t>((second & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(block + 2, &high, sizeof(high));
}

// Q5_1: d = (max - min) / 31 and m = min in fp16, codes trunc((x - min) / d + 0.5).
void quantize_q5_1_block(const float* x, uint8_t* block) {
  float min = x[0], max = x[0];
  for (int j = 1; j < 32; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / 31.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(block, float_to_f16(d));
  store_u16(block + 2, float_to_f16(min));
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    const int first = static_cast<uint8_t>((x[j] - min) * inverse + 0.5f);
    const int second = static_cast<uint8_t>((x[j + 16] - min) * inverse + 0.5f);
    block[8 + j] = static_cast<uint8_t>((first & 0x0F) | ((second & 0x0F) << 4));
    high |= static_cast<uint32_t>((first & 0x10) >> 4) << j;
    high |= static_cast<uint32_t>((second & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(block + 4, &high, sizeof(high));
}

void dequantize_q8_0_block(const uint8_t* block, float* y) {
  const float d = f16_to_float(load_u16(block));
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
}

void dequantize_q5_block(const uint8_t* block, float* y, bool with_min) {
  const float d = f16_to_float(load_u16(block));
  const float m = with_min ? f16_to_float(load_u16(block + 2)) : 0.0f;
  const uint8_t* rest = block + (with_min ? 4 : 2);
  uint32_t high;
  std::memcpy(&high, rest, sizeof(high));
  const uint8_t* nibbles = rest + 4;
  for (int j = 0; j < 16; ++j) {
    const int first = (nibbles[j] & 0x0F) | static_cast<int>(((high >> j) & 1u) << 4);
    const int second = (nibbles[j] >> 4) | static_cast<int>(((high >> (j + 16)) & 1u) << 4);
    y[j] = with_min ? static_cast<float>(first) * d + m : static_cast<float>(first - 16) * d;
    y[j + 16] = with_min ? static_cast<float>(second) * d + m : static_cast<float>(second - 16) * d;
  }
}

using BlockQuantizer = void (*)(const float*, uint8_t*);
using BlockDequantizer = void (*)(const uint8_t*, float*);

BlockQuantizer block_quantizer(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return quantize_q8_0_block;
    case GgmlType::Q5_0: return quantize_q5_0_block;
    case GgmlType::Q5_1: return quantize_q5_1_block;
    case GgmlType::Q4_K: return detail::quantize_q4_k_block;
    case GgmlType::Q5_K: return detail::quantize_q5_k_block;
    case GgmlType::Q6_K: return detail::quantize_q6_k_block;
    default: return nullptr;
  }
}

BlockDequantizer block_dequantizer(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return dequantize_q8_0_block;
    case GgmlType::Q5_0: return [](const uint8_t* block, float* y) { dequantize_q5_block(block, y, false); };
    case GgmlType::Q5_1: return [](const uint8_t* block, float* y) { dequantize_q5_block(block, y, true); };
    case GgmlType::Q4_K: return detail::dequantize_q4_k_block;
    case GgmlType::Q5_K: return detail::dequantize_q5_k_block;
    case GgmlType::Q6_K: return detail::dequantize_q6_k_block;
    default: return nullptr;
  }
}

}  // namespace

void quantize(GgmlType type, std::span<const float> values, std::vector<std::byte>& out) {
  const int64_t count = static_cast<int64_t>(values.size());
  const size_t start = out.size();
  out.resize(start + static_cast<size_t>(row_bytes(type, count)));
  auto* destination = reinterpret_cast<uint8_t*>(out.data() + start);
  switch (type) {
    case GgmlType::F32: std::memcpy(destination, values.data(), values.size() * sizeof(float)); return;
    case GgmlType::F16:
      for (size_t i = 0; i < values.size(); ++i) store_u16(destination + 2 * i, float_to_f16(values[i]));
      return;
    case GgmlType::BF16:
      for (size_t i = 0; i < values.size(); ++i) store_u16(destination + 2 * i, float_to_bf16(values[i]));
      return;
    default: break;
  }
  const BlockQuantizer quantizer = block_quantizer(type);
  const int64_t elements = block_elements(type), bytes = block_bytes(type);
  for (int64_t block = 0; block < count / elements; ++block) {
    quantizer(values.data() + block * elements, destination + block * bytes);
  }
}

std::vector<std::byte> quantize(GgmlType type, std::span<const float> values) {
  std::vector<std::byte> out;
  quantize(type, values, out);
  return out;
}

std::vector<float> dequantize(GgmlType type, std::span<const std::byte> data, int64_t elements) {
  SUROGATE_CHECK(static_cast<int64_t>(data.size()) == row_bytes(type, elements), "{} bytes for {} {} values",
                 data.size(), elements, type_name(type));
  std::vector<float> values(static_cast<size_t>(elements));
  const auto* source = reinterpret_cast<const uint8_t*>(data.data());
  switch (type) {
    case GgmlType::F32: std::memcpy(values.data(), source, data.size()); return values;
    case GgmlType::F16:
      for (int64_t i = 0; i < elements; ++i) values[i] = f16_to_float(load_u16(source + 2 * i));
      return values;
    case GgmlType::BF16:
      for (int64_t i = 0; i < elements; ++i) values[i] = bf16_to_float(load_u16(source + 2 * i));
      return values;
    default: break;
  }
  const BlockDequantizer dequantizer = block_dequantizer(type);
  const int64_t block_size = block_elements(type), bytes = block_bytes(type);
  for (int64_t block = 0; block < elements / block_size; ++block) {
    dequantizer(source + block * bytes, values.data() + block * block_size);
  }
  return values;
}

}  // namespace surogate::gguf
