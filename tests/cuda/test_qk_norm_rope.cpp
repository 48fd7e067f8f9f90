// Fused per-head q/k RMSNorm + RoPE (Qwen3) vs a float64 composition of the two ops.
// Tolerances: bf16 outputs 4e-3 (one bf16 rounding, fp32 math); rstd and dweight 1e-4 (fp32
// accumulation order); dweight bitwise reproducible.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "cuda/kernels/qk_norm_rope.h"
#include "test_helpers.h"

namespace surogate::cuda::testing {
namespace {

TEST(CudaQkNormRope, ForwardBackwardMatchesNormThenRope) {
  SKIP_WITHOUT_GPU();
  for (auto [tokens, heads, head_dim] : {std::tuple<int64_t, int, int>{1, 1, 16}, {37, 3, 64}, {301, 8, 128},
                                         {5, 2, 256}}) {
    QkNormRopeShape shape{.tokens = tokens, .heads = heads, .head_dim = head_dim, .epsilon = 1e-6f, .scaling = 1.1f};
    const int64_t rows = tokens * heads, count = rows * head_dim;
    const int half = head_dim / 2;
    std::vector<float> inv_freq(half);
    for (int i = 0; i < half; ++i) inv_freq[i] = std::pow(1e6f, -2.0f * i / head_dim);
    std::vector<int32_t> positions(tokens);
    for (int64_t t = 0; t < tokens; ++t) positions[t] = static_cast<int32_t>((t % 29) * 53);
    auto x = random_floats(count, 3.0f), w = random_floats(head_dim), dy = random_floats(count);
    auto device_x = device_bf16(x), device_w = device_bf16(w), device_dy = device_bf16(dy);
    auto device_inv_freq = to_device(inv_freq);
    auto device_positions = to_device(positions);
    DeviceBuffer<Bf16> out(count), dx(count);
    DeviceBuffer<float> rstd(rows), scratch(qk_norm_rope_backward_scratch_floats(shape));
    out.poison();
    rstd.poison();
    qk_norm_rope_forward(bf16_ptr(out), rstd.data(), bf16_ptr(device_x), bf16_ptr(device_w), device_inv_freq.data(),
                         device_positions.data(), shape, nullptr);
    auto initial = random_fp32(head_dim, -1.0f, 1.0f);
    std::vector<float> dweight_runs[2];
    for (auto& result : dweight_runs) {
      auto dweight = to_device(initial);
      dx.poison();
      qk_norm_rope_backward(bf16_ptr(dx), dweight.data(), scratch.data(), bf16_ptr(device_dy), bf16_ptr(device_x),
                            bf16_ptr(device_w), rstd.data(), device_inv_freq.data(), device_positions.data(), shape,
                            nullptr);
      synchronize();
      result = dweight.download();
    }
    const std::vector<Bf16> dx_with_dweight = dx.download();
    dx.poison();  // a frozen weight (null dweight, no scratch): the same dx, bit for bit
    qk_norm_rope_backward(bf16_ptr(dx), nullptr, nullptr, bf16_ptr(device_dy), bf16_ptr(device_x), bf16_ptr(device_w),
                          rstd.data(), device_inv_freq.data(), device_positions.data(), shape, nullptr);
    synchronize();
    const std::vector<Bf16> dx_frozen = dx.download();

    std::vector<double> expected(count), expected_dx(count), expected_rstd(rows), expected_dw(initial.begin(), initial.end());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t base = r * head_dim;
      double sum = 0.0;
      for (int c = 0; c < head_dim; ++c) sum += double(x[base + c]) * x[base + c];
      const double inv = 1.0 / std::sqrt(sum / head_dim + shape.epsilon);
      expected_rstd[r] = inv;
      std::vector<double> normalized(head_dim), dn(head_dim);
      for (int c = 0; c < head_dim; ++c) normalized[c] = x[base + c] * inv;
      for (int i = 0; i < half; ++i) {
        const double angle = double(float(positions[r / heads]) * inv_freq[i]);
        const double cosine = std::cos(angle) * shape.scaling, sine = std::sin(angle) * shape.scaling;
        const double low = normalized[i] * w[i], high = normalized[i + half] * w[i + half];
        expected[base + i] = low * cosine - high * sine;
        expected[base + i + half] = high * cosine + low * sine;
        dn[i] = dy[base + i] * cosine + dy[base + i + half] * sine;
        dn[i + half] = dy[base + i + half] * cosine - dy[base + i] * sine;
      }
      double dot = 0.0;
      for (int c = 0; c < head_dim; ++c) {
        dot += dn[c] * w[c] * normalized[c];
        expected_dw[c] += dn[c] * normalized[c];
      }
      for (int c = 0; c < head_dim; ++c) expected_dx[base + c] = inv * (dn[c] * w[c] - normalized[c] * dot / head_dim);
    }
    const std::string where = "tokens=" + std::to_string(tokens) + " head_dim=" + std::to_string(head_dim);
    EXPECT_LT(relative_error(download_bf16(out), expected), 4e-3) << where;
    EXPECT_LT(relative_error(rstd.download(), expected_rstd), 1e-4) << where;
    EXPECT_LT(relative_error(download_bf16(dx), expected_dx), 4e-3) << where;
    EXPECT_LT(relative_error(dweight_runs[0], expected_dw), 1e-4) << where;
    EXPECT_EQ(dweight_runs[0], dweight_runs[1]) << "dweight not deterministic, " << where;
    EXPECT_EQ(dx_frozen, dx_with_dweight) << "dx without dweight differs, " << where;
  }
}

// The pair launch (q and k of one layer in one grid) equals the two single launches bit for bit,
// at a decode step's shape (one token, 32 and 8 heads of 128) and at a few tokens of odd heads.
TEST(CudaQkNormRope, PairLaunchEqualsTheTwoLaunches) {
  SKIP_WITHOUT_GPU();
  for (auto [tokens, q_heads, k_heads, head_dim] :
       {std::tuple<int64_t, int, int, int>{1, 32, 8, 128}, {2, 32, 8, 128}, {7, 3, 1, 64}, {3, 5, 2, 16}}) {
    const QkNormRopeShape q_shape{.tokens = tokens, .heads = q_heads, .head_dim = head_dim, .epsilon = 1e-6f, .scaling = 1.1f};
    QkNormRopeShape k_shape = q_shape;
    k_shape.heads = k_heads;
    std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
    for (int i = 0; i < head_dim / 2; ++i) inv_freq[i] = std::pow(1e6f, -2.0f * i / head_dim);
    std::vector<int32_t> positions(static_cast<size_t>(tokens));
    for (int64_t t = 0; t < tokens; ++t) positions[t] = static_cast<int32_t>(700 + 13 * t);
    const int64_t q_count = tokens * q_heads * head_dim, k_count = tokens * k_heads * head_dim;
    auto q_x = device_bf16(random_floats(q_count, 3.0f)), k_x = device_bf16(random_floats(k_count, 3.0f));
    auto q_w = device_bf16(random_floats(head_dim)), k_w = device_bf16(random_floats(head_dim));
    auto device_inv_freq = to_device(inv_freq);
    auto device_positions = to_device(positions);
    DeviceBuffer<Bf16> q_single(q_count), k_single(k_count), q_pair(q_count), k_pair(k_count);
    DeviceBuffer<float> q_rstd_single(tokens * q_heads), k_rstd_single(tokens * k_heads), q_rstd_pair(tokens * q_heads),
        k_rstd_pair(tokens * k_heads);
    for (auto* buffer : {&q_pair, &k_pair}) buffer->poison();
    q_rstd_pair.poison();
    k_rstd_pair.poison();
    qk_norm_rope_forward(bf16_ptr(q_single), q_rstd_single.data(), bf16_ptr(q_x), bf16_ptr(q_w), device_inv_freq.data(),
                         device_positions.data(), q_shape, nullptr);
    qk_norm_rope_forward(bf16_ptr(k_single), k_rstd_single.data(), bf16_ptr(k_x), bf16_ptr(k_w), device_inv_freq.data(),
                         device_positions.data(), k_shape, nullptr);
    qk_norm_rope_forward_pair(QkNormRopeTensor<__nv_bfloat16>{bf16_ptr(q_pair), q_rstd_pair.data(), bf16_ptr(q_x), bf16_ptr(q_w)},
                              QkNormRopeTensor<__nv_bfloat16>{bf16_ptr(k_pair), k_rstd_pair.data(), bf16_ptr(k_x), bf16_ptr(k_w)},
                              device_inv_freq.data(), device_positions.data(), q_shape, k_heads, nullptr);
    synchronize();
    const std::string where = "tokens " + std::to_string(tokens) + " heads " + std::to_string(q_heads) + "/" +
                              std::to_string(k_heads) + " head_dim " + std::to_string(head_dim);
    EXPECT_EQ(download_bf16(q_pair), download_bf16(q_single)) << where;
    EXPECT_EQ(download_bf16(k_pair), download_bf16(k_single)) << where;
    EXPECT_EQ(q_rstd_pair.download(), q_rstd_single.download()) << where;
    EXPECT_EQ(k_rstd_pair.download(), k_rstd_single.download()) << where;
  }
}

}  // namespace
}  // namespace surogate::cuda::testing
