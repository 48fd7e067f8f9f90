// cuBLASLt wrapper vs a float64 CPU product, for the three products of a linear layer, the bias
// epilogue, fp32 accumulation and a separate bf16 addend (C ≠ D, beta = 1). Tolerance: 1e-2
// relative (bf16 output rounding plus fp32 accumulation order); fp32 outputs 1e-4 (accumulation
// order only).
#include <gtest/gtest.h>

#include "cuda/matmul.h"
#include "test_helpers.h"

namespace surogate::cuda::testing {
namespace {

// Row-major reference: out[m, n] = Σ_k A(m, k) · B(k, n) with the stored layouts of matmul.h.
std::vector<double> reference_product(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
                                      int64_t k, bool transpose_a, bool transpose_b) {
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = transpose_a ? a[p * m + i] : a[i * k + p];
        const double y = transpose_b ? b[j * k + p] : b[p * n + j];
        sum += x * y;
      }
      out[i * n + j] = sum;
    }
  return out;
}

struct Case {
  int64_t m, n, k;
};

const Case kCases[] = {{1, 8, 8}, {37, 53, 71}, {128, 256, 64}, {257, 129, 96}, {64, 1000, 200}};

TEST(CudaMatmul, AllTransposesBf16Output) {
  SKIP_WITHOUT_GPU();
  Matmul matmul;
  for (const Case& c : kCases) {
    for (int mode = 0; mode < 4; ++mode) {
      const bool transpose_a = mode & 1, transpose_b = mode & 2;
      auto a = random_floats(c.m * c.k), b = random_floats(c.k * c.n);
      auto device_a = device_bf16(a), device_b = device_bf16(b);
      DeviceBuffer<Bf16> out(c.m * c.n);
      out.poison();
      MatmulShape shape{.m = c.m, .n = c.n, .k = c.k, .transpose_a = transpose_a, .transpose_b = transpose_b};
      matmul.run(shape, out.data(), bf16_ptr(device_a), bf16_ptr(device_b), nullptr, nullptr);
      synchronize();
      const double error = relative_error(download_bf16(out), reference_product(a, b, c.m, c.n, c.k, transpose_a, transpose_b));
      EXPECT_LT(error, 1e-2) << "M=" << c.m << " N=" << c.n << " K=" << c.k << " transpose_a=" << transpose_a
                             << " transpose_b=" << transpose_b;
    }
  }
}

TEST(CudaMatmul, BiasEpilogue) {
  SKIP_WITHOUT_GPU();
  Matmul matmul;
  for (const Case& c : kCases) {
    auto x = random_floats(c.m * c.k), w = random_floats(c.n * c.k), bias = random_floats(c.n);
    auto device_x = device_bf16(x), device_w = device_bf16(w), device_bias = device_bf16(bias);
    DeviceBuffer<Bf16> out(c.m * c.n);
    out.poison();
    MatmulShape shape{.m = c.m, .n = c.n, .k = c.k, .transpose_b = true, .has_bias = true};
    matmul.run(shape, out.data(), bf16_ptr(device_x), bf16_ptr(device_w), bf16_ptr(device_bias), nullptr);
    synchronize();
    auto reference = reference_product(x, w, c.m, c.n, c.k, false, true);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) reference[i * c.n + j] += bias[j];
    EXPECT_LT(relative_error(download_bf16(out), reference), 1e-2) << "M=" << c.m << " N=" << c.n << " K=" << c.k;
  }
}

TEST(CudaMatmul, WeightGradientAccumulatesInFp32) {
  SKIP_WITHOUT_GPU();
  Matmul matmul;
  for (const Case& c : kCases) {
    // dW[N, K] += dY[M, N]ᵀ · X[M, K]
    auto dy = random_floats(c.m * c.n), x = random_floats(c.m * c.k);
    auto initial = random_fp32(c.n * c.k, -1.0f, 1.0f);
    auto device_dy = device_bf16(dy), device_x = device_bf16(x);
    auto dw = to_device(initial);
    MatmulShape shape{.m = c.n, .n = c.k, .k = c.m, .transpose_a = true, .output = MatmulOutput::Float32,
                      .accumulate = true};
    matmul.run(shape, dw.data(), bf16_ptr(device_dy), bf16_ptr(device_x), nullptr, nullptr);
    synchronize();
    auto reference = reference_product(dy, x, c.n, c.k, c.m, true, false);
    for (size_t i = 0; i < reference.size(); ++i) reference[i] += initial[i];
    EXPECT_LT(relative_error(dw.download(), reference), 1e-4) << "M=" << c.m << " N=" << c.n << " K=" << c.k;
  }
  EXPECT_EQ(matmul.cached_plans(), std::size(kCases));
}

// out = product + addend with the addend a separate bf16 tensor (linear_add's forward and
// linear_backward_input_add's product): the addend is read, never written; a second addend
// pointer of the same alignment reuses the plan.
TEST(CudaMatmul, SeparateAddendIsAddedOnce) {
  SKIP_WITHOUT_GPU();
  Matmul matmul;
  for (const Case& c : kCases) {
    for (bool transpose_b : {true, false}) {  // forward x·Wᵀ + c, input gradient dy·W + c
      auto a = random_floats(c.m * c.k), b = random_floats(c.k * c.n), addend = random_floats(c.m * c.n, 4.0f);
      auto device_a = device_bf16(a), device_b = device_bf16(b), device_addend = device_bf16(addend);
      DeviceBuffer<Bf16> out(c.m * c.n);
      out.poison();
      MatmulShape shape{.m = c.m, .n = c.n, .k = c.k, .transpose_b = transpose_b, .has_addend = true};
      matmul.run(shape, out.data(), bf16_ptr(device_a), bf16_ptr(device_b), nullptr, nullptr, 1.0f,
                 device_addend.data());
      synchronize();
      auto reference = reference_product(a, b, c.m, c.n, c.k, false, transpose_b);
      for (size_t i = 0; i < reference.size(); ++i) reference[i] += addend[i];
      EXPECT_LT(relative_error(download_bf16(out), reference), 1e-2)
          << "M=" << c.m << " N=" << c.n << " K=" << c.k << " transpose_b=" << transpose_b;
      EXPECT_EQ(download_bf16(device_addend), addend) << "the addend was written";
    }
  }
  EXPECT_EQ(matmul.cached_plans(), 2 * std::size(kCases));
}

}  // namespace
}  // namespace surogate::cuda::testing
