// Attention over a KV cache: a sequence fed in chunks (3, 1, 2, ... tokens) through
// cached_attention gives, position by position, what attention_forward gives over the whole
// sequence at once (GQA, sliding window, two rows in other slots with padding); the cache holds
// the appended keys; bad rows are UserErrors.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gradient_check.h"
#include "ops/attention.h"
#include "ops/cached_attention.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

struct Case {
  int64_t query_heads, kv_heads, head_dim, window;
};

// Feeds positions of two independent sequences (rows 0 and 1, slots 2 and 0 of 3) in chunks of
// the given sizes; row 1 gets one token fewer per chunk (padding). Checks every real output
// against the full-sequence attention of its sequence.
void check_chunked_feed(const Case& c) {
  const int64_t total = 9, capacity = 12, slots = 3;
  const int64_t chunks[] = {3, 1, 2, 3};
  const int64_t q_row = c.query_heads * c.head_dim, kv_row = c.kv_heads * c.head_dim;
  std::vector<double> q[2], k[2], v[2], expected[2];
  for (int sequence = 0; sequence < 2; ++sequence) {
    q[sequence] = random_vector(total * q_row, 11 + sequence);
    k[sequence] = random_vector(total * kv_row, 21 + sequence);
    v[sequence] = random_vector(total * kv_row, 31 + sequence);
    AttentionShape full{1, total, c.query_heads, c.kv_heads, c.head_dim, 0.0, c.window};
    expected[sequence].resize(total * q_row);
    std::vector<double> logsumexp(c.query_heads * total);
    attention_forward(full, q[sequence].data(), k[sequence].data(), v[sequence].data(), nullptr,
                      expected[sequence].data(), logsumexp.data());
  }
  std::vector<double> k_cache(slots * capacity * kv_row, 0.0), v_cache(slots * capacity * kv_row, 0.0);
  const int32_t slot_ids[2] = {2, 0};
  int32_t held[2] = {0, 0};
  for (int64_t chunk : chunks) {
    int32_t fresh[2] = {static_cast<int32_t>(chunk), static_cast<int32_t>(chunk - 1)};
    CachedAttentionShape shape{2, chunk, slots, capacity, c.query_heads, c.kv_heads, c.head_dim, 0.0, c.window};
    std::vector<double> qs(2 * chunk * q_row, 0.0), ks(2 * chunk * kv_row, 0.0), vs(2 * chunk * kv_row, 0.0);
    for (int row = 0; row < 2; ++row) {
      for (int64_t t = 0; t < fresh[row]; ++t) {
        const int64_t position = held[row] + t;
        std::copy_n(q[row].begin() + position * q_row, q_row, qs.begin() + (row * chunk + t) * q_row);
        std::copy_n(k[row].begin() + position * kv_row, kv_row, ks.begin() + (row * chunk + t) * kv_row);
        std::copy_n(v[row].begin() + position * kv_row, kv_row, vs.begin() + (row * chunk + t) * kv_row);
      }
      for (int64_t t = fresh[row]; t < chunk; ++t) {  // padding holds garbage that must not leak
        std::fill_n(ks.begin() + (row * chunk + t) * kv_row, kv_row, 1e3);
        std::fill_n(qs.begin() + (row * chunk + t) * q_row, q_row, 7.0);
      }
    }
    std::vector<double> out(2 * chunk * q_row, -1.0);
    cached_attention_forward(shape, qs.data(), ks.data(), vs.data(), k_cache.data(), v_cache.data(), slot_ids, held,
                             fresh, out.data());
    for (int row = 0; row < 2; ++row) {
      for (int64_t t = 0; t < chunk; ++t) {
        for (int64_t i = 0; i < q_row; ++i) {
          const double got = out[(row * chunk + t) * q_row + i];
          const double want = t < fresh[row] ? expected[row][(held[row] + t) * q_row + i] : 0.0;
          ASSERT_NEAR(got, want, 1e-12) << "row " << row << " position " << held[row] + t << " element " << i;
        }
      }
      held[row] += fresh[row];
    }
  }
  // The cache holds each sequence's keys at its slot, in order; slot 1 was never written.
  for (int64_t position = 0; position < held[0]; ++position) {
    for (int64_t i = 0; i < kv_row; ++i) {
      ASSERT_EQ(k_cache[(2 * capacity + position) * kv_row + i], k[0][position * kv_row + i]);
      ASSERT_EQ(v_cache[(0 * capacity + position) * kv_row + i], v[1][position * kv_row + i] * (position < held[1]))
          << position;
    }
  }
  for (int64_t i = 0; i < capacity * kv_row; ++i) ASSERT_EQ(k_cache[capacity * kv_row + i], 0.0);
}

TEST(CachedAttention, ChunkedFeedMatchesFullAttention) { check_chunked_feed({2, 2, 4, 0}); }
TEST(CachedAttention, GroupedQueryHeads) { check_chunked_feed({4, 2, 3, 0}); }
TEST(CachedAttention, SlidingWindow) { check_chunked_feed({4, 1, 5, 3}); }

TEST(CachedAttention, BadRowsAreUserErrors) {
  CachedAttentionShape shape{2, 2, 2, 4, 1, 1, 1, 0.0, 0};
  const int32_t slots_ok[2] = {0, 1}, slots_same[2] = {1, 1}, slots_out[2] = {0, 2};
  const int32_t zero[2] = {0, 0}, two[2] = {2, 2}, three[2] = {3, 0}, full[2] = {3, 3};
  EXPECT_NO_THROW(check_cache_rows(shape, slots_ok, zero, two));
  EXPECT_THROW(check_cache_rows(shape, slots_same, zero, two), UserError);
  EXPECT_THROW(check_cache_rows(shape, slots_out, zero, two), UserError);
  EXPECT_THROW(check_cache_rows(shape, slots_ok, zero, three), UserError);  // more new tokens than T
  EXPECT_THROW(check_cache_rows(shape, slots_ok, full, two), UserError);    // 3 + 2 > capacity 4
}

}  // namespace
}  // namespace surogate::ops
