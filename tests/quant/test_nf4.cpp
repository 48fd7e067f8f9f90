// NF4 against bitsandbytes 0.50.2 (tests/fixtures/nf4/bnb_nf4.safetensors, written on an H100 by
// scripts/make_nf4_fixtures.py): for bf16 weights with block sizes 64 / 128 / 256 / 512 and a
// count that leaves a short last block, quantize_4bit's packed codes and absmax byte for byte;
// with compress_statistics the offset, the 8-bit absmax codes and the second-level absmax byte for
// byte; and dequantize_4bit of the double-quantized state equal to ours rounded to bf16. Also the
// dynamic map equals bitsandbytes' create_dynamic_map(signed=True) bit for bit.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace surogate
