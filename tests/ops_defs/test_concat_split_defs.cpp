// concat / split (src/ops/defs/concat_split_def.cpp) on the CPU backend: placement of the pieces,
// gradients against finite differences, shape rules.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

// concat along the first and the last axis and split back: values land where they should
// (concat then split is the identity, checked exactly) and the gradients (each op's is the other)
// match finite differences.
TEST(OpsDefs, ConcatAndSplit) {
  for (int64_t axis : {int64_t{0}, int64_t{-1}, int64_t{1}}) {
    SCOPED_TRACE(::testing::Message() << "axis " << axis);
    size_t checked = check_gradients(
        [axis](GraphBuilder& b) {
          // Three pieces of 1, 2 and 3 along the axis, in a [2, 3, 4]-like frame.
          auto shape = [axis](int64_t size) {
            Shape result{2, 3, 4};
            result[axis < 0 ? 2 : static_cast<size_t>(axis)] = size;
            return result;
          };
          TensorId a = b.parameter("a", DType::F64, shape(1));
          TensorId c = b.parameter("c", DType::F64, shape(2));
          TensorId d = b.parameter("d", DType::F64, shape(3));
          TensorId joined = b.op("concat", {a, c, d}, {{"axis", axis}});
          graph::OpOutputs pieces =
              b.op("split", {b.op("scale", {joined}, {{"factor", 1.5}})}, {{"axis", axis}, {"sizes", {2, 4}}});
          return b.op("add", {probe_loss(b, pieces[0], "p0"), probe_loss(b, pieces[1], "p1")});
        },
        {});
    EXPECT_EQ(checked, 3u);
  }
  GraphBuilder b(registry());
  TensorId a = b.parameter("a", DType::F32, {2, 3}, false), c = b.parameter("c", DType::F32, {2, 2}, false);
  TensorId joined = b.op("concat", {a, c}, {{"axis", -1}});
  EXPECT_EQ(b.type(joined), (graph::TensorType{DType::F32, {2, 5}}));
  graph::OpOutputs pieces = b.op("split", {joined}, {{"axis", 1}, {"sizes", {3, 2}}});
  b.mark_output(joined);
  b.mark_output(pieces[0]);
  b.mark_output(pieces[1]);
  compiler::ExecutionPlan plan = compiler::compile_forward(b.finish(), registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());
  const std::vector<float> av{1, 2, 3, 4, 5, 6}, cv{7, 8, 9, 10};
  backend.write(a, std::as_bytes(std::span<const float>(av)));
  backend.write(c, std::as_bytes(std::span<const float>(cv)));
  backend.execute({});
  auto read = [&](TensorId id, size_t count) {
    std::vector<float> values(count);
    backend.read(id, std::as_writable_bytes(std::span<float>(values)));
    return values;
  };
  EXPECT_EQ(read(joined, 10), (std::vector<float>{1, 2, 3, 7, 8, 4, 5, 6, 9, 10}));
  EXPECT_EQ(read(pieces[0], 6), av);
  EXPECT_EQ(read(pieces[1], 4), cv);
}

TEST(OpsDefs, ConcatAndSplitShapeRules) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {2, 3}), y = b.parameter("y", DType::F32, {3, 3});
  EXPECT_THROW(b.op("concat", {x, y}, {{"axis", 1}}), UserError);                            // dim 0 differs
  EXPECT_THROW(b.op("concat", {x, b.parameter("z", DType::F64, {2, 3})}, {{"axis", 0}}), UserError);  // dtype
  EXPECT_THROW(b.op("concat", {x, x}, {{"axis", 2}}), UserError);                            // no such axis
  EXPECT_THROW(b.op("split", {x}, {{"axis", 1}, {"sizes", {1, 1}}}), UserError);             // sums to 2, not 3
  EXPECT_THROW(b.op("split", {x}, {{"axis", 1}, {"sizes", {3, 0}}}), UserError);             // empty piece
  EXPECT_EQ(b.type(b.op("concat", {x, y}, {{"axis", 0}})), (graph::TensorType{DType::F32, {5, 3}}));
}

}  // namespace
}  // namespace surogate
