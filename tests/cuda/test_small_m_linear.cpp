// cuda::small_m_linear (cuda/kernels/small_m_linear.h), a decode step's linear layer, on Qwen3-8B's
// shapes (W [N, K]: 4096×4096 q/o, 12288×4096 gate/up, 4096×12288 down, 151936×4096 the head)
// for M = 1..8 rows, with and without a bias, and a 16-bit addend with a scale:
//   * against a float64 CPU product of the same bf16 values, on a sample of the output columns
//     (every 61st and the last 20; the full product would cost the CPU billions of products):
//     max |gpu − ref| / max |ref| < 4e-3 — the output's one rounding to bf16 (at most 2^-8 of the
//     largest value) plus fp32 accumulation error (~1e-6 here). A wrong row, column, chunk or
//     lane reduction is off by order 1;
//   * against the cuBLASLt path (cuda::Matmul, the linear op's other route) on every column:
//     < 1e-2, the matmul tests' bf16 bound (two bf16 roundings of fp32 sums in different orders).
// The weights are made on the host by a hash of the index (a 1.2 GB head in about a second).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/kernels/small_m_linear.h"
#include "cuda/matmul.h"
#include "hashed_weights.h"
#include "test_helpers.h"

namespace surogate::cuda::testing {
namespace {

struct Shape {
  int64_t out, in;
};

TEST(CudaSmallMLinear, QwenShapesAgainstTheCpuProductAndCublas) {
  SKIP_WITHOUT_GPU();
  Matmul matmul;
  for (const Shape& s : {Shape{4096, 4096}, Shape{12288, 4096}, Shape{4096, 12288}, Shape{151936, 4096}}) {
    std::vector<Bf16> weight_bits(static_cast<size_t>(s.out * s.in));
    for (size_t i = 0; i < weight_bits.size(); ++i) weight_bits[i] = hashed_bf16(i);
    const DeviceBuffer<Bf16> weight = to_device(weight_bits);
    const std::vector<float> x = random_floats(static_cast<size_t>(kSmallMLinearMaxRows * s.in));
    const std::vector<float> bias = random_floats(static_cast<size_t>(s.out));
    const DeviceBuffer<Bf16> device_x = device_bf16(x), device_bias = device_bf16(bias);
    const std::vector<int64_t> columns = sampled_columns(s.out);
    for (int64_t rows = 1; rows <= kSmallMLinearMaxRows; ++rows) {
      for (bool with_bias : {false, true}) {
        const SmallMLinearShape shape{.rows = rows, .out = s.out, .in = s.in};
        ASSERT_TRUE(small_m_linear_supported(shape, device_x.data(), weight.data()));
        DeviceBuffer<Bf16> out(static_cast<size_t>(rows * s.out)), reference_out(static_cast<size_t>(rows * s.out));
        out.poison();
        const __nv_bfloat16* bias_pointer = with_bias ? bf16_ptr(device_bias) : nullptr;
        small_m_linear(bf16_ptr(out), bf16_ptr(device_x), bf16_ptr(weight), bias_pointer,
                       static_cast<const __nv_bfloat16*>(nullptr), shape, nullptr);
        matmul.run({.m = rows, .n = s.out, .k = s.in, .transpose_b = true, .has_bias = with_bias},
                   reference_out.data(), bf16_ptr(device_x), bf16_ptr(weight), bias_pointer, nullptr);
        synchronize();
        const std::vector<float> got = download_bf16(out);
        std::vector<double> expected;
        std::vector<float> got_sampled;
        for (int64_t m = 0; m < rows; ++m) {
          for (int64_t column : columns) {
            double sum = with_bias ? bias[static_cast<size_t>(column)] : 0.0;
            const Bf16* w = weight_bits.data() + column * s.in;
            const float* row = x.data() + m * s.in;
            for (int64_t k = 0; k < s.in; ++k) sum += static_cast<double>(bf16_to_float(w[k])) * row[k];
            expected.push_back(sum);
            got_sampled.push_back(got[static_cast<size_t>(m * s.out + column)]);
          }
        }
        const std::string where = "N=" + std::to_string(s.out) + " K=" + std::to_string(s.in) +
                                  " M=" + std::to_string(rows) + (with_bias ? " with bias" : "");
        EXPECT_LT(relative_error(got_sampled, expected), 4e-3) << where;
        EXPECT_LT(relative_error(got, download_bf16(reference_out)), 1e-2) << where << " against cuBLASLt";
      }
    }
  }
}

// alpha · x · Wᵀ + addend (linear_add's form, LoRA's scale) on a width that ends in a partial
// block (N = 1000), and the shape rule.
TEST(CudaSmallMLinear, ScaleAndAddendAndTheShapeRule) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 5, out_width = 1000, in = 264;
  const std::vector<float> x = random_floats(rows * in), w = random_floats(out_width * in),
                           addend = random_floats(rows * out_width);
  const DeviceBuffer<Bf16> device_x = device_bf16(x), device_w = device_bf16(w), device_addend = device_bf16(addend);
  DeviceBuffer<Bf16> out(static_cast<size_t>(rows * out_width));
  out.poison();
  const SmallMLinearShape shape{.rows = rows, .out = out_width, .in = in, .alpha = 0.25f};
  small_m_linear(bf16_ptr(out), bf16_ptr(device_x), bf16_ptr(device_w), static_cast<const __nv_bfloat16*>(nullptr),
                 bf16_ptr(device_addend), shape, nullptr);
  synchronize();
  std::vector<double> expected(static_cast<size_t>(rows * out_width));
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < out_width; ++n) {
      double sum = 0.0;
      for (int64_t k = 0; k < in; ++k) sum += static_cast<double>(x[m * in + k]) * w[n * in + k];
      expected[static_cast<size_t>(m * out_width + n)] = 0.25 * sum + addend[static_cast<size_t>(m * out_width + n)];
    }
  }
  EXPECT_LT(relative_error(download_bf16(out), expected), 4e-3);
  EXPECT_FALSE(small_m_linear_supported({.rows = 9, .out = 64, .in = 64}, device_x.data(), device_w.data()));
  EXPECT_FALSE(small_m_linear_supported({.rows = 1, .out = 64, .in = 60}, device_x.data(), device_w.data()));
  EXPECT_FALSE(small_m_linear_supported({.rows = 1, .out = 64, .in = 64}, bf16_ptr(device_x) + 1, device_w.data()));
  EXPECT_TRUE(small_m_linear_supported({.rows = 8, .out = 64, .in = 64}, device_x.data(), device_w.data()));
}

}  // namespace
}  // namespace surogate::cuda::testing
