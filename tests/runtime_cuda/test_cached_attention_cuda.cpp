// The KV-cache attention kernels (cuda/kernels/cached_attention.h: the split kernels; the
// many-rows kernel in test_cached_attention_rows_cuda.cpp) against the reference
// (ops/cached_attention.h, fp32 in, double sums) on the same values, and the binder through a plan
// (runtime/cuda_generation_ops.cpp) through a plan whose caches persist between executes.
// Error measure: max |gpu − ref| / max |ref| over the whole output (tests/cuda/test_helpers.h; a NaN,
// such as the poison left in an element no kernel wrote, fails). Tolerances:
//   fp32        1e-5    fp32 math and sums against the reference's double sums
//   bf16        5e-3    fp32 math on the same bf16 values, one rounding of the output (at most
//                       2^-8 of |out| ≤ max |out|: bf16's unit roundoff) plus fp32 noise
//   fp16        1e-3    the same with fp16's unit roundoff (2^-11)
// The caches after the append equal the reference's bit for bit (a copy, not arithmetic), and
// padding queries' outputs are exactly zero.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/kernels/cached_attention.h"
#include "cuda/kernels/qk_norm_rope.h"
#include "cuda/test_helpers.h"
#include "runtime_cuda/cached_attention_cases.h"
#include "ops/cached_attention.h"
#include "runtime_cuda/cuda_node_plan.h"

namespace surogate::cuda {
namespace {

using namespace cuda::testing;
using namespace cached_attention_cases;

template <typename E>
void expect_matches_reference(const Case& c, std::vector<int> split_counts, double tolerance) {
  const Values inputs = random_values<E>(c);
  const Values expected = reference(c, inputs);
  for (int splits : split_counts) {
    SCOPED_TRACE(::testing::Message() << "splits " << (splits == 0 ? "auto" : std::to_string(splits)));
    const Values got = run_gpu<E>(c, inputs, splits);
    EXPECT_LE(relative_error(got.out, expected.out), tolerance);
    EXPECT_TRUE(same_bits(got.k_cache, expected.k_cache)) << "k_cache after the append";
    EXPECT_TRUE(same_bits(got.v_cache, expected.v_cache)) << "v_cache after the append";
    expect_padding_zero(c, got.out);
  }
}

TEST(CachedAttentionCuda, DecodeMatchesReferenceFp32) {
  SKIP_WITHOUT_GPU();
  expect_matches_reference<float>(qwen3_decode(), {1, 7, 64, 0}, kF32Tolerance);
}

TEST(CachedAttentionCuda, DecodeMatchesReferenceBf16) {
  SKIP_WITHOUT_GPU();
  expect_matches_reference<__nv_bfloat16>(qwen3_decode(), {1, 7, 0}, kBf16Tolerance);
}

TEST(CachedAttentionCuda, DecodeMatchesReferenceFp16) {
  SKIP_WITHOUT_GPU();
  expect_matches_reference<__half>(qwen3_decode(), {0}, kF16Tolerance);
}

// 40 rows (many blocks per split choice), lengths spread over 0..700.
TEST(CachedAttentionCuda, DecodeManyRowsBf16) {
  SKIP_WITHOUT_GPU();
  Case c = qwen3_decode();
  c.slots = 48;
  c.capacity = 701;
  c.rows.clear();
  for (int32_t row = 0; row < 40; ++row) c.rows.push_back({47 - row, (row * 173) % 701, 1});
  expect_matches_reference<__nv_bfloat16>(c, {1, 0}, kBf16Tolerance);
}

// Prefill chunks of 37 positions with padding rows (n < T, n = 0) over caches holding 0..300
// tokens, for GQA ratios 1, 3, 4 and 8 and head dims 8 (the test fixtures), 64, 80 (not a power
// of two), 128 and 256.
struct Heads {
  int q_heads, kv_heads, head_dim;
};
Case prefill(Heads heads) {
  return Case{.sequence = 37, .slots = 6, .capacity = 340, .q_heads = heads.q_heads, .kv_heads = heads.kv_heads,
              .head_dim = heads.head_dim,
              .rows = {{2, 0, 37}, {0, 50, 10}, {5, 7, 0}, {3, 300, 1}, {1, 0, 0}, {4, 303, 37}}};
}
const Heads kPrefillHeads[] = {{4, 4, 64}, {6, 2, 128}, {8, 2, 128}, {8, 1, 64}, {4, 2, 8}, {2, 1, 256}, {4, 2, 80}};

TEST(CachedAttentionCuda, PrefillWithPaddingRowsFp32) {
  SKIP_WITHOUT_GPU();
  for (Heads heads : kPrefillHeads) {
    SCOPED_TRACE(::testing::Message() << heads.q_heads << "/" << heads.kv_heads << " heads, D " << heads.head_dim);
    expect_matches_reference<float>(prefill(heads), {1, 3, 0}, kF32Tolerance);
  }
}

TEST(CachedAttentionCuda, PrefillWithPaddingRowsBf16) {
  SKIP_WITHOUT_GPU();
  for (Heads heads : kPrefillHeads) {
    SCOPED_TRACE(::testing::Message() << heads.q_heads << "/" << heads.kv_heads << " heads, D " << heads.head_dim);
    expect_matches_reference<__nv_bfloat16>(prefill(heads), {1, 0}, kBf16Tolerance);
  }
}

// Sliding windows of 1 (a query sees itself only), 16 and 100 tokens, decode and prefill.
TEST(CachedAttentionCuda, SlidingWindowFp32AndBf16) {
  SKIP_WITHOUT_GPU();
  for (int window : {1, 16, 100}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    Case decode = qwen3_decode();
    decode.window = window;
    expect_matches_reference<float>(decode, {1, 7, 0}, kF32Tolerance);
    Case chunk = prefill({8, 2, 64});
    chunk.window = window;
    expect_matches_reference<float>(chunk, {1, 5, 0}, kF32Tolerance);
    expect_matches_reference<__nv_bfloat16>(chunk, {0}, kBf16Tolerance);
  }
}

// A row the reference refuses (L + n > S, or a slot outside [0, N)) is skipped on the device: its
// slot is left as it was and its outputs are zero; the other rows are unaffected. Expected: the
// reference with those rows bringing no tokens (and the bad slot swapped for a free one).
TEST(CachedAttentionCuda, RefusedRowsAreSkipped) {
  SKIP_WITHOUT_GPU();
  const Case c{.sequence = 3, .slots = 4, .capacity = 16, .q_heads = 4, .kv_heads = 2, .head_dim = 64,
               .rows = {{0, 10, 3}, {1, 15, 2}, {9, 0, 1}, {2, 4, 2}}};
  Case allowed = c;
  allowed.rows[1].fresh = 0;
  allowed.rows[2] = {3, 0, 0};
  const Values inputs = random_values<float>(c);
  const Values expected = reference(allowed, inputs);
  const Values got = run_gpu<float>(c, inputs, 0);
  EXPECT_LE(relative_error(got.out, expected.out), kF32Tolerance);
  EXPECT_TRUE(same_bits(got.k_cache, expected.k_cache));
  EXPECT_TRUE(same_bits(got.v_cache, expected.v_cache));
  expect_padding_zero(allowed, got.out);
}

// Steps the folded launches are checked on: one and two rows (one refused, its slot out of range),
// one row of two tokens (the second padding), a window, 8B's and 1.7B's heads, head_dim 64 and
// 128; four rows (not folded) too.
std::vector<Case> folded_step_cases() {
  return {
      {.sequence = 1, .slots = 3, .capacity = 700, .q_heads = 32, .kv_heads = 8, .head_dim = 128, .rows = {{1, 639, 1}}},
      {.sequence = 1, .slots = 3, .capacity = 700, .q_heads = 16, .kv_heads = 8, .head_dim = 128,
       .rows = {{2, 300, 1}, {5, 10, 1}}},
      {.sequence = 2, .slots = 2, .capacity = 300, .q_heads = 16, .kv_heads = 8, .head_dim = 64, .rows = {{0, 200, 1}}},
      {.sequence = 1, .slots = 2, .capacity = 300, .q_heads = 8, .kv_heads = 2, .head_dim = 64, .window = 64,
       .rows = {{1, 250, 1}, {0, 0, 1}}},
      {.sequence = 1, .slots = 4, .capacity = 200, .q_heads = 16, .kv_heads = 8, .head_dim = 128,
       .rows = {{0, 100, 1}, {1, 50, 1}, {2, 150, 1}, {3, 199, 1}}},
  };
}

// The append folded into the split launch gives the bits of the two launches on folded_step_cases,
// one split and several; steps of more tokens (not folded) alike.
TEST(CachedAttentionCuda, AppendFoldedIntoTheSplitEqualsTheTwoLaunches) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : folded_step_cases()) {
    const Values inputs = random_values<__nv_bfloat16>(c);
    for (int splits : {0, 1, 3}) {
      const Values two = run_gpu<__nv_bfloat16>(c, inputs, splits);
      const Values folded = run_gpu<__nv_bfloat16>(c, inputs, splits, true);
      const std::string where = describe(c, splits);
      expect_same_bits(folded, two, where);
      // (RefusedRowsAreSkipped checks the two launches' refusal against the reference.)
      const bool refused = std::any_of(c.rows.begin(), c.rows.end(), [&](const Row& row) { return row.slot >= c.slots; });
      if (!refused) EXPECT_LT(relative_error(folded.out, reference(c, inputs).out), 5e-3) << where << ": against the reference";
    }
  }
}

// Qwen3's q/k norm + RoPE before the attention: per-head weights, the frequencies and positions.
struct NormRopeInputs {
  std::vector<float> q_weight, k_weight, inv_freq;
  std::vector<int32_t> positions;  // [B · T]
};

NormRopeInputs random_norm_rope(const Case& c) {
  NormRopeInputs n;
  n.q_weight = random_fp32(static_cast<size_t>(c.head_dim), 0.5f, 1.5f);
  n.k_weight = random_fp32(static_cast<size_t>(c.head_dim), 0.5f, 1.5f);
  for (float* w : {n.q_weight.data(), n.k_weight.data()}) {
    for (int i = 0; i < c.head_dim; ++i) w[i] = bf16_to_float(float_to_bf16(w[i]));
  }
  for (int i = 0; i < c.head_dim / 2; ++i) n.inv_freq.push_back(std::pow(1e6f, -2.0f * i / c.head_dim));
  // Positions of the new tokens: the cache's (held + t), but the op reads them from position_ids.
  for (const Row& row : c.rows) {
    for (int64_t t = 0; t < c.sequence; ++t) n.positions.push_back(row.held + static_cast<int32_t>(t) + 3);
  }
  return n;
}

// Through cached_attention_norm_rope_append_forward, or (`one_launch` false) the decode graph's
// chain before it: qk_norm_rope_forward_pair, then cached_attention_append_forward.
Values run_norm_rope_gpu(const Case& c, const Values& inputs, const NormRopeInputs& n, int split_count, bool one_launch) {
  using E = __nv_bfloat16;
  OnDevice<E> d(c, inputs, split_count);
  auto& [shape, splits, q, k, v, k_cache, v_cache, out, workspace, slots, held, fresh] = d;
  auto q_weight = upload<E>(n.q_weight), k_weight = upload<E>(n.k_weight);
  const auto inv_freq = to_device(n.inv_freq);
  const auto positions = to_device(n.positions);
  DeviceBuffer<uint16_t> q_normed(inputs.q.size()), k_normed(inputs.k.size());
  DeviceBuffer<float> rstd(static_cast<size_t>(c.batch() * c.sequence * (c.q_heads + c.kv_heads)));
  DeviceBuffer<unsigned char> scratch(static_cast<size_t>(cached_attention_norm_rope_scratch_bytes(shape)));
  const CachedNormRope<E> norm{.q_weight = device<E>(q_weight), .k_weight = device<E>(k_weight),
                               .inv_freq = inv_freq.data(), .position_ids = positions.data(), .epsilon = 1e-6f};
  if (one_launch) {
    cached_attention_norm_rope_append_forward<E>(device<E>(out), workspace.data(), scratch.data(), device<E>(q),
                                                 device<E>(k), device<E>(v), device<E>(k_cache), device<E>(v_cache),
                                                 slots.data(), held.data(), fresh.data(), norm, shape, splits, nullptr);
  } else {
    const QkNormRopeShape q_shape{.tokens = c.batch() * c.sequence, .heads = c.q_heads, .head_dim = c.head_dim};
    qk_norm_rope_forward_pair(QkNormRopeTensor<E>{device<E>(q_normed), rstd.data(), device<E>(q), norm.q_weight},
                              QkNormRopeTensor<E>{device<E>(k_normed), rstd.data() + q_shape.tokens * c.q_heads,
                                                  device<E>(k), norm.k_weight},
                              norm.inv_freq, norm.position_ids, q_shape, c.kv_heads, nullptr);
    cached_attention_append_forward<E>(device<E>(out), workspace.data(), device<E>(q_normed), device<E>(k_normed),
                                       device<E>(v), device<E>(k_cache), device<E>(v_cache), slots.data(), held.data(),
                                       fresh.data(), shape, splits, nullptr);
  }
  return d.result();
}

// The q/k norm + RoPE done by the split blocks gives the bits of the pair launch and the attention
// after it, on folded_step_cases and two more, one split and several; steps the launch does not
// fold (more tokens: through the scratch) alike.
TEST(CachedAttentionCuda, QkNormRopeFoldedIntoTheSplitEqualsThePairLaunchAndTheAttention) {
  SKIP_WITHOUT_GPU();
  std::vector<Case> cases = folded_step_cases();
  // Two tokens of a row filling all 16 rows of a tile (GQA 8), and five (not folded) at head_dim 256.
  cases.push_back(
      {.sequence = 2, .slots = 2, .capacity = 300, .q_heads = 32, .kv_heads = 4, .head_dim = 128, .rows = {{1, 17, 2}}});
  cases.push_back({.sequence = 5, .slots = 2, .capacity = 64, .q_heads = 8, .kv_heads = 2, .head_dim = 256, .rows = {{1, 9, 5}}});
  for (const Case& c : cases) {
    const Values inputs = random_values<__nv_bfloat16>(c);
    const NormRopeInputs norm = random_norm_rope(c);
    for (int splits : {0, 1, 3}) {
      const Values chain = run_norm_rope_gpu(c, inputs, norm, splits, false);
      const Values one = run_norm_rope_gpu(c, inputs, norm, splits, true);
      const std::string where = describe(c, splits);
      expect_same_bits(one, chain, where);
      // Not the un-normalised attention: the norm is in there.
      EXPECT_FALSE(same_bits(one.out, run_gpu<__nv_bfloat16>(c, inputs, splits).out)) << where;
    }
  }
}

// The binder in a one-node BF16 plan: the caches are parameters the op writes in place, so a
// second execute (decode after a prefill) attends over what the first appended. Each step against
// the reference continuing from the reference's caches.
TEST(CachedAttentionCudaBinder, CachesPersistBetweenExecutes) {
  SKIP_WITHOUT_GPU();
  Case c{.sequence = 3, .slots = 3, .capacity = 9, .q_heads = 4, .kv_heads = 2, .head_dim = 64, .window = 4};
  const int64_t rows = 2;
  runtime::CudaNodePlan gpu;
  auto operand = [&](const char* name, int heads, int64_t first, int64_t second) {
    return gpu.operand(name, DType::BF16, {first, second, heads, c.head_dim});
  };
  std::vector<graph::TensorId> operands{operand("q", c.q_heads, rows, c.sequence),
                                        operand("k", c.kv_heads, rows, c.sequence),
                                        operand("v", c.kv_heads, rows, c.sequence),
                                        operand("k_cache", c.kv_heads, c.slots, c.capacity),
                                        operand("v_cache", c.kv_heads, c.slots, c.capacity)};
  for (const char* name : {"slot_ids", "cache_lengths", "new_lengths"}) {
    operands.push_back(gpu.builder.input(name, DType::I32, {rows}));
  }
  const graph::TensorId out = gpu.builder.op("cached_attention", operands, {{"window", 4}})[0];
  gpu.load({out});

  c.rows = {{2, 0, 3}, {0, 0, 2}};
  Values state = random_values<__nv_bfloat16>(c);
  gpu.write("k_cache", state.k_cache);
  gpu.write("v_cache", state.v_cache);
  for (std::vector<Row> step : {std::vector<Row>{{2, 0, 3}, {0, 0, 2}}, std::vector<Row>{{2, 3, 1}, {0, 2, 3}}}) {
    c.rows = step;
    SCOPED_TRACE(::testing::Message() << "step with row 0 holding " << step[0].held);
    const Values fresh = random_values<__nv_bfloat16>(c);
    state.q = fresh.q;
    state.k = fresh.k;
    state.v = fresh.v;
    gpu.write("q", state.q);
    gpu.write("k", state.k);
    gpu.write("v", state.v);
    const std::vector<int32_t> slots = column(c, &Row::slot), held = column(c, &Row::held),
                               news = column(c, &Row::fresh);
    const std::vector<runtime::InputBinding> inputs{
        {gpu.plan.tensor("slot_ids"), std::as_bytes(std::span<const int32_t>(slots))},
        {gpu.plan.tensor("cache_lengths"), std::as_bytes(std::span<const int32_t>(held))},
        {gpu.plan.tensor("new_lengths"), std::as_bytes(std::span<const int32_t>(news))}};
    gpu.backend.execute(inputs);
    state = reference(c, state);
    EXPECT_LE(relative_error(gpu.read(out), state.out), kBf16Tolerance);
    EXPECT_TRUE(same_bits(gpu.read(gpu.plan.tensor("k_cache")), state.k_cache));
    EXPECT_TRUE(same_bits(gpu.read(gpu.plan.tensor("v_cache")), state.v_cache));
    expect_padding_zero(c, gpu.read(out));
  }
}

// The split policy (host only, runs without a GPU): a lone decode row spreads over about four
// blocks per SM, a full batch keeps one split, a long prefill chunk one, and never more splits
// than the capacity has 32-key pieces.
TEST(CachedAttentionCudaSplits, FillTheGpuWithoutOverSplitting) {
  CachedAttentionShape shape{
      .batch = 1, .sequence = 1, .slots = 64, .capacity = 32768, .q_heads = 32, .kv_heads = 8, .head_dim = 128};
  EXPECT_EQ(cached_attention_splits(shape, 132), 66);  // 8 blocks × 66 ≥ 4 × 132
  shape.batch = 64;
  EXPECT_EQ(cached_attention_splits(shape, 132), 2);  // 512 blocks × 2 ≥ 528
  shape.sequence = 256;  // a prefill chunk: 64 · 8 · 128 tiles
  EXPECT_EQ(cached_attention_splits(shape, 132), 1);
  shape.batch = 1;
  shape.sequence = 1;
  shape.capacity = 400;  // four pieces of 128 keys at most
  EXPECT_EQ(cached_attention_splits(shape, 132), 4);
  EXPECT_EQ(cached_attention_workspace_floats(shape, 4), 4 * 32 * (128 + 2));
  shape.capacity = 100;  // one split: the split kernel writes the output
  EXPECT_EQ(cached_attention_splits(shape, 132), 1);
}

}  // namespace
}  // namespace surogate::cuda
