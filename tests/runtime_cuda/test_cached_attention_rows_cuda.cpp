// The many-rows kernel of cached attention (cuda/kernels/cached_attention_rows.cu) against the
// reference (ops/cached_attention.h), and when cached_attention_forward picks it; error measure and
// tolerances as test_cached_attention_cuda.cpp's top states (bf16 5e-3, fp16 1e-3).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/kernels/cached_attention.h"
#include "cuda/test_helpers.h"
#include "runtime_cuda/cached_attention_cases.h"

namespace surogate::cuda {
namespace {

using namespace cuda::testing;
using namespace cached_attention_cases;

// The append, then the many-rows kernel alone on `grid_warps` warps (0: as many as are resident).
template <typename E>
Values run_rows_kernel(const Case& c, const Values& inputs, int64_t grid_warps) {
  OnDevice<E> d(c, inputs, 1);
  auto& [shape, splits, q, k, v, k_cache, v_cache, out, workspace, slots, held, fresh] = d;
  cached_attention_append<E>(device<E>(k_cache), device<E>(v_cache), device<E>(k), device<E>(v), slots.data(),
                             held.data(), fresh.data(), shape, nullptr);
  cached_attention_rows_forward<E>(device<E>(out), device<E>(q), device<E>(k_cache), device<E>(v_cache), slots.data(),
                                   held.data(), fresh.data(), shape, nullptr, grid_warps);
  return d.result();
}

// The many-rows kernel (cached_attention_rows.cu) against the reference: 8B's heads (GQA 4) over
// lengths 0..2999, 1.7B's (GQA 2), head_dim 64 with GQA 4, two new tokens a row with GQA 4 (8
// queries: the most a warp's tile takes) with padding rows, windows of 1 and 100 tokens, and a
// refused row (its slot out of range, L + n > S). On 3 warps (many items each, rows of one step
// and of none between them), 7, and as many as are resident: the same bits each time.
template <typename E>
void expect_rows_kernel_matches_reference(const Case& c, double tolerance) {
  const Values inputs = random_values<E>(c);
  Case allowed = c;  // refused rows bring nothing (the bad slot swapped for one no row uses)
  for (Row& row : allowed.rows) {
    if (row.slot >= c.slots || row.held + row.fresh > c.capacity) row = {static_cast<int32_t>(c.slots - 1), 0, 0};
  }
  const Values expected = reference(allowed, inputs);
  const Values first = run_rows_kernel<E>(c, inputs, 3);
  EXPECT_LE(relative_error(first.out, expected.out), tolerance);
  expect_padding_zero(allowed, first.out);
  for (int64_t warps : {7, 0}) {
    const Values again = run_rows_kernel<E>(c, inputs, warps);
    EXPECT_TRUE(same_bits(again.out, first.out)) << warps << " warps";
  }
}

std::vector<Case> rows_kernel_cases() {
  Case many = qwen3_decode();
  many.slots = 60;
  many.capacity = 701;
  many.rows.clear();
  for (int32_t row = 0; row < 59; ++row) many.rows.push_back({58 - row, (row * 173) % 701, 1});
  many.rows[5].held = 15;  // one step
  many.rows[6].held = 16;  // 17 keys: two steps
  many.rows[9] = {70, 3, 1};  // refused: no such slot
  Case light = many;
  light.q_heads = 16;
  Case narrow = many;
  narrow.q_heads = 8;
  narrow.kv_heads = 2;
  narrow.head_dim = 64;
  Case pairs{.sequence = 2, .slots = 5, .capacity = 300, .q_heads = 8, .kv_heads = 2, .head_dim = 128,
             .rows = {{0, 200, 2}, {1, 0, 2}, {2, 17, 1}, {3, 5, 0}, {4, 299, 2}}};
  std::vector<Case> cases = {qwen3_decode(), many, light, narrow, pairs};
  for (int window : {1, 100}) {
    Case windowed = light;
    windowed.window = window;
    cases.push_back(windowed);
  }
  return cases;
}

TEST(CachedAttentionCuda, RowsKernelMatchesReferenceBf16AndFp16) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : rows_kernel_cases()) {
    SCOPED_TRACE(::testing::Message() << describe(c, 0) << ", window " << c.window);
    expect_rows_kernel_matches_reference<__nv_bfloat16>(c, kBf16Tolerance);
    expect_rows_kernel_matches_reference<__half>(c, kF16Tolerance);
  }
}

// cached_attention_forward runs the many-rows kernel where it has items for a quarter of its
// resident warps (512 decode rows of Qwen3-1.7B's heads on an H200) — the bits of the kernel
// alone — and the split kernels for one row, a prefill chunk and more than 8 queries per kv head.
TEST(CachedAttentionCuda, ForwardPicksTheRowsKernelForManyRows) {
  SKIP_WITHOUT_GPU();
  Case c{.sequence = 1, .slots = 512, .capacity = 40, .q_heads = 16, .kv_heads = 8, .head_dim = 128};
  for (int32_t row = 0; row < 512; ++row) c.rows.push_back({511 - row, (row * 7) % 40, 1});
  ASSERT_TRUE(cached_attention_uses_rows_kernel(kernel_shape(c)));
  const Values inputs = random_values<__nv_bfloat16>(c);
  const Values forward = run_gpu<__nv_bfloat16>(c, inputs, 0);
  expect_same_bits(forward, run_rows_kernel<__nv_bfloat16>(c, inputs, 0), "512 rows");
  EXPECT_LE(relative_error(forward.out, reference(c, inputs).out), kBf16Tolerance);
  CachedAttentionShape shape = kernel_shape(c);
  shape.batch = 1;
  EXPECT_FALSE(cached_attention_uses_rows_kernel(shape));
  shape.batch = 512;
  shape.sequence = 37;
  EXPECT_FALSE(cached_attention_uses_rows_kernel(shape));
  shape.sequence = 1;
  shape.q_heads = 72;  // 9 queries per kv head
  EXPECT_FALSE(cached_attention_uses_rows_kernel(shape));
}

}  // namespace
}  // namespace surogate::cuda
