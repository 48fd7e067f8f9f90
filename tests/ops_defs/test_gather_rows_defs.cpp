// gather_rows / gather_rows_sum (src/ops/defs/gather_rows_def.cpp) on the CPU backend: the
// gradient (gather_rows_sum over the inverse table) against finite differences, alone and around
// attention as prompt sharing places them (train/objective/prompt_sharing_graph.h), and shape rules.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

// 4 shared tokens → 6 packed ones: token 0 copied twice (a prompt token), one padding slot.
const std::vector<int32_t> kExpand{0, 1, 2, 0, 3, -1};
const std::vector<int32_t> kExpandSources{0, 3, 1, -1, 2, -1, 4, -1};
// Each shared token takes its first copy's output.
const std::vector<int32_t> kTake{0, 1, 2, 4};
const std::vector<int32_t> kTakeSources{0, 1, 2, -1, 3, -1};

TEST(OpsDefsGatherRows, GradientMatchesFiniteDifferences) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {1, 4, 3});
        TensorId index = b.input("index", DType::I32, {1, 6});
        TensorId sources = b.input("sources", DType::I32, {1, 4, 2});
        TensorId y = b.op("gather_rows", {x, index, sources});
        return probe_loss(b, b.op("mul", {y, y}));
      },
      {{"index", kExpand}, {"sources", kExpandSources}});
  EXPECT_EQ(checked, 1u);
}

// q / k / v of 4 shared tokens gathered into two documents of 3 packed tokens each ([t0 t1 t2] and
// [t0 t3] + padding), attended there, and gathered back: the layout of one preference pair.
TEST(OpsDefsGatherRows, AroundAttentionGradientMatchesFiniteDifferences) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId expand = b.input("expand", DType::I32, {1, 6});
        TensorId expand_sources = b.input("expand_sources", DType::I32, {1, 4, 2});
        TensorId take = b.input("take", DType::I32, {1, 4});
        TensorId take_sources = b.input("take_sources", DType::I32, {1, 6, 1});
        TensorId documents = b.input("documents", DType::I32, {1, 6});
        const json heads{{"query_heads", 2}, {"kv_heads", 1}, {"head_dim", 4}};
        TensorId q = b.op("gather_rows", {b.parameter("q", DType::F64, {1, 4, 8}), expand, expand_sources});
        TensorId k = b.op("gather_rows", {b.parameter("k", DType::F64, {1, 4, 4}), expand, expand_sources});
        TensorId v = b.op("gather_rows", {b.parameter("v", DType::F64, {1, 4, 4}), expand, expand_sources});
        TensorId out = b.op("attention", {q, k, v, documents}, heads);
        return probe_loss(b, b.op("gather_rows", {out, take, take_sources}));
      },
      {{"expand", kExpand}, {"expand_sources", kExpandSources}, {"take", kTake}, {"take_sources", kTakeSources},
       {"documents", {0, 0, 0, 1, 1, -1}}});
  EXPECT_EQ(checked, 3u);
}

TEST(OpsDefsGatherRows, ShapeRules) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {2, 4, 3});
  TensorId index = b.input("index", DType::I32, {2, 6});
  TensorId sources = b.input("sources", DType::I32, {2, 4, 2});
  EXPECT_EQ(b.type(b.op("gather_rows", {x, index, sources})), (graph::TensorType{DType::F32, {2, 6, 3}}));
  TensorId dy = b.parameter("dy", DType::F32, {2, 6, 3});
  EXPECT_EQ(b.type(b.op("gather_rows_sum", {dy, sources})), (graph::TensorType{DType::F32, {2, 4, 3}}));
  TensorId wrong_batch = b.input("wrong_batch", DType::I32, {1, 6});
  EXPECT_THROW(b.op("gather_rows", {x, wrong_batch, sources}), UserError);
  TensorId wrong_sources = b.input("wrong_sources", DType::I32, {2, 5, 2});  // x has 4 tokens
  EXPECT_THROW(b.op("gather_rows", {x, index, wrong_sources}), UserError);
  TensorId float_index = b.parameter("float_index", DType::F32, {2, 6});
  EXPECT_THROW(b.op("gather_rows", {x, float_index, sources}), UserError);
}

}  // namespace
}  // namespace surogate
