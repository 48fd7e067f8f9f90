// NVFP4 on the CUDA side against the CPU reference (quant/nvfp4.h), on fresh random bf16 tensors,
// for NVIDIA's rule and Four Over Six, on shapes with cols a multiple of 16 and with a ragged last
// block and an odd column count, with a block of zeros:
// - the dequantization kernel (cuda/kernels/dequantize_fp4.h): the bf16 output equals the
//   reference's fp32 value rounded to bf16, bit for bit (the 16-wide path and the scalar one);
// - the nvfp4 recipe's quantizer (cuda/kernels/quantize_nvfp4.h): amax, packed codes, block scales
//   and tensor scale equal the CPU's byte for byte.
// And the CPU's E2M1 encoder against CUDA's own conversion (cuda_fp4.h's __nv_cvt_float_to_fp4,
// which is cvt.rn.satfinite.e2m1x2.f32 on Blackwell and NVIDIA's emulation of it elsewhere) on every
// 97th float: that part needs no GPU.
#include <gtest/gtest.h>

#include <cuda_fp4.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "cuda/kernels/dequantize_fp4.h"
#include "cuda/kernels/quantize_nvfp4.h"
#include "quant/nvfp4.h"

namespace surogate {
namespace {

TEST(Nvfp4Cuda, E2m1EncoderIsCudasConversion) {
  int64_t checked = 0;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 97) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    const auto expected = static_cast<uint8_t>(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest));
    ASSERT_EQ(quant::e2m1_encode(x), expected) << "bits " << std::hex << bits;
    ++checked;
  }
  EXPECT_GT(checked, 44'000'000);
}

bool skip_without_gpu() {
  std::string reason;
  if (cuda::cuda_device_available(&reason)) return false;
  std::printf("skipped: %s\n", reason.c_str());
  return true;
}

// The CPU reference's quantization of `values`.
struct CpuQuantized {
  float amax = 0.0f;
  quant::Nvfp4TensorScale scale;
  std::vector<uint8_t> packed;
  std::vector<uint8_t> block_scales;
};

CpuQuantized quantize_on_cpu(const std::vector<float>& values, const quant::Nvfp4Shape& shape,
                             quant::Nvfp4ScaleRule rule) {
  CpuQuantized result;
  for (float value : values) result.amax = std::max(result.amax, std::fabs(value));
  result.scale = quant::nvfp4_tensor_scale(result.amax, rule);
  result.packed.resize(static_cast<size_t>(shape.packed_bytes()));
  result.block_scales.resize(static_cast<size_t>(shape.block_scales()));
  quant::quantize_nvfp4_rows(values.data(), shape, result.scale, rule, 0, shape.rows, result.packed.data(),
                             result.block_scales.data());
  return result;
}

TEST(Nvfp4Cuda, DequantizeMatchesCpuReferenceRoundedToBf16) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(20261126);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const std::vector<quant::Nvfp4Shape> shapes = {{64, 4096}, {256, 1024}, {7, 40}, {5, 33}, {1, 16}};
  for (const quant::Nvfp4Shape& shape : shapes) {
    for (quant::Nvfp4ScaleRule rule : {quant::Nvfp4ScaleRule::Six, quant::Nvfp4ScaleRule::FourOverSix}) {
      std::vector<float> values(static_cast<size_t>(shape.numel()));
      for (float& value : values) value = bf16_to_float(float_to_bf16(normal(rng)));
      if (shape.rows > 1) std::fill(values.begin() + shape.cols, values.begin() + shape.cols + 16, 0.0f);
      const CpuQuantized cpu = quantize_on_cpu(values, shape, rule);
      const std::vector<uint8_t>& packed = cpu.packed;
      const std::vector<uint8_t>& block_scales = cpu.block_scales;
      const quant::Nvfp4TensorScale& scale = cpu.scale;
      std::vector<float> expected(values.size());
      quant::dequantize_nvfp4_rows(packed.data(), block_scales.data(), scale.decode, shape, 0, shape.rows,
                                   expected.data());

      cuda::DeviceBuffer<uint8_t> packed_device = cuda::to_device(packed);
      cuda::DeviceBuffer<uint8_t> scales_device = cuda::to_device(block_scales);
      cuda::DeviceBuffer<float> decode_device = cuda::to_device(std::vector<float>{scale.decode});
      cuda::DeviceBuffer<uint16_t> out(values.size());
      out.poison();
      const cuda::Nvfp4DeviceView view{packed_device.data(), scales_device.data(), decode_device.data(), shape.rows,
                                       shape.cols};
      cuda::dequantize_fp4_bf16(view, reinterpret_cast<__nv_bfloat16*>(out.data()), nullptr);
      const std::vector<uint16_t> actual = out.download();
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(actual[i], float_to_bf16(expected[i]))
            << shape.rows << "x" << shape.cols << ", four over six " << (rule == quant::Nvfp4ScaleRule::FourOverSix)
            << ", element " << i;
      }
    }
  }
}

TEST(Nvfp4Cuda, QuantizerMatchesCpuReference) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(20261127);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<quant::Nvfp4Shape> shapes = {{256, 2048}, {7, 40}, {5, 33}, {3, 16}};
  for (const quant::Nvfp4Shape& shape : shapes) {
    for (quant::Nvfp4ScaleRule rule : {quant::Nvfp4ScaleRule::Six, quant::Nvfp4ScaleRule::FourOverSix}) {
      // Activation-like values: a wide range of block magnitudes, some outliers.
      std::vector<uint16_t> bits(static_cast<size_t>(shape.numel()));
      std::vector<float> values(bits.size());
      for (size_t i = 0; i < bits.size(); ++i) {
        const float magnitude = (i % 97 == 0) ? 40.0f : std::exp2(static_cast<float>(i / 16 % 12) - 6.0f);
        bits[i] = float_to_bf16(normal(rng) * magnitude);
        values[i] = bf16_to_float(bits[i]);
      }
      if (shape.rows > 1) {
        std::fill(values.begin() + shape.cols, values.begin() + shape.cols + 16, 0.0f);
        std::fill(bits.begin() + shape.cols, bits.begin() + shape.cols + 16, uint16_t{0});
      }
      const CpuQuantized cpu = quantize_on_cpu(values, shape, rule);
      const std::vector<uint8_t>& packed = cpu.packed;
      const std::vector<uint8_t>& block_scales = cpu.block_scales;
      const quant::Nvfp4TensorScale& scale = cpu.scale;

      cuda::DeviceBuffer<uint16_t> x = cuda::to_device(bits);
      cuda::DeviceBuffer<float> amax_device(1), decode_device(1);
      cuda::DeviceBuffer<uint8_t> packed_device(packed.size()), scales_device(block_scales.size());
      packed_device.poison();
      scales_device.poison();
      const auto* input = reinterpret_cast<const __nv_bfloat16*>(x.data());
      cuda::nvfp4_amax(input, shape.numel(), amax_device.data(), nullptr);
      cuda::quantize_nvfp4(input, shape.rows, shape.cols, rule == quant::Nvfp4ScaleRule::FourOverSix,
                           amax_device.data(), packed_device.data(), scales_device.data(), decode_device.data(),
                           nullptr);
      const std::string where = std::to_string(shape.rows) + "x" + std::to_string(shape.cols) +
                                (rule == quant::Nvfp4ScaleRule::FourOverSix ? " four over six" : " six");
      EXPECT_EQ(amax_device.download().at(0), cpu.amax) << where;
      EXPECT_EQ(decode_device.download().at(0), scale.decode) << where;
      EXPECT_EQ(packed_device.download(), packed) << where;
      EXPECT_EQ(scales_device.download(), block_scales) << where;
    }
  }
}

}  // namespace
}  // namespace surogate
