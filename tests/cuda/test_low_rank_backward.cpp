// The fused low-rank backward (cuda/kernels/low_rank_backward.h) vs a float64 reference on the same
// bf16 inputs: d_x = scale · d_out · W and d_W = scale · d_outᵀ · x (+ d_W). Shapes: one token,
// token and column counts that leave partial tiles, every column-tiling the launcher picks (few
// and many columns), rank 16 and 32, with and without accumulation, and every tiling it accepts.
// Tolerance 1e-2 of each output's largest entry (bf16 output rounding; fp32 sums over up to 4096
// terms). The partial sums are added in a fixed order, so two runs give the same bits.
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

// Random bf16 inputs of a case on the device, and the float64 results of the product's backward.
struct Problem {
  Case c;
  float scale;
  std::vector<float> start;  // d_W before an accumulating run
  DeviceBuffer<Bf16> d_out, x, weight;
  std::vector<double> d_x, d_weight;

  Problem(const Case& c, float scale) : c(c), scale(scale) {
    const std::vector<float> dy = from_bf16(to_bf16(random_floats(c.tokens * c.columns))),
                             input = from_bf16(to_bf16(random_floats(c.tokens * c.rank))),
                             w = from_bf16(to_bf16(random_floats(c.columns * c.rank)));
    start = from_bf16(to_bf16(random_floats(c.columns * c.rank)));
    d_out = device_bf16(dy);
    x = device_bf16(input);
    weight = device_bf16(w);
    d_x.assign(c.tokens * c.rank, 0.0);
    d_weight.assign(c.columns * c.rank, 0.0);
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t n = 0; n < c.columns; ++n) {
        const double g = dy[t * c.columns + n];
        for (int r = 0; r < c.rank; ++r) {
          d_x[t * c.rank + r] += scale * g * w[n * c.rank + r];
          d_weight[n * c.rank + r] += scale * g * input[t * c.rank + r];
        }
      }
    }
    if (c.accumulate) {
      for (size_t i = 0; i < d_weight.size(); ++i) d_weight[i] += start[i];
    }
  }

  LowRankBackwardShape shape(const LowRankTiling& tiling = {}) const {
    return {.tokens = c.tokens, .columns = c.columns, .rank = c.rank, .scale = scale, .accumulate = c.accumulate,
            .tiling = tiling};
  }

  // One run on poisoned outputs and workspace (d_W starts from `start`): (d_x, d_W).
  std::pair<std::vector<Bf16>, std::vector<Bf16>> run(const LowRankBackwardShape& shape) const {
    EXPECT_TRUE(low_rank_backward_supported(shape, d_out.data(), x.data(), weight.data()));
    DeviceBuffer<Bf16> out_x(d_x.size());
    DeviceBuffer<Bf16> out_weight = to_device(to_bf16(start));
    DeviceBuffer<float> workspace(low_rank_backward_workspace_floats(shape));
    out_x.poison();
    workspace.poison();
    low_rank_backward(bf16_ptr(out_x), bf16_ptr(out_weight), workspace.data(), bf16_ptr(d_out), bf16_ptr(x),
                      bf16_ptr(weight), shape, nullptr);
    synchronize();
    return {out_x.download(), out_weight.download()};
  }
};

TEST(CudaLowRankBackward, MatchesTheReferenceAndIsDeterministic) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : {Case{1, 8, 16, false}, Case{37, 72, 16, true}, Case{300, 1000, 32, false},
                        Case{4096, 1024, 16, true}, Case{513, 4096, 16, false}, Case{2048, 12288, 16, true},
                        Case{700, 264, 32, true}}) {
    SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.columns << " columns, rank " << c.rank
                                      << (c.accumulate ? ", accumulate" : ""));
    const Problem problem(c, 2.0f);
    const auto [x0, w0] = problem.run(problem.shape());
    const auto [x1, w1] = problem.run(problem.shape());
    EXPECT_LT(relative_error(from_bf16(x0), problem.d_x), 1e-2) << "d_x";
    EXPECT_LT(relative_error(from_bf16(w0), problem.d_weight), 1e-2) << "d_weight";
    EXPECT_EQ(x0, x1) << "d_x differs between runs";
    EXPECT_EQ(w0, w1) << "d_weight differs between runs";
  }
}

// Every tiling the launcher accepts (column tiles × token tiles × stages) gives the reference's
// result on shapes with partial tiles (the tilings sum in different orders: same tolerance).
TEST(CudaLowRankBackward, EveryTilingMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : {Case{300, 1000, 16, true}, Case{1100, 4096, 32, false}}) {
    const Problem problem(c, 1.0f);
    for (int column_tiles : {1, 2, 4}) {
      for (int token_tiles : {1, 2, 4}) {
        for (int stages : {2, 3, 4}) {
          SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.columns << " columns, rank " << c.rank
                                            << ", tiling " << column_tiles << "/" << token_tiles << "/" << stages);
          const auto [out_x, out_weight] = problem.run(problem.shape({column_tiles, token_tiles, stages}));
          EXPECT_LT(relative_error(from_bf16(out_x), problem.d_x), 1e-2) << "d_x";
          EXPECT_LT(relative_error(from_bf16(out_weight), problem.d_weight), 1e-2) << "d_weight";
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
