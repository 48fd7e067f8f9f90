// The fused low-rank backward (cuda/kernels/low_rank_backward.h) vs a float64 reference on the same
// bf16 inputs: d_x = scale · d_out · W and d_W = scale · d_outᵀ · x (+ d_W). Shapes: one token,
// token and column counts that leave partial tiles, every column-tiling the launcher picks (few
// and many columns), rank 16 and 32, with and without accumulation. Tolerance 1e-2 of each
// output's largest entry (bf16 output rounding; fp32 sums over up to 4096 terms). The partial
// sums are added in a fixed order, so two runs give the same bits.
#include <gtest/gtest.h>

#include "cuda/kernels/low_rank_backward.h"
#include "test_helpers.h"

namespace surogate::cuda::testing {
namespace {

struct Case {
  int64_t tokens, columns;
  int rank;
  bool accumulate;
};

TEST(CudaLowRankBackward, MatchesTheReferenceAndIsDeterministic) {
  SKIP_WITHOUT_GPU();
  const float scale = 2.0f;
  for (const Case& c : {Case{1, 8, 16, false}, Case{37, 72, 16, true}, Case{300, 1000, 32, false},
                        Case{4096, 1024, 16, true}, Case{513, 4096, 16, false}, Case{2048, 12288, 16, true},
                        Case{700, 264, 32, true}}) {
    SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.columns << " columns, rank " << c.rank
                                      << (c.accumulate ? ", accumulate" : ""));
    const std::vector<float> d_out = from_bf16(to_bf16(random_floats(c.tokens * c.columns))),
                             x = from_bf16(to_bf16(random_floats(c.tokens * c.rank))),
                             weight = from_bf16(to_bf16(random_floats(c.columns * c.rank))),
                             start = from_bf16(to_bf16(random_floats(c.columns * c.rank)));
    std::vector<double> d_x(c.tokens * c.rank, 0.0), d_weight(c.columns * c.rank, 0.0);
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t n = 0; n < c.columns; ++n) {
        const double dy = d_out[t * c.columns + n];
        for (int r = 0; r < c.rank; ++r) {
          d_x[t * c.rank + r] += scale * dy * weight[n * c.rank + r];
          d_weight[n * c.rank + r] += scale * dy * x[t * c.rank + r];
        }
      }
    }
    if (c.accumulate) {
      for (size_t i = 0; i < d_weight.size(); ++i) d_weight[i] += start[i];
    }
    const LowRankBackwardShape shape{.tokens = c.tokens, .columns = c.columns, .rank = c.rank, .scale = scale,
                                     .accumulate = c.accumulate};
    const DeviceBuffer<Bf16> device_d_out = device_bf16(d_out), device_x = device_bf16(x),
                             device_weight = device_bf16(weight);
    ASSERT_TRUE(low_rank_backward_supported(shape, device_d_out.data(), device_x.data(), device_weight.data()));
    DeviceBuffer<Bf16> out_x(d_x.size()), out_weight(d_weight.size());
    DeviceBuffer<float> workspace(low_rank_backward_workspace_floats(shape));
    std::vector<Bf16> runs_x[2], runs_weight[2];
    for (int run = 0; run < 2; ++run) {
      out_x.poison();
      workspace.poison();
      CUDA_CHECK(cudaMemcpy(out_weight.data(), to_bf16(start).data(), start.size() * sizeof(Bf16),
                            cudaMemcpyHostToDevice));
      low_rank_backward(bf16_ptr(out_x), bf16_ptr(out_weight), workspace.data(), bf16_ptr(device_d_out),
                        bf16_ptr(device_x), bf16_ptr(device_weight), shape, nullptr);
      synchronize();
      runs_x[run] = out_x.download();
      runs_weight[run] = out_weight.download();
    }
    EXPECT_LT(relative_error(from_bf16(runs_x[0]), d_x), 1e-2) << "d_x";
    EXPECT_LT(relative_error(from_bf16(runs_weight[0]), d_weight), 1e-2) << "d_weight";
    EXPECT_EQ(runs_x[0], runs_x[1]) << "d_x differs between runs";
    EXPECT_EQ(runs_weight[0], runs_weight[1]) << "d_weight differs between runs";
  }
}

// Every tiling the launcher accepts (column tiles × token tiles × stages) gives the reference's
// result on shapes with partial tiles (the tilings sum in different orders: same tolerance).
TEST(CudaLowRankBackward, EveryTilingMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : {Case{300, 1000, 16, true}, Case{1100, 4096, 32, false}}) {
    const std::vector<float> d_out = from_bf16(to_bf16(random_floats(c.tokens * c.columns))),
                             x = from_bf16(to_bf16(random_floats(c.tokens * c.rank))),
                             weight = from_bf16(to_bf16(random_floats(c.columns * c.rank))),
                             start = from_bf16(to_bf16(random_floats(c.columns * c.rank)));
    std::vector<double> d_x(c.tokens * c.rank, 0.0), d_weight(start.begin(), start.end());
    if (!c.accumulate) std::fill(d_weight.begin(), d_weight.end(), 0.0);
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t n = 0; n < c.columns; ++n) {
        const double dy = d_out[t * c.columns + n];
        for (int r = 0; r < c.rank; ++r) {
          d_x[t * c.rank + r] += dy * weight[n * c.rank + r];
          d_weight[n * c.rank + r] += dy * x[t * c.rank + r];
        }
      }
    }
    const DeviceBuffer<Bf16> device_d_out = device_bf16(d_out), device_x = device_bf16(x),
                             device_weight = device_bf16(weight);
    DeviceBuffer<Bf16> out_x(d_x.size()), out_weight(d_weight.size());
    for (int column_tiles : {1, 2, 4}) {
      for (int token_tiles : {1, 2, 4}) {
        for (int stages : {2, 3, 4}) {
          SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.columns << " columns, rank " << c.rank
                                            << ", tiling " << column_tiles << "/" << token_tiles << "/" << stages);
          const LowRankBackwardShape shape{.tokens = c.tokens, .columns = c.columns, .rank = c.rank, .scale = 1.0f,
                                           .accumulate = c.accumulate,
                                           .tiling = {column_tiles, token_tiles, stages}};
          ASSERT_TRUE(low_rank_backward_supported(shape, device_d_out.data(), device_x.data(), device_weight.data()));
          DeviceBuffer<float> workspace(low_rank_backward_workspace_floats(shape));
          workspace.poison();
          out_x.poison();
          CUDA_CHECK(cudaMemcpy(out_weight.data(), to_bf16(start).data(), start.size() * sizeof(Bf16),
                                cudaMemcpyHostToDevice));
          low_rank_backward(bf16_ptr(out_x), bf16_ptr(out_weight), workspace.data(), bf16_ptr(device_d_out),
                            bf16_ptr(device_x), bf16_ptr(device_weight), shape, nullptr);
          synchronize();
          EXPECT_LT(relative_error(download_bf16(out_x), d_x), 1e-2) << "d_x";
          EXPECT_LT(relative_error(download_bf16(out_weight), d_weight), 1e-2) << "d_weight";
        }
      }
    }
  }
}

TEST(CudaLowRankBackward, SaysWhatItTakes) {
  alignas(16) static const uint16_t buffer[64] = {};
  const LowRankBackwardShape rank16{.tokens = 4, .columns = 16, .rank = 16};
  EXPECT_TRUE(low_rank_backward_supported(rank16, buffer, buffer, buffer));
  EXPECT_FALSE(low_rank_backward_supported({.tokens = 4, .columns = 16, .rank = 8}, buffer, buffer, buffer));
  EXPECT_FALSE(low_rank_backward_supported({.tokens = 4, .columns = 12, .rank = 16}, buffer, buffer, buffer));
  EXPECT_FALSE(low_rank_backward_supported(rank16, buffer + 1, buffer, buffer));  // 2-byte aligned d_out
  EXPECT_FALSE(low_rank_backward_supported({.tokens = 4, .columns = 16, .rank = 16, .tiling = {3, 2, 2}}, buffer,
                                           buffer, buffer));  // 3 column tiles
  EXPECT_FALSE(low_rank_backward_supported({.tokens = 4, .columns = 16, .rank = 16, .tiling = {1, 2, 5}}, buffer,
                                           buffer, buffer));  // 5 stages
  EXPECT_EQ(low_rank_backward_workspace_floats(rank16), (1 * 4 + 1 * 16) * 16);
}

}  // namespace
}  // namespace surogate::cuda::testing
