// The unmerged adapters' forward (cuda/kernels/low_rank_products.h) against a float64 reference on
// the same bf16 inputs: out_i = scale · T(x · A_iᵀ) · B_iᵀ. Shapes: a GRPO rollout step's q/k/v of
// Qwen3-1.7B (512 rows, K 2048, ranks 16, widths 2048 / 1024 / 1024), one row, 37 rows (a partial
// 16-row tile and a partial 64-row tile), ranks 16 / 32 / 64 (Σ up to 96), widths ending in a partial
// 128-column chunk, K = 6144 (down_proj). Bound per element: the kernel rounds u to bf16 (2^-9 of
// each |u_r| at most) and the output (2^-9 of it), so |out − ref| ≤ 2^-8 · scale · Σ_r |u_r · B_r|
// plus 2^-8 · |ref| (fp32 sums over K add far less). Each output's largest entry must be well above
// zero (no vacuous check). The warps' sums meet in a fixed order: two launches give the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda/kernels/low_rank_products.h"
#include "test_helpers.h"

namespace surogate::cuda::testing {
namespace {

struct Case {
  int64_t rows, in;
  std::vector<int64_t> ranks, widths;
};

void check(const Case& c, float scale) {
  SCOPED_TRACE(::testing::Message() << c.rows << " rows, K " << c.in << ", " << c.ranks.size() << " adapters");
  const int count = static_cast<int>(c.ranks.size());
  ASSERT_TRUE(low_rank_products_supported(c.rows, c.in, c.ranks.data(), c.widths.data(), count));
  const std::vector<float> x = random_floats(static_cast<size_t>(c.rows * c.in));
  const DeviceBuffer<Bf16> x_device = device_bf16(x);
  std::vector<std::vector<float>> a, b;
  std::vector<DeviceBuffer<Bf16>> a_device, b_device, out_device;
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    a.push_back(random_floats(static_cast<size_t>(c.ranks[i] * c.in), 0.1f));
    b.push_back(random_floats(static_cast<size_t>(c.widths[i] * c.ranks[i])));
    a_device.push_back(device_bf16(a.back()));
    b_device.push_back(device_bf16(b.back()));
    out_device.push_back(device_bf16(std::vector<float>(static_cast<size_t>(c.rows * c.widths[i]), NAN)));
    total += c.ranks[i];
  }
  DeviceBuffer<std::byte> scratch(low_rank_products_scratch_bytes(c.rows, total, c.in));
  DeviceBuffer<int> counters(static_cast<size_t>(low_rank_products_counters(c.rows)));
  CUDA_CHECK(cudaMemset(counters.data(), 0, counters.bytes()));
  std::vector<LowRankAdapter<__nv_bfloat16>> adapters;
  for (int i = 0; i < count; ++i) {
    adapters.push_back({reinterpret_cast<const __nv_bfloat16*>(a_device[i].data()),
                        reinterpret_cast<const __nv_bfloat16*>(b_device[i].data()),
                        reinterpret_cast<__nv_bfloat16*>(out_device[i].data()), c.ranks[i], c.widths[i]});
  }
  const auto* x_bits = reinterpret_cast<const __nv_bfloat16*>(x_device.data());
  ASSERT_TRUE(low_rank_products_aligned(adapters.data(), count, x_bits, scratch.data()));
  const LowRankShape shape{.rows = c.rows, .in = c.in, .scale = scale};
  low_rank_products(adapters.data(), count, x_bits, shape, scratch.data(), counters.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::vector<Bf16>> first;
  for (const auto& out : out_device) first.push_back(out.download());
  low_rank_products(adapters.data(), count, x_bits, shape, scratch.data(), counters.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(out_device[i].download(), first[i]) << "adapter " << i << ": a second launch gave other bits";
    EXPECT_EQ(counters.download(), std::vector<int>(counters.size(), 0)) << "the counters are left zero";
    const int64_t rank = c.ranks[i], width = c.widths[i];
    std::vector<double> u(static_cast<size_t>(c.rows * rank));
    for (int64_t m = 0; m < c.rows; ++m) {
      for (int64_t r = 0; r < rank; ++r) {
        double sum = 0.0;
        for (int64_t k = 0; k < c.in; ++k) sum += static_cast<double>(x[m * c.in + k]) * a[i][r * c.in + k];
        u[m * rank + r] = sum;
      }
    }
    const std::vector<float> got = from_bf16(first[i]);
    double largest = 0.0, worst_ratio = 0.0;
    for (int64_t m = 0; m < c.rows; ++m) {
      for (int64_t n = 0; n < width; ++n) {
        double want = 0.0, magnitude = 0.0;
        for (int64_t r = 0; r < rank; ++r) {
          const double term = u[m * rank + r] * b[i][n * rank + r];
          want += term;
          magnitude += std::abs(term);
        }
        want *= scale;
        magnitude *= std::abs(scale);
        const double bound = std::ldexp(1.0, -8) * (magnitude + std::abs(want)) + 1e-6;
        const double error = std::abs(static_cast<double>(got[m * width + n]) - want);
        ASSERT_TRUE(std::isfinite(got[m * width + n])) << "adapter " << i << " row " << m << " column " << n;
        worst_ratio = std::max(worst_ratio, error / bound);
        largest = std::max(largest, std::abs(want));
      }
    }
    EXPECT_LE(worst_ratio, 1.0) << "adapter " << i << ": the worst error is that multiple of its bound";
    EXPECT_GT(largest, 0.1) << "adapter " << i;
  }
}

TEST(LowRankProducts, RolloutStepOfQwen3_1_7B) {
  SKIP_WITHOUT_GPU();
  check({512, 2048, {16, 16, 16}, {2048, 1024, 1024}}, 2.0f);
}

TEST(LowRankProducts, PartialTilesRanksAndLongK) {
  SKIP_WITHOUT_GPU();
  check({1, 2048, {16, 16}, {6144, 6144}}, 2.0f);
  check({37, 512, {16, 32, 48}, {264, 72, 136}}, 0.5f);
  check({70, 6144, {64}, {1000}}, 1.0f);
  check({130, 256, {32, 64}, {8, 2056}}, -1.5f);
}

TEST(LowRankProducts, RefusesShapesTheKernelsDoNotTake) {
  const int64_t r16[] = {16}, r8[] = {8}, r80[] = {80}, w8[] = {8}, w12[] = {12};
  EXPECT_TRUE(low_rank_products_supported(1024, 64, r16, w8, 1));
  EXPECT_FALSE(low_rank_products_supported(1025, 64, r16, w8, 1));  // a prefill's rows: cuBLASLt
  EXPECT_FALSE(low_rank_products_supported(1, 48, r16, w8, 1));     // K not a multiple of 32
  EXPECT_FALSE(low_rank_products_supported(1, 64, r8, w8, 1));      // rank not a multiple of 16
  EXPECT_FALSE(low_rank_products_supported(1, 64, r80, w8, 1));     // rank above 64
  EXPECT_FALSE(low_rank_products_supported(1, 64, r16, w12, 1));    // width not a multiple of 8
  const int64_t r48[] = {48, 48, 16}, w[] = {8, 8, 8};
  EXPECT_FALSE(low_rank_products_supported(1, 64, r48, w, 3));      // Σ ranks above 96
  EXPECT_FALSE(low_rank_products_supported(1, 64, r16, w8, 0));
}

}  // namespace
}  // namespace surogate::cuda::testing
