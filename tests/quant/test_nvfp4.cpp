// NVFP4 (quant/nvfp4.h) against the numpy oracle tests/python/nvfp4_reference.py, through the
// fixture it writes (tests/fixtures/nvfp4/, scripts/make_nvfp4_fixtures.py): E2M1 codes of values
// on, between and exactly halfway between the grid points, signed zeros, infinities and NaN; for
// NVIDIA's rule and Four Over Six, the packed codes, the E4M3 block scales and the tensor scale byte
// for byte and the dequantized values bit for bit, on a ragged last block and an odd column count.
// Also E2M1 against a nearest-by-search definition on a sweep of every 4099th float, and
// splitting the rows among callers changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fixture_tensor.h"
#include "io/safetensors.h"
#include "quant/nvfp4.h"

namespace surogate::quant {
namespace {

const io::SafetensorsFile& fixture() {
  static const io::SafetensorsFile file =
      io::SafetensorsFile::open(std::string(SUROGATE_FIXTURES_DIR) + "/nvfp4/nvfp4_reference.safetensors");
  return file;
}

template <typename T>
std::vector<T> read(const std::string& name) {
  return testing::fixture_tensor<T>(fixture(), name);
}

// The E2M1 code nearest to x, ties to the even code, by search (saturating; NaN → +6).
uint8_t e2m1_by_search(float x) {
  if (std::isnan(x)) return 0x7;
  // Anything above 7 is nearest to 6 (clamped so that huge values do not tie in double precision).
  const double magnitude = std::min(std::fabs(static_cast<double>(x)), 7.0);
  int best = 0;
  for (int code = 1; code < 8; ++code) {
    const double here = std::fabs(magnitude - kE2m1Values[code]);
    const double there = std::fabs(magnitude - kE2m1Values[best]);
    if (here < there || (here == there && code % 2 == 0)) best = code;
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? 0x8 : 0));
}

TEST(Nvfp4, E2m1MatchesTheOracle) {
  const std::vector<float> input = read<float>("e2m1.input");
  const std::vector<uint8_t> codes = read<uint8_t>("e2m1.codes");
  ASSERT_EQ(input.size(), codes.size());
  for (size_t i = 0; i < input.size(); ++i) {
    EXPECT_EQ(e2m1_encode(input[i]), codes[i]) << "input " << input[i] << " (element " << i << ")";
  }
}

TEST(Nvfp4, E2m1IsTheNearestValueTiesToEven) {
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4099) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    ASSERT_EQ(e2m1_encode(x), e2m1_by_search(x)) << "bits " << std::hex << bits;
  }
  for (int code = 0; code < 16; ++code) EXPECT_EQ(e2m1_encode(kE2m1Values[code]), code);
}

TEST(Nvfp4, E2m1AroundEachRoundingBoundary) {
  // e2m1_encode counts the boundaries a magnitude reaches: every float within 256 ulps of each
  // boundary (the ties among them), of either sign.
  for (const float boundary : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f}) {
    for (const float sign : {1.0f, -1.0f}) {
      float x = sign * boundary;
      for (int step = 0; step < 256; ++step) x = std::nextafter(x, 0.0f);
      for (int step = 0; step < 512; ++step, x = std::nextafter(x, sign * 8.0f)) {
        ASSERT_EQ(e2m1_encode(x), e2m1_by_search(x)) << x;
      }
    }
  }
}

struct Case {
  const char* name;
  const char* rule;
};

class Nvfp4MatchesTheOracle : public ::testing::TestWithParam<Case> {};

TEST_P(Nvfp4MatchesTheOracle, QuantizeAndDequantize) {
  const std::string name = GetParam().name, prefix = name + "." + GetParam().rule;
  const Nvfp4ScaleRule rule = std::string(GetParam().rule) == "fos" ? Nvfp4ScaleRule::FourOverSix : Nvfp4ScaleRule::Six;
  const io::SafetensorsTensor& input = fixture().tensor(name + ".input");
  const Nvfp4Shape shape{input.shape.at(0), input.shape.at(1)};
  const std::vector<float> values = read<float>(name + ".input");
  float amax = 0.0f;
  for (float value : values) amax = std::max(amax, std::fabs(value));
  const Nvfp4TensorScale scale = nvfp4_tensor_scale(amax, rule);
  EXPECT_EQ(scale.decode, read<float>(prefix + ".decode").at(0));

  std::vector<uint8_t> packed(static_cast<size_t>(shape.packed_bytes()), 0xAB);
  std::vector<uint8_t> scales(static_cast<size_t>(shape.block_scales()), 0xAB);
  // Two callers, each its own rows.
  quantize_nvfp4_rows(values.data(), shape, scale, rule, 0, 2, packed.data(), scales.data());
  quantize_nvfp4_rows(values.data(), shape, scale, rule, 2, shape.rows, packed.data(), scales.data());
  EXPECT_EQ(packed, read<uint8_t>(prefix + ".packed"));
  EXPECT_EQ(scales, read<uint8_t>(prefix + ".scales"));

  std::vector<float> out(values.size(), NAN);
  dequantize_nvfp4_rows(packed.data(), scales.data(), scale.decode, shape, 0, shape.rows, out.data());
  const std::vector<float> expected = read<float>(prefix + ".dequantized");
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(expected[i])) << prefix << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Oracle, Nvfp4MatchesTheOracle,
                         ::testing::Values(Case{"wide", "six"}, Case{"wide", "fos"}, Case{"ragged", "six"},
                                           Case{"ragged", "fos"}, Case{"odd", "six"}, Case{"odd", "fos"}),
                         [](const auto& info) { return std::string(info.param.name) + "_" + info.param.rule; });

TEST(Nvfp4, FourOverSixPicksTheSmallerErrorPerBlock) {
  // One block whose values sit at 0.85 of its largest: scaled to 6 they land on 6 (5.1 → 6, error
  // 0.15 each), scaled to 4 on 3 (3.4 → 3, error 0.1): 4 wins. A block of 16 equal values is exact
  // either way: the tie keeps 6.
  std::vector<float> values(32);
  for (int i = 0; i < 16; ++i) values[i] = (i == 0) ? 1.0f : 0.85f;
  for (int i = 16; i < 32; ++i) values[i] = 0.5f;
  const Nvfp4Shape shape{1, 32};
  const Nvfp4TensorScale scale = nvfp4_tensor_scale(1.0f, Nvfp4ScaleRule::FourOverSix);
  std::vector<uint8_t> packed(16), scales(2);
  quantize_nvfp4_rows(values.data(), shape, scale, Nvfp4ScaleRule::FourOverSix, 0, 1, packed.data(), scales.data());
  std::vector<float> out(32);
  dequantize_nvfp4_rows(packed.data(), scales.data(), scale.decode, shape, 0, 1, out.data());
  EXPECT_EQ((packed[0] & 0x0F), 6);  // the block's largest on 4
  EXPECT_EQ(packed[0] >> 4, 5);      // 0.85 on 3
  EXPECT_FLOAT_EQ(out[1], 0.75f);
  EXPECT_EQ((packed[8] & 0x0F), 7);  // the equal block keeps 6
  EXPECT_FLOAT_EQ(out[16], 0.5f);
}

}  // namespace
}  // namespace surogate::quant
