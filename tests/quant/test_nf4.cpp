// NF4 against bitsandbytes 0.50.2 (tests/fixtures/nf4/bnb_nf4.safetensors, written on an H100 by
// scripts/make_nf4_fixtures.py): for bf16 weights with block sizes 64 / 128 / 256 / 512 and a
// count that leaves a short last block, quantize_4bit's packed codes and absmax byte for byte;
// with compress_statistics the offset, the 8-bit absmax codes and the second-level absmax byte for
// byte; and dequantize_4bit of the double-quantized state equal to ours rounded to bf16. Also the
// dynamic map equals bitsandbytes' create_dynamic_map(signed=True) bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/bfloat16.h"
#include "fixture_tensor.h"
#include "io/safetensors.h"
#include "quant/dynamic_map.h"
#include "quant/nf4.h"

namespace surogate {
namespace {

const io::SafetensorsFile& fixture() {
  static const io::SafetensorsFile file =
      io::SafetensorsFile::open(std::string(SUROGATE_FIXTURES_DIR) + "/nf4/bnb_nf4.safetensors");
  return file;
}

template <typename T>
std::vector<T> read(const std::string& name) {
  return testing::fixture_tensor<T>(fixture(), name);
}

std::vector<float> read_bf16(const std::string& name) {
  std::vector<uint16_t> bits = read<uint16_t>(name);
  std::vector<float> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) values[i] = bf16_to_float(bits[i]);
  return values;
}

struct Case {
  const char* name;
  int64_t block;
};

class Nf4MatchesBitsandbytes : public ::testing::TestWithParam<Case> {};

TEST_P(Nf4MatchesBitsandbytes, QuantizeDoubleQuantizeDequantize) {
  const std::string name = GetParam().name;
  const std::vector<float> values = read_bf16(name + ".input");
  const quant::Nf4Shape shape{static_cast<int64_t>(values.size()), GetParam().block, true};
  std::vector<uint8_t> packed(static_cast<size_t>(shape.packed_bytes()));
  std::vector<float> absmax(static_cast<size_t>(shape.blocks()));
  quant::quantize_nf4_blocks(values.data(), shape, 0, shape.blocks(), packed.data(), absmax.data());
  EXPECT_EQ(packed, read<uint8_t>(name + ".packed"));
  EXPECT_EQ(packed, read<uint8_t>(name + ".dq.packed"));
  EXPECT_EQ(absmax, read<float>(name + ".absmax"));

  const quant::QuantizedAbsmax nested = quant::quantize_absmax(absmax);
  EXPECT_EQ(nested.offset, read<float>(name + ".dq.offset").at(0));
  EXPECT_EQ(nested.codes, read<uint8_t>(name + ".dq.absmax"));
  EXPECT_EQ(nested.absmax2, read<float>(name + ".dq.absmax2"));

  quant::Nf4View view{shape, packed.data()};
  view.absmax_codes = nested.codes.data();
  view.absmax2 = nested.absmax2.data();
  view.offset = nested.offset;
  std::vector<float> dequantized(values.size());
  quant::dequantize_nf4_blocks(view, 0, shape.blocks(), dequantized.data());
  const std::vector<uint16_t> expected = read<uint16_t>(name + ".dequantized");
  for (size_t i = 0; i < values.size(); ++i) {
    // A block of zeros dequantizes to -0.0 here (level -1 times 0) and in bitsandbytes alike.
    ASSERT_EQ(float_to_bf16(dequantized[i]), expected[i]) << name << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Bitsandbytes, Nf4MatchesBitsandbytes,
                         ::testing::Values(Case{"b64", 64}, Case{"b128", 128}, Case{"b256", 256}, Case{"b512", 512},
                                           Case{"b64_tail", 64}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(DynamicMap, IsBitsandbytesSignedMap) {
  const std::vector<float> expected = read<float>("dynamic_code");
  ASSERT_EQ(expected.size(), 256u);
  for (size_t i = 0; i < 256; ++i) EXPECT_EQ(quant::kDynamicMap[i], expected[i]) << i;
}

TEST(Nf4, EveryLevelQuantizesToItsOwnCode) {
  for (uint8_t code = 0; code < 16; ++code) EXPECT_EQ(quant::nf4_code(quant::kNf4Levels[code]), code);
  // Values past the extremes saturate; a NaN (0 · 1/0 in a block of zeros) falls to code 0.
  EXPECT_EQ(quant::nf4_code(1.5f), 15);
  EXPECT_EQ(quant::nf4_code(-1.5f), 0);
  EXPECT_EQ(quant::nf4_code(std::numeric_limits<float>::quiet_NaN()), 0);
}

// bitsandbytes' dQuantizeNF4 as it is written (csrc/kernels.cu): a search tree over double literals.
uint8_t bitsandbytes_tree(float x) {
  if (x > 0.03979014977812767) {
    if (x > 0.3893125355243683) {
      if (x > 0.6427869200706482) return x > 0.8614784181118011 ? 0b1111 : 0b1110;
      return x > 0.5016634166240692 ? 0b1101 : 0b1100;
    }
    if (x > 0.2035212516784668) return x > 0.2920137718319893 ? 0b1011 : 0b1010;
    return x > 0.1202552504837513 ? 0b1001 : 0b1000;
  }
  if (x > -0.33967943489551544) {
    if (x > -0.13791173323988914) return x > -0.045525018125772476 ? 0b0111 : 0b0110;
    return x > -0.23460740596055984 ? 0b0101 : 0b0100;
  }
  if (x > -0.6106329262256622) return x > -0.4599952697753906 ? 0b0011 : 0b0010;
  return x > -0.8480964004993439 ? 0b0001 : 0b0000;
}

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

TEST(Nf4, CodeIsBitsandbytesSearchTree) {
  // nf4_code counts the midpoints x exceeds (as floats); around each midpoint every float within
  // 4096 ulps, and a sweep over all bit patterns (NaNs, infinities and subnormals among them).
  const double midpoints[] = {-0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
                              -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
                              0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
                              0.5016634166240692, 0.6427869200706482, 0.8614784181118011};
  for (double midpoint : midpoints) {
    float x = static_cast<float>(midpoint);
    for (int step = 0; step < 4096; ++step) x = std::nextafter(x, -2.0f);
    for (int step = 0; step < 8192; ++step, x = std::nextafter(x, 2.0f)) {
      ASSERT_EQ(quant::nf4_code(x), bitsandbytes_tree(x)) << x;
    }
  }
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4099) {
    const float x = from_bits(static_cast<uint32_t>(bits));
    ASSERT_EQ(quant::nf4_code(x), bitsandbytes_tree(x)) << bits;
  }
}

// quantize_nf4_blocks one value at a time, as bitsandbytes' kernel goes (the file comment of nf4.h).
void quantize_one_at_a_time(const std::vector<float>& values, const quant::Nf4Shape& shape, std::vector<uint8_t>& packed,
                            std::vector<float>& absmax) {
  for (int64_t block = 0; block < shape.blocks(); ++block) {
    const int64_t begin = block * shape.block_size, end = std::min(shape.numel, begin + shape.block_size);
    float largest = 0.0f;
    for (int64_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(values[i]));
    absmax[block] = largest;
    for (int64_t i = begin; i < end; i += 2) {
      const uint8_t high = bitsandbytes_tree(values[i] * (1.0f / largest));
      const uint8_t low = bitsandbytes_tree((i + 1 < end ? values[i + 1] : 0.0f) * (1.0f / largest));
      packed[i / 2] = static_cast<uint8_t>(high << 4 | low);
    }
  }
}

TEST(Nf4, BlocksLongerThanAChunkAndOddCountsPackAsOneValueAtATime) {
  // Blocks of 1024 and 2048 are coded in chunks of 256; an odd count pads its last byte; a block of
  // zeros (NaN scaled values) codes 0.
  for (const int64_t block : {64, 512, 1024, 2048}) {
    for (const int64_t numel : {int64_t{1}, int64_t{255}, int64_t{2049}, int64_t{9001}}) {
      std::vector<float> values(static_cast<size_t>(numel));
      for (int64_t i = 0; i < numel; ++i) values[i] = std::sin(0.37f * static_cast<float>(i)) * (i % 7 == 3 ? 3.0f : 1.0f);
      if (numel > 2048) std::fill(values.begin(), values.begin() + 2048, 0.0f);
      const quant::Nf4Shape shape{numel, block, false};
      std::vector<uint8_t> packed(static_cast<size_t>(shape.packed_bytes())), expected_packed(packed.size());
      std::vector<float> absmax(static_cast<size_t>(shape.blocks())), expected_absmax(absmax.size());
      quant::quantize_nf4_blocks(values.data(), shape, 0, shape.blocks(), packed.data(), absmax.data());
      quantize_one_at_a_time(values, shape, expected_packed, expected_absmax);
      EXPECT_EQ(packed, expected_packed) << "block " << block << ", " << numel << " values";
      EXPECT_EQ(absmax, expected_absmax) << "block " << block << ", " << numel << " values";
    }
  }
}

TEST(Nf4, AbsmaxInBlockRangesIsTheWholeDoubleQuantization) {
  std::vector<float> absmax(1000);
  for (size_t i = 0; i < absmax.size(); ++i) absmax[i] = 0.01f + 0.001f * static_cast<float>((i * 37) % 101);
  const quant::QuantizedAbsmax whole = quant::quantize_absmax(absmax);
  const float offset = quant::absmax_offset(absmax);
  EXPECT_EQ(offset, whole.offset);
  std::vector<uint8_t> codes(absmax.size());
  std::vector<float> absmax2(whole.absmax2.size());
  for (int64_t block = static_cast<int64_t>(absmax2.size()) - 1; block >= 0; --block) {
    quant::quantize_absmax_blocks(absmax, offset, block, block + 1, codes.data(), absmax2.data());
  }
  EXPECT_EQ(codes, whole.codes);
  EXPECT_EQ(absmax2, whole.absmax2);
}

}  // namespace
}  // namespace surogate
