// The NF4 dequantization kernel (cuda/kernels/dequantize_nf4.h) against the CPU reference
// (quant/nf4.h) on fresh random weights: the bf16 output equals the reference's fp32 value rounded
// to bf16, bit for bit — plain and double-quantized absmax, block sizes 64 / 128 / 256 / 512, counts
// that take the 8-wide path and the scalar one (an odd count, a count not a multiple of 8), and a
// block of zeros.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "cuda/kernels/dequantize_nf4.h"
#include "quant/nf4.h"

namespace surogate {
namespace {

bool skip_without_gpu() {
  std::string reason;
  if (cuda::cuda_device_available(&reason)) return false;
  std::printf("skipped: %s\n", reason.c_str());
  return true;
}

TEST(DequantizeNf4Cuda, MatchesCpuReferenceRoundedToBf16) {
  if (skip_without_gpu()) GTEST_SKIP();
  cuda::prepare_dequantize_nf4();
  std::mt19937 rng(20261125);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (int64_t block : {64, 128, 256, 512}) {
    for (int64_t numel : {int64_t{4096} * 64, int64_t{700}, int64_t{701}, int64_t{1} << 20}) {
      for (bool double_quant : {false, true}) {
        std::vector<float> values(static_cast<size_t>(numel));
        for (float& value : values) value = bf16_to_float(float_to_bf16(normal(rng)));
        if (numel > 3 * block) std::fill(values.begin() + block, values.begin() + 2 * block, 0.0f);
        const quant::Nf4Shape shape{numel, block, double_quant};
        std::vector<uint8_t> packed(static_cast<size_t>(shape.packed_bytes()));
        std::vector<float> absmax(static_cast<size_t>(shape.blocks()));
        quant::quantize_nf4_blocks(values.data(), shape, 0, shape.blocks(), packed.data(), absmax.data());
        quant::Nf4View reference{shape, packed.data()};
        quant::QuantizedAbsmax nested;
        if (double_quant) {
          nested = quant::quantize_absmax(absmax);
          reference.absmax_codes = nested.codes.data();
          reference.absmax2 = nested.absmax2.data();
          reference.offset = nested.offset;
        } else {
          reference.absmax = absmax.data();
        }
        std::vector<float> expected(values.size());
        quant::dequantize_nf4_blocks(reference, 0, shape.blocks(), expected.data());

        cuda::DeviceBuffer<uint8_t> packed_device = cuda::to_device(packed);
        cuda::DeviceBuffer<float> absmax_device = cuda::to_device(absmax);
        cuda::DeviceBuffer<uint8_t> codes_device = cuda::to_device(double_quant ? nested.codes : std::vector<uint8_t>{0});
        cuda::DeviceBuffer<float> absmax2_device = cuda::to_device(double_quant ? nested.absmax2 : std::vector<float>{0});
        cuda::DeviceBuffer<float> offset_device = cuda::to_device(std::vector<float>{nested.offset});
        cuda::DeviceBuffer<uint16_t> out(values.size());
        out.poison();
        cuda::Nf4DeviceView view;
        view.packed = packed_device.data();
        if (double_quant) {
          view.absmax_codes = codes_device.data();
          view.absmax2 = absmax2_device.data();
          view.offset = offset_device.data();
        } else {
          view.absmax = absmax_device.data();
        }
        view.numel = numel;
        view.block_size = block;
        cuda::dequantize_nf4_bf16(view, reinterpret_cast<__nv_bfloat16*>(out.data()), nullptr);
        const std::vector<uint16_t> actual = out.download();
        for (size_t i = 0; i < values.size(); ++i) {
          ASSERT_EQ(actual[i], float_to_bf16(expected[i]))
              << "block " << block << ", numel " << numel << ", double quant " << double_quant << ", element " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace surogate
