// The FP8 block dequantization kernel (cuda/kernels/dequantize_fp8_blocks.h) against the CPU
// reference (quant/fp8_blocks.h): the bf16 output equals the reference's fp32 value rounded to
// bf16, bit for bit — on fresh random weights quantized on the host (block 64 / 128 / 256, shapes
// whose rows and columns are not multiples of the block, a block of zeros, the 8-wide path and the
// scalar one: cols not a multiple of 8), and on random codes covering every finite E4M3 code with
// random scales (the decode itself, subnormals and ±448 included).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "cuda/kernels/dequantize_fp8_blocks.h"
#include "quant/fp8_blocks.h"

namespace surogate {
namespace {

bool skip_without_gpu() {
  std::string reason;
  if (cuda::cuda_device_available(&reason)) return false;
  std::printf("skipped: %s\n", reason.c_str());
  return true;
}

// Dequantizes on the GPU and compares with the CPU reference rounded to bf16.
void expect_matches_reference(const std::vector<uint8_t>& codes, const std::vector<float>& scale_inv,
                              const quant::Fp8BlockShape& shape) {
  std::vector<float> expected(codes.size());
  quant::dequantize_fp8_blocks(codes.data(), scale_inv.data(), shape, 0, shape.row_blocks(), expected.data());
  cuda::DeviceBuffer<uint8_t> codes_device = cuda::to_device(codes);
  cuda::DeviceBuffer<float> scale_device = cuda::to_device(scale_inv);
  cuda::DeviceBuffer<uint16_t> out(codes.size());
  out.poison();
  const cuda::Fp8BlockDeviceView view{codes_device.data(), scale_device.data(), shape.rows, shape.cols,
                                      shape.block_rows};
  cuda::dequantize_fp8_blocks_bf16(view, reinterpret_cast<__nv_bfloat16*>(out.data()), nullptr);
  const std::vector<uint16_t> actual = out.download();
  for (size_t i = 0; i < codes.size(); ++i) {
    ASSERT_EQ(actual[i], float_to_bf16(expected[i]))
        << "shape " << shape.rows << "x" << shape.cols << ", block " << shape.block_rows << ", element " << i
        << ", code " << int(codes[i]);
  }
}

TEST(DequantizeFp8BlocksCuda, MatchesCpuReferenceOnQuantizedWeights) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(20261126);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (int64_t block : {64, 128, 256}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1024, 4096}, {300, 200}, {130, 77}, {513, 1000}, {7, 5}}) {
      const quant::Fp8BlockShape shape{rows, cols, block, block};
      std::vector<float> values(static_cast<size_t>(shape.numel()));
      for (float& value : values) value = bf16_to_float(float_to_bf16(normal(rng)));
      if (rows > block && cols > block) {  // block (0, 1): zeros
        for (int64_t r = 0; r < block; ++r) {
          for (int64_t c = block; c < std::min(cols, 2 * block); ++c) values[static_cast<size_t>(r * cols + c)] = 0.0f;
        }
      }
      std::vector<uint8_t> codes(values.size());
      std::vector<float> scale_inv(static_cast<size_t>(shape.blocks()));
      quant::quantize_fp8_blocks(values.data(), shape, 0, shape.row_blocks(), codes.data(), scale_inv.data());
      expect_matches_reference(codes, scale_inv, shape);
    }
  }
}

TEST(DequantizeFp8BlocksCuda, EveryFiniteCodeDecodesLikeTheReference) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> exponent(-20.0f, 4.0f);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{256, 512}, {200, 131}}) {
    const quant::Fp8BlockShape shape{rows, cols, 128, 128};
    std::vector<uint8_t> codes(static_cast<size_t>(shape.numel()));
    for (size_t i = 0; i < codes.size(); ++i) {
      int code = i < 256 ? static_cast<int>(i) : byte(rng);
      if ((code & 0x7F) == 0x7F) code ^= 0x01;  // no NaN codes (never written by the quantizer)
      codes[i] = static_cast<uint8_t>(code);
    }
    std::vector<float> scale_inv(static_cast<size_t>(shape.blocks()));
    for (float& scale : scale_inv) scale = std::exp2(exponent(rng));
    expect_matches_reference(codes, scale_inv, shape);
  }
}

}  // namespace
}  // namespace surogate
