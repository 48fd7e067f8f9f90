// Graph op "cached_attention" (ops/defs/cached_attention_def.cpp): its shape rule (attention's
// q / k / v forms, caches [N, S, Hkv, D] of q's dtype, I32 [B] row inputs, each refusal a
// UserError naming the input), and, on the CPU backend with the caches as constants of the plan,
// two executes in a row: the first's appends stay in the caches (written in place) and the second
// attends over them, as the reference called directly on the same sequence of calls.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "graph/builder.h"
#include "ops/cached_attention.h"
#include "ops_defs_test_util.h"
#include "runtime/cpu_backend.h"

namespace surogate::ops_defs_testing {
namespace {

using graph::TensorType;

constexpr int64_t kBatch = 2, kSequence = 3, kHeads = 2, kKvHeads = 1, kDim = 4, kSlots = 3, kCapacity = 8;

struct CachedAttentionGraph {
  GraphBuilder b{registry()};
  TensorId q, k, v, k_cache, v_cache, slot_ids, cache_lengths, new_lengths;

  explicit CachedAttentionGraph(DType dtype = DType::F64, DType cache_dtype = DType::F64, int64_t cache_kv_heads = kKvHeads,
                                Shape row_shape = {kBatch}) {
    q = b.input("q", dtype, {kBatch, kSequence, kHeads, kDim});
    k = b.input("k", dtype, {kBatch, kSequence, kKvHeads, kDim});
    v = b.input("v", dtype, {kBatch, kSequence, kKvHeads, kDim});
    k_cache = b.constant("k_cache", cache_dtype, {kSlots, kCapacity, cache_kv_heads, kDim});
    v_cache = b.constant("v_cache", cache_dtype, {kSlots, kCapacity, cache_kv_heads, kDim});
    slot_ids = b.input("slot_ids", DType::I32, row_shape);
    cache_lengths = b.input("cache_lengths", DType::I32, {kBatch});
    new_lengths = b.input("new_lengths", DType::I32, {kBatch});
  }
  TensorId op(json attrs = json::object()) {
    return b.op("cached_attention", {q, k, v, k_cache, v_cache, slot_ids, cache_lengths, new_lengths}, attrs);
  }
};

std::string refusal(const std::function<void()>& body) {
  try {
    body();
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

TEST(CachedAttentionDef, TheOutputIsQsTypeInBothForms) {
  CachedAttentionGraph g;
  EXPECT_EQ(g.b.type(g.op()), (TensorType{DType::F64, {kBatch, kSequence, kHeads, kDim}}));
  GraphBuilder flat(registry());
  const TensorId q = flat.input("q", DType::F32, {kBatch, kSequence, kHeads * kDim});
  const TensorId kv = flat.input("kv", DType::F32, {kBatch, kSequence, kKvHeads * kDim});
  const TensorId cache = flat.constant("cache", DType::F32, {kSlots, kCapacity, kKvHeads, kDim});
  const TensorId rows = flat.input("rows", DType::I32, {kBatch});
  const TensorId out = flat.op("cached_attention", {q, kv, kv, cache, cache, rows, rows, rows},
                               {{"query_heads", kHeads}, {"kv_heads", kKvHeads}, {"head_dim", kDim}, {"window", 2}});
  EXPECT_EQ(flat.type(out), (TensorType{DType::F32, {kBatch, kSequence, kHeads * kDim}}));
}

TEST(CachedAttentionDef, EveryMismatchIsAUserErrorNamingTheInput) {
  {
    CachedAttentionGraph g(DType::F64, DType::F32);
    const std::string message = refusal([&] { g.op(); });
    EXPECT_NE(message.find("'k_cache'"), std::string::npos) << message;
    EXPECT_NE(message.find("F64[slots, capacity, 1, 4]"), std::string::npos) << message;
  }
  {
    CachedAttentionGraph g(DType::F64, DType::F64, 2);
    EXPECT_NE(refusal([&] { g.op(); }).find("'k_cache'"), std::string::npos);
  }
  {
    CachedAttentionGraph g(DType::F64, DType::F64, kKvHeads, {kBatch + 1});
    const std::string message = refusal([&] { g.op(); });
    EXPECT_NE(message.find("'slot_ids'"), std::string::npos) << message;
    EXPECT_NE(message.find("must be I32[2]"), std::string::npos) << message;
  }
  {
    CachedAttentionGraph g;
    EXPECT_NE(refusal([&] { g.op({{"window", -1}}); }).find("attribute 'window'"), std::string::npos);
  }
  {
    CachedAttentionGraph g;
    const std::string message = refusal([&] { g.b.op("cached_attention", {g.q, g.k, g.v, g.k_cache, g.v_cache}); });
    EXPECT_FALSE(message.empty());
  }
}

template <typename T>
std::vector<T> values_of(const runtime::CpuBackend& backend, TensorId id, size_t count) {
  std::vector<T> values(count);
  backend.read(id, std::as_writable_bytes(std::span<T>(values)));
  return values;
}

TEST(CachedAttentionDef, TwoExecutesAppendIntoTheConstantCachesAndAttendOverThem) {
  CachedAttentionGraph g;
  const TensorId out = g.op({{"window", 4}});
  g.b.mark_output(out);
  const compiler::ExecutionPlan plan = compiler::compile_forward(g.b.finish(), registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());
  ASSERT_EQ(plan.placement(g.k_cache).storage, compiler::Storage::Parameters);

  const size_t q_count = kBatch * kSequence * kHeads * kDim, kv_count = kBatch * kSequence * kKvHeads * kDim;
  const size_t cache_count = kSlots * kCapacity * kKvHeads * kDim;
  std::vector<double> k_cache(cache_count, 0.0), v_cache(cache_count, 0.0);
  const ops::CachedAttentionShape shape{kBatch, kSequence, kSlots, kCapacity, kHeads, kKvHeads, kDim, 0.0, 4};
  // Call 1: slot 2 gets 3 tokens, slot 0 gets 2 (one padding). Call 2: slot 2 two more, slot 1 one.
  const std::vector<std::vector<int32_t>> slots{{2, 0}, {2, 1}}, held{{0, 0}, {3, 0}}, fresh{{3, 2}, {2, 1}};
  for (size_t call = 0; call < 2; ++call) {
    const std::vector<double> q = random_doubles(q_count, 10 + call, 1.0), k = random_doubles(kv_count, 20 + call, 1.0),
                              v = random_doubles(kv_count, 30 + call, 1.0);
    const runtime::InputBinding inputs[] = {
        {plan.tensor("q"), std::as_bytes(std::span<const double>(q))},
        {plan.tensor("k"), std::as_bytes(std::span<const double>(k))},
        {plan.tensor("v"), std::as_bytes(std::span<const double>(v))},
        {plan.tensor("slot_ids"), std::as_bytes(std::span<const int32_t>(slots[call]))},
        {plan.tensor("cache_lengths"), std::as_bytes(std::span<const int32_t>(held[call]))},
        {plan.tensor("new_lengths"), std::as_bytes(std::span<const int32_t>(fresh[call]))}};
    backend.execute(inputs);
    std::vector<double> expected(q_count);
    ops::cached_attention_forward(shape, q.data(), k.data(), v.data(), k_cache.data(), v_cache.data(),
                                  slots[call].data(), held[call].data(), fresh[call].data(), expected.data());
    EXPECT_EQ(values_of<double>(backend, plan.tensor(plan.graph.tensor(out).name), q_count), expected) << "call " << call;
    EXPECT_EQ(values_of<double>(backend, g.k_cache, cache_count), k_cache) << "call " << call;
    EXPECT_EQ(values_of<double>(backend, g.v_cache, cache_count), v_cache) << "call " << call;
  }
  // Slot 2 holds five tokens' keys now: the last one appended is call 2's row 0, token 1.
  EXPECT_NE(k_cache[(2 * kCapacity + 4) * kDim], 0.0);
}

}  // namespace
}  // namespace surogate::ops_defs_testing
