// The start-up's quantization of the frozen base (train/quantized_weights.h) on all cores, and one
// weight behind the reader (train/overlapped_quantizer.h): byte for byte what the quant/ functions
// write on one thread over the whole weight, for every format, on shapes whose blocks do not divide
// them and that are large enough to be split over several tasks (NF4: 1024 blocks a task; the
// double quantization: 64 blocks of 256 absmax values; NVFP4's tensor amax: 2^20 values).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/quantized_weight.h"
#include "quant/fp8.h"
#include "quant/fp8_blocks.h"
#include "quant/fp8_scaling.h"
#include "quant/nf4.h"
#include "quant/nvfp4.h"
#include "train/overlapped_quantizer.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

std::vector<float> weight_values(int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<float> values(static_cast<size_t>(rows * cols));
  uint32_t state = seed;
  for (float& value : values) {
    state = state * 1664525u + 1013904223u;
    value = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.08f;
  }
  values[values.size() / 3] = 0.9f;  // one outlier: its block's scale differs from the others'
  return values;
}

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

models::QuantizedWeight weight_of(models::WeightFormat format, int64_t rows, int64_t cols) {
  models::QuantizedWeight weight;
  weight.name = "layers.0.mlp.down_proj.weight";
  weight.shape = {rows, cols};
  weight.format = format;
  size_t pieces = 3;
  if (format == models::WeightFormat::Nf4) {
    weight.nf4 = {rows * cols, 64, true};
    pieces = 4;
  } else if (format == models::WeightFormat::Fp8Block) {
    weight.fp8_blocks = {rows, cols, 128, 128};
    pieces = 2;
  } else if (format == models::WeightFormat::Nvfp4) {
    weight.nvfp4 = {rows, cols};
  }
  for (size_t i = 0; i < pieces; ++i) weight.pieces.push_back(weight.name + ".piece" + std::to_string(i));
  return weight;
}

// The pieces on one thread, from the quant/ functions over the whole weight.
QuantizedPieces serial_pieces(const models::QuantizedWeight& weight, const std::vector<float>& values) {
  const int64_t rows = weight.shape[0], cols = weight.shape[1];
  QuantizedPieces pieces;
  switch (weight.format) {
    case models::WeightFormat::Nf4: {
      std::vector<uint8_t> packed(static_cast<size_t>(weight.nf4.packed_bytes()));
      std::vector<float> absmax(static_cast<size_t>(weight.nf4.blocks()));
      quant::quantize_nf4_blocks(values.data(), weight.nf4, 0, weight.nf4.blocks(), packed.data(), absmax.data());
      const quant::QuantizedAbsmax nested = quant::quantize_absmax(absmax);
      pieces.bytes = {bytes_of(packed), bytes_of(nested.codes), bytes_of(nested.absmax2),
                      bytes_of(std::vector<float>{nested.offset})};
      break;
    }
    case models::WeightFormat::Fp8Tensor: {
      const float scale = quant::fp8_scale(quant::amax_of(values), quant::Fp8Format::E4M3);
      std::vector<uint8_t> codes(values.size()), transposed(values.size());
      for (size_t i = 0; i < values.size(); ++i) codes[i] = quant::fp8_encode(values[i] * scale, quant::Fp8Format::E4M3);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) transposed[c * rows + r] = codes[r * cols + c];
      }
      pieces.bytes = {bytes_of(codes), bytes_of(transposed), bytes_of(std::vector<float>{1.0f / scale})};
      break;
    }
    case models::WeightFormat::Fp8Block: {
      const quant::Fp8BlockShape& shape = weight.fp8_blocks;
      std::vector<uint8_t> codes(values.size());
      std::vector<float> scale_inv(static_cast<size_t>(shape.blocks()));
      quant::quantize_fp8_blocks(values.data(), shape, 0, shape.row_blocks(), codes.data(), scale_inv.data());
      pieces.bytes = {bytes_of(codes), bytes_of(scale_inv)};
      break;
    }
    case models::WeightFormat::Nvfp4: {
      const quant::Nvfp4Shape& shape = weight.nvfp4;
      const quant::Nvfp4TensorScale scale = quant::nvfp4_tensor_scale(quant::amax_of(values), weight.nvfp4_rule);
      std::vector<uint8_t> packed(static_cast<size_t>(shape.packed_bytes()));
      std::vector<uint8_t> scales(static_cast<size_t>(shape.block_scales()));
      quant::quantize_nvfp4_rows(values.data(), shape, scale, weight.nvfp4_rule, 0, rows, packed.data(), scales.data());
      pieces.bytes = {bytes_of(packed), bytes_of(scales), bytes_of(std::vector<float>{scale.decode})};
      break;
    }
  }
  return pieces;
}

struct Case {
  const char* name;
  models::WeightFormat format;
  int64_t rows, cols;
};

class QuantizeOnAllCores : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeOnAllCores, IsTheSerialQuantizerByteForByte) {
  const Case& c = GetParam();
  const models::QuantizedWeight weight = weight_of(c.format, c.rows, c.cols);
  const std::vector<float> values = weight_values(c.rows, c.cols, 11);
  const QuantizedPieces expected = serial_pieces(weight, values);
  const QuantizedPieces pieces = quantize_weight(weight, values);
  ASSERT_EQ(pieces.bytes.size(), expected.bytes.size());
  for (size_t i = 0; i < expected.bytes.size(); ++i) EXPECT_TRUE(pieces.bytes[i] == expected.bytes[i]) << "piece " << i;
}

TEST_P(QuantizeOnAllCores, IntoPiecesOfALargerWeightIsTheSame) {
  // The overlapped quantizer reuses the pieces of the weight before: sizes shrink and grow again.
  const Case& c = GetParam();
  const models::QuantizedWeight small = weight_of(c.format, c.rows, c.cols);
  const models::QuantizedWeight large = weight_of(c.format, c.rows + 130, c.cols + 3);
  const std::vector<float> small_values = weight_values(c.rows, c.cols, 5);
  const std::vector<float> large_values = weight_values(c.rows + 130, c.cols + 3, 6);
  QuantizedPieces reused;
  quantize_weight_into(large, large_values, reused);
  quantize_weight_into(small, small_values, reused);
  const QuantizedPieces expected = serial_pieces(small, small_values);
  ASSERT_EQ(reused.bytes.size(), expected.bytes.size());
  for (size_t i = 0; i < expected.bytes.size(); ++i) EXPECT_TRUE(reused.bytes[i] == expected.bytes[i]) << "piece " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, QuantizeOnAllCores,
    ::testing::Values(Case{"nf4_double_quant", models::WeightFormat::Nf4, 1031, 1025},
                      Case{"nf4_odd", models::WeightFormat::Nf4, 37, 301},
                      Case{"fp8_tensor", models::WeightFormat::Fp8Tensor, 301, 129},
                      Case{"fp8_blocks", models::WeightFormat::Fp8Block, 300, 1001},
                      Case{"nvfp4", models::WeightFormat::Nvfp4, 1031, 1025},
                      Case{"nvfp4_odd", models::WeightFormat::Nvfp4, 33, 37}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(OverlappedQuantizer, StoresEachWeightInOrderAsQuantizeWeightMakesIt) {
  // Weights of every format and size in turn, one taken "as stored" in the middle (drain), as the
  // start-up's loader drives it: each read into its scratch while the one before is quantized.
  std::vector<models::QuantizedWeight> weights = {
      weight_of(models::WeightFormat::Nf4, 300, 257), weight_of(models::WeightFormat::Fp8Tensor, 64, 1000),
      weight_of(models::WeightFormat::Nvfp4, 129, 77), weight_of(models::WeightFormat::Fp8Block, 300, 1001),
      weight_of(models::WeightFormat::Nf4, 31, 33)};
  for (size_t i = 0; i < weights.size(); ++i) weights[i].name += std::to_string(i);
  std::vector<std::string> stored_names;
  std::vector<QuantizedPieces> stored;
  OverlappedQuantizer quantizer(
      [&](const models::QuantizedWeight& weight, const QuantizedPieces& pieces) {
        stored_names.push_back(weight.name);
        stored.push_back(pieces);
      },
      weights);
  std::vector<std::vector<float>> values;
  for (size_t i = 0; i < weights.size(); ++i) {
    values.push_back(weight_values(weights[i].shape[0], weights[i].shape[1], static_cast<uint32_t>(20 + i)));
    const std::span<float> scratch = quantizer.scratch(i, weights[i].numel());
    std::copy(values[i].begin(), values[i].end(), scratch.begin());
    quantizer.quantize(i, weights[i]);
    if (i == 2) quantizer.drain();
  }
  quantizer.drain();
  EXPECT_EQ(quantizer.weights(), static_cast<int64_t>(weights.size()));
  ASSERT_EQ(stored.size(), weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    EXPECT_EQ(stored_names[i], weights[i].name);
    const QuantizedPieces expected = serial_pieces(weights[i], values[i]);
    ASSERT_EQ(stored[i].bytes.size(), expected.bytes.size()) << weights[i].name;
    for (size_t p = 0; p < expected.bytes.size(); ++p) {
      EXPECT_TRUE(stored[i].bytes[p] == expected.bytes[p]) << weights[i].name << " piece " << p;
    }
  }
}

TEST(OverlappedQuantizer, AWorkersErrorReachesTheReader) {
  models::QuantizedWeight bad = weight_of(models::WeightFormat::Fp8Block, 8, 8);
  bad.pieces.pop_back();  // one piece named, two made: quantize_weight refuses
  const std::vector<models::QuantizedWeight> weights = {bad};
  OverlappedQuantizer quantizer([](const models::QuantizedWeight&, const QuantizedPieces&) {}, weights);
  std::fill(quantizer.scratch(0, 64).begin(), quantizer.scratch(0, 64).end(), 1.0f);
  quantizer.quantize(0, weights[0]);
  EXPECT_THROW(quantizer.drain(), InternalError);
}

}  // namespace
}  // namespace surogate::train
