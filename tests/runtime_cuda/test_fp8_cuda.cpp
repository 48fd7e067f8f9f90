// The fp8_hybrid recipe's CUDA pieces against the CPU reference on fresh random data:
//   - fp8_record_amax + fp8_quantize equal quant::fp8_encode(x · fp8_scale(amax)) bit for bit, with
//     the same scale_inv and the same state row afterwards: current scaling (row zero), delayed
//     scaling (a row with a history, including one small enough that values saturate), E4M3 and
//     E5M2, the 8-wide path and the scalar one, values spanning subnormals to large magnitudes;
//   - fp8_roll_history equals quant::roll_fp8_history;
//   - Fp8Matmul (cuBLASLt) equals the product of the decoded codes times both scales, computed in
//     double, within the accumulation and bf16 output rounding: |got − ref| ≤ 2⁻⁷·|ref| + e·Σ|a·b|,
//     in the settings the engine runs them (runtime/cuda_fp8_ops.cpp): the forward's E4M3 × E4M3
//     with fast accumulation, with and without a bias; the backward's E5M2 × E4M3 with promoted
//     accumulation and an addend. Hopper's FP8 tensor cores keep about 14 bits of the running sum
//     (DeepSeek-V3 technical report, 3.3.2), promoted to fp32 periodically without fast
//     accumulation: e = 2⁻¹² promoted, 2⁻¹⁰ fast (measured on the H100: 2⁻¹³·⁴ and 2⁻¹¹·⁸ worst).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "cuda/fp8_matmul.h"
#include "cuda/kernels/fp8_quantize.h"
#include "quant/fp8.h"
#include "quant/fp8_scaling.h"

namespace surogate {
namespace {

bool skip_without_gpu() {
  std::string reason;
  if (cuda::cuda_device_available(&reason)) return false;
  std::printf("skipped: %s\n", reason.c_str());
  return true;
}

// bf16 values whose magnitudes span 2^-20 .. 2^6, signs mixed.
std::vector<float> spread_values(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> exponent(-20.0f, 6.0f), sign(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) {
    value = bf16_to_float(float_to_bf16(std::copysign(std::exp2(exponent(rng)), sign(rng))));
  }
  return values;
}

TEST(Fp8Cuda, QuantizeMatchesCpuReferenceBitForBit) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(20261125);
  for (quant::Fp8Format format : {quant::Fp8Format::E4M3, quant::Fp8Format::E5M2}) {
    for (size_t count : {size_t{1} << 20, size_t{4096}, size_t{777}}) {
      const std::vector<float> values = spread_values(count, rng);
      std::vector<uint16_t> bits(count);
      for (size_t i = 0; i < count; ++i) bits[i] = float_to_bf16(values[i]);
      const float amax = quant::amax_of(values);
      // Rows: current scaling; delayed with a larger amax; delayed with a smaller one (saturates).
      for (float delayed : {0.0f, amax * 3.0f, amax / 16.0f}) {
        std::vector<float> row{delayed, delayed > 0 ? amax / 2 : 0.0f};
        std::vector<float> expected_row = row;
        expected_row[1] = quant::amax_max(expected_row[1], amax);
        const float scale = quant::fp8_scale(quant::site_amax(expected_row.data()), format);
        cuda::DeviceBuffer<uint16_t> x = cuda::to_device(bits);
        cuda::DeviceBuffer<float> row_device = cuda::to_device(row);
        cuda::DeviceBuffer<uint8_t> q(count);
        cuda::DeviceBuffer<float> scale_inv(1);
        const auto* x_bf16 = reinterpret_cast<const __nv_bfloat16*>(x.data());
        const cuda::Fp8Target target = format == quant::Fp8Format::E4M3 ? cuda::Fp8Target::E4M3 : cuda::Fp8Target::E5M2;
        cuda::fp8_record_amax(x_bf16, static_cast<int64_t>(count), row_device.data(), nullptr);
        cuda::fp8_quantize(x_bf16, static_cast<int64_t>(count), target, row_device.data(), q.data(), scale_inv.data(),
                           nullptr);
        const std::vector<uint8_t> codes = q.download();
        EXPECT_EQ(row_device.download(), expected_row);
        EXPECT_EQ(scale_inv.download()[0], 1.0f / scale);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(codes[i], quant::fp8_encode(values[i] * scale, format))
              << "value " << values[i] << " (element " << i << " of " << count << ", delayed amax " << delayed << ")";
        }
      }
    }
  }
}

TEST(Fp8Cuda, RollHistoryMatchesCpuReference) {
  if (skip_without_gpu()) GTEST_SKIP();
  const int64_t sites = 37, history = 1024;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> amax(0.0f, 100.0f);
  std::vector<float> state(static_cast<size_t>(sites * (history + 2)));
  for (float& value : state) value = amax(rng);
  cuda::DeviceBuffer<float> device = cuda::to_device(state);
  for (int64_t step : {0, 5, 1023, 1024, 4000}) {
    quant::roll_fp8_history(state.data(), sites, history, step);
    cuda::fp8_roll_history(device.data(), sites, history, step, nullptr);
    ASSERT_EQ(device.download(), state) << "step " << step;
  }
}

void check_product(int64_t m, int64_t n, int64_t k, quant::Fp8Format a_format, bool bias, bool addend) {
  const bool fast = a_format == quant::Fp8Format::E4M3;  // as the forward runs; gradients accumulate fully
  const int error_exponent = fast ? -10 : -12;
  std::mt19937 rng(static_cast<uint32_t>(m * 31 + n * 7 + k));
  std::uniform_int_distribution<int> code(0, 255);
  auto random_codes = [&](int64_t count, quant::Fp8Format format) {
    std::vector<uint8_t> codes(static_cast<size_t>(count));
    for (uint8_t& c : codes) {
      do c = static_cast<uint8_t>(code(rng));
      while (!std::isfinite(quant::fp8_decode(c, format)));
    }
    return codes;
  };
  const std::vector<uint8_t> a = random_codes(m * k, a_format), b = random_codes(n * k, quant::Fp8Format::E4M3);
  const float a_scale = 1.0f / 512.0f, b_scale = 1.0f / 64.0f;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> bias_bits(static_cast<size_t>(n)), addend_bits(static_cast<size_t>(m * n));
  for (uint16_t& v : bias_bits) v = float_to_bf16(normal(rng));
  for (uint16_t& v : addend_bits) v = float_to_bf16(normal(rng));
  cuda::DeviceBuffer<uint8_t> a_device = cuda::to_device(a), b_device = cuda::to_device(b);
  cuda::DeviceBuffer<float> a_scale_device = cuda::to_device(std::vector<float>{a_scale});
  cuda::DeviceBuffer<float> b_scale_device = cuda::to_device(std::vector<float>{b_scale});
  cuda::DeviceBuffer<uint16_t> bias_device = cuda::to_device(bias_bits), addend_device = cuda::to_device(addend_bits);
  cuda::DeviceBuffer<uint16_t> out(static_cast<size_t>(m * n));
  cuda::Fp8Matmul matmul;
  const cuda::Fp8MatmulShape shape{.m = m, .n = n, .k = k,
                                   .a_format = a_format == quant::Fp8Format::E4M3 ? cuda::Fp8Operand::E4M3
                                                                                  : cuda::Fp8Operand::E5M2,
                                   .has_bias = bias, .has_addend = addend, .fast_accumulation = fast};
  matmul.run(shape, reinterpret_cast<__nv_bfloat16*>(out.data()), a_device.data(), a_scale_device.data(), b_device.data(),
             b_scale_device.data(), bias ? reinterpret_cast<const __nv_bfloat16*>(bias_device.data()) : nullptr,
             addend ? reinterpret_cast<const __nv_bfloat16*>(addend_device.data()) : nullptr, nullptr);
  const std::vector<uint16_t> got = out.download();
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        const double product = double(quant::fp8_decode(a[r * k + i], a_format)) *
                               double(quant::fp8_decode(b[c * k + i], quant::Fp8Format::E4M3));
        sum += product;
        magnitude += std::fabs(product);
      }
      double expected = sum * a_scale * b_scale;
      if (bias) expected += bf16_to_float(bias_bits[c]);
      if (addend) expected += bf16_to_float(addend_bits[r * n + c]);
      const double actual = bf16_to_float(got[r * n + c]);
      const double tolerance = std::ldexp(std::fabs(expected), -7) + std::ldexp(magnitude * a_scale * b_scale, error_exponent) + 1e-6;
      ASSERT_NEAR(actual, expected, tolerance) << "row " << r << ", column " << c << " of " << m << "x" << n << "x" << k;
    }
  }
}

TEST(Fp8Cuda, MatmulMatchesDecodedProduct) {
  if (skip_without_gpu()) GTEST_SKIP();
  check_product(256, 384, 512, quant::Fp8Format::E4M3, true, false);
  check_product(200, 128, 1024, quant::Fp8Format::E5M2, false, true);
  check_product(64, 64, 64, quant::Fp8Format::E4M3, false, false);
}

}  // namespace
}  // namespace surogate
