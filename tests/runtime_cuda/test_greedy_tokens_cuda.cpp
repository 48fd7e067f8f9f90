// cuda::greedy_tokens (cuda/kernels/greedy_tokens.h) against its CPU reference ops::greedy_tokens
// on the same values (bf16-exact, and fp32): rows of a real vocabulary (151936) and of odd sizes,
// with the maximum tied across threads, warps and one thread's slice (the lowest index wins), NaN
// or +inf anywhere (-1), -inf beside finite values, a row of -inf only (0) and a constant row (0).
// Exact: the same index, and the expected one named per row. Both paths: greedy_tokens (a cluster of
// blocks per row on sm_90+, so the ties above also fall across blocks) and greedy_tokens_one_block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/kernels/greedy_tokens.h"
#include "cuda/test_helpers.h"
#include "ops/greedy_tokens.h"

namespace surogate::cuda::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

struct Row {
  std::vector<std::pair<int64_t, float>> set;  // (index, value) written over the row's values
  int32_t expected;
  std::optional<float> fill = {};  // every value (before `set`); none: random in [-1, 1]
};

// Rows of `vocab`, each random then its `set` values written; the expected index per row.
std::vector<Row> rows_of(int64_t vocab) {
  const int64_t last = vocab - 1;
  return {
      {{{last, 4.0f}}, static_cast<int32_t>(last)},
      {{{last, 4.0f}, {vocab / 2, 4.0f}, {vocab / 3, 4.0f}}, static_cast<int32_t>(vocab / 3)},  // across warps
      {{{1, 3.0f}, {1 + 512, 3.0f}}, 1},                                                        // one thread's slice
      {{{33, 3.0f}, {2, 3.0f}, {64, 3.0f}}, 2},                                                  // one warp
      {{{vocab / 2, kNan}, {3, 5.0f}}, -1},
      {{{last, kInf}}, -1},
      {{{0, kNan}}, -1},
      {{{5, -kInf}, {6, -kInf}, {7, 2.0f}}, 7},
      {{{0, -kInf}, {last, kNan}}, -1},
      {{{0, -2.0f}}, 1, 0.0f},  // constant 0 but index 0: the first maximum is index 1
      {{}, 0, -kInf},           // -inf only: index 0, as generate::argmax
  };
}

std::vector<float> values_of(const std::vector<Row>& rows, int64_t vocab) {
  std::vector<float> values = random_floats(static_cast<size_t>(vocab) * rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    float* row = values.data() + r * static_cast<size_t>(vocab);
    if (rows[r].fill) std::fill(row, row + vocab, *rows[r].fill);
    for (const auto& [index, value] : rows[r].set) row[index] = value;
  }
  return values;
}

void check(int64_t vocab, bool bf16, bool one_block) {
  const std::vector<Row> rows = rows_of(vocab);
  std::vector<float> values = values_of(rows, vocab);
  if (bf16) values = from_bf16(to_bf16(values));  // the CPU sees the GPU's values exactly
  const int64_t count = static_cast<int64_t>(rows.size());
  std::vector<int32_t> expected(rows.size());
  ops::greedy_tokens(values.data(), count, vocab, expected.data());
  DeviceBuffer<int32_t> tokens(rows.size());
  if (bf16) {
    const DeviceBuffer<Bf16> logits = device_bf16(values);
    (one_block ? greedy_tokens_one_block<__nv_bfloat16> : greedy_tokens<__nv_bfloat16>)(tokens.data(), bf16_ptr(logits),
                                                                                      count, vocab, nullptr);
  } else {
    const DeviceBuffer<float> logits = to_device(values);
    (one_block ? greedy_tokens_one_block<float> : greedy_tokens<float>)(tokens.data(), logits.data(), count, vocab,
                                                                      nullptr);
  }
  synchronize();
  const std::vector<int32_t> got = tokens.download();
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(expected[r], rows[r].expected) << "the CPU reference, vocab " << vocab << " row " << r;
    EXPECT_EQ(got[r], expected[r]) << "vocab " << vocab << " row " << r << (bf16 ? " bf16" : " fp32")
                                << (one_block ? " one block" : "");
  }
}

TEST(CudaGreedyTokens, EqualsTheCpuReferenceWithTiesNanAndInfinities) {
  SKIP_WITHOUT_GPU();
  for (int64_t vocab : {int64_t{151936}, int64_t{1000}, int64_t{600}}) {
    for (bool one_block : {false, true}) {
      check(vocab, true, one_block);
      check(vocab, false, one_block);
    }
  }
}

}  // namespace
}  // namespace surogate::cuda::testing
