// FP8 block quantization (quant/fp8_blocks.h): the block layout, ragged edge blocks included (rows
// and columns not multiples of the block, square and rectangular blocks), each block's scale_inv
// exactly 1 / (448 / amax) and each code exactly fp8_encode(x · scale) of its own block's scale; a
// block of zeros (scale_inv 1, codes 0, values 0); the block's largest magnitude on the largest
// code; the round trip within E4M3's error; splitting the work by block rows changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "quant/fp8.h"
#include "quant/fp8_blocks.h"

namespace surogate::quant {
namespace {

struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scale_inv;
};

Quantized quantize(const std::vector<float>& values, const Fp8BlockShape& shape) {
  Quantized q{std::vector<uint8_t>(static_cast<size_t>(shape.numel())),
              std::vector<float>(static_cast<size_t>(shape.blocks()), -1.0f)};
  quantize_fp8_blocks(values.data(), shape, 0, shape.row_blocks(), q.codes.data(), q.scale_inv.data());
  return q;
}

std::vector<float> random_weight(const Fp8BlockShape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> values(static_cast<size_t>(shape.numel()));
  for (float& value : values) value = normal(rng);
  return values;
}

class Fp8BlockShapes : public ::testing::TestWithParam<Fp8BlockShape> {};

TEST_P(Fp8BlockShapes, EachBlockHasItsOwnScale) {
  const Fp8BlockShape shape = GetParam();
  std::vector<float> values = random_weight(shape, 7);
  // Block (1, 0) holds zeros only when there is such a block; every other block its own magnitude.
  for (int64_t r = 0; r < shape.rows; ++r) {
    for (int64_t c = 0; c < shape.cols; ++c) {
      const int64_t block = (r / shape.block_rows) * shape.col_blocks() + c / shape.block_cols;
      float& value = values[static_cast<size_t>(r * shape.cols + c)];
      value = (block == shape.col_blocks()) ? 0.0f : value * static_cast<float>(block + 1);
    }
  }
  const Quantized q = quantize(values, shape);
  ASSERT_EQ(q.scale_inv.size(), static_cast<size_t>(shape.row_blocks() * shape.col_blocks()));

  // The reference: each block's amax and scale found independently of the implementation's loops.
  std::vector<float> amax(q.scale_inv.size(), 0.0f);
  for (int64_t r = 0; r < shape.rows; ++r) {
    for (int64_t c = 0; c < shape.cols; ++c) {
      float& block_amax = amax[static_cast<size_t>((r / shape.block_rows) * shape.col_blocks() + c / shape.block_cols)];
      block_amax = std::max(block_amax, std::fabs(values[static_cast<size_t>(r * shape.cols + c)]));
    }
  }
  for (size_t block = 0; block < amax.size(); ++block) {
    const float expected = amax[block] == 0.0f ? 1.0f : 1.0f / (448.0f / amax[block]);
    EXPECT_EQ(q.scale_inv[block], expected) << "block " << block;
  }
  std::vector<float> out(values.size(), NAN);
  dequantize_fp8_blocks(q.codes.data(), q.scale_inv.data(), shape, 0, shape.row_blocks(), out.data());
  for (int64_t r = 0; r < shape.rows; ++r) {
    for (int64_t c = 0; c < shape.cols; ++c) {
      const size_t i = static_cast<size_t>(r * shape.cols + c);
      const size_t block = static_cast<size_t>((r / shape.block_rows) * shape.col_blocks() + c / shape.block_cols);
      const float scale = fp8_scale(amax[block], Fp8Format::E4M3);
      ASSERT_EQ(q.codes[i], fp8_encode(values[i] * scale, Fp8Format::E4M3)) << "row " << r << ", col " << c;
      ASSERT_EQ(out[i], fp8_decode(q.codes[i], Fp8Format::E4M3) * q.scale_inv[block]) << "row " << r << ", col " << c;
      if (amax[block] == 0.0f) {
        ASSERT_EQ(q.codes[i], 0) << "a block of zeros has code 0, row " << r << ", col " << c;
        ASSERT_EQ(out[i], 0.0f);
        continue;
      }
      if (std::fabs(values[i]) == amax[block]) EXPECT_EQ(q.codes[i] & 0x7F, 0x7E) << "the amax is coded as 448";
      // E4M3 keeps 3 mantissa bits: half a step is 2^-4 of the value in the normal range, and
      // 2^-10 (half the subnormal step 2^-9) of scale_inv below it; a little for the fp32 products.
      const double bound = (std::fabs(values[i]) * 0x1.0p-4 + 0x1.0p-10 * q.scale_inv[block]) * 1.0001;
      ASSERT_LE(std::fabs(static_cast<double>(out[i]) - values[i]), bound) << "row " << r << ", col " << c;
    }
  }
}

TEST_P(Fp8BlockShapes, SplittingByBlockRowsChangesNothing) {
  const Fp8BlockShape shape = GetParam();
  const std::vector<float> values = random_weight(shape, 11);
  const Quantized whole = quantize(values, shape);
  Quantized split{std::vector<uint8_t>(whole.codes.size()), std::vector<float>(whole.scale_inv.size())};
  std::vector<float> out_whole(values.size()), out_split(values.size());
  dequantize_fp8_blocks(whole.codes.data(), whole.scale_inv.data(), shape, 0, shape.row_blocks(), out_whole.data());
  for (int64_t block_row = shape.row_blocks() - 1; block_row >= 0; --block_row) {
    quantize_fp8_blocks(values.data(), shape, block_row, block_row + 1, split.codes.data(), split.scale_inv.data());
    dequantize_fp8_blocks(split.codes.data(), split.scale_inv.data(), shape, block_row, block_row + 1, out_split.data());
  }
  EXPECT_EQ(split.codes, whole.codes);
  EXPECT_EQ(split.scale_inv, whole.scale_inv);
  EXPECT_EQ(out_split, out_whole);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Fp8BlockShapes,
                         ::testing::Values(Fp8BlockShape{256, 384, 128, 128},   // whole blocks
                                           Fp8BlockShape{300, 200, 128, 128},   // ragged rows and columns
                                           Fp8BlockShape{130, 70, 64, 64},      // ragged, block 64
                                           Fp8BlockShape{520, 257, 256, 256},   // ragged, block 256
                                           Fp8BlockShape{200, 100, 128, 64},    // rectangular blocks (checkpoints)
                                           Fp8BlockShape{5, 3, 128, 128}));     // smaller than one block

TEST(Fp8Blocks, LargeAndTinyValuesSaturateNoneAndKeepSubnormals) {
  // A block whose amax is huge next to its other values: those land in E4M3's subnormals (or 0).
  const Fp8BlockShape shape{2, 2, 128, 128};
  const std::vector<float> values = {1000.0f, 1e-3f, -0.5f, 0.0f};
  const Quantized q = quantize(values, shape);
  EXPECT_EQ(q.scale_inv[0], 1.0f / (448.0f / 1000.0f));
  EXPECT_EQ(q.codes[0], 0x7E);
  EXPECT_EQ(q.codes[1], fp8_encode(1e-3f * (448.0f / 1000.0f), Fp8Format::E4M3));
  EXPECT_EQ(q.codes[2], fp8_encode(-0.5f * (448.0f / 1000.0f), Fp8Format::E4M3));
  EXPECT_EQ(q.codes[3], 0);
}

}  // namespace
}  // namespace surogate::quant
