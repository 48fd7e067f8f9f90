// reshape (src/ops/defs/reshape_def.cpp) on the CPU backend: the elements keep their row-major
// order, the gradient (the reshape back) matches finite differences, shape rules.
#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

TEST(OpsDefsReshape, KeepsOrderAndGradientMatchesFiniteDifferences) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {4, 3});
        // Scaled so that the probe's gradient is not the reshape of a constant.
        TensorId y = b.op("reshape", {b.op("scale", {x}, {{"factor", 1.5}})}, {{"shape", {2, 6}}});
        return probe_loss(b, b.op("mul", {y, y}), "p");
      },
      {});
  EXPECT_EQ(checked, 1u);

  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {2, 3}, false);
  TensorId y = b.op("reshape", {x}, {{"shape", {3, 1, 2}}});
  EXPECT_EQ(b.type(y), (graph::TensorType{DType::F32, {3, 1, 2}}));
  b.mark_output(y);
  compiler::ExecutionPlan plan = compiler::compile_forward(b.finish(), registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());
  const std::vector<float> values{1, 2, 3, 4, 5, 6};
  backend.write(x, std::as_bytes(std::span<const float>(values)));
  backend.execute({});
  std::vector<float> out(6);
  backend.read(y, std::as_writable_bytes(std::span<float>(out)));
  EXPECT_EQ(out, values);
}

TEST(OpsDefsReshape, ShapeRules) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {2, 3});
  EXPECT_THROW(b.op("reshape", {x}, {{"shape", {4, 2}}}), UserError);   // 8 elements, not 6
  EXPECT_THROW(b.op("reshape", {x}, {{"shape", {-1, 3}}}), UserError);  // no inferred sizes
  EXPECT_THROW(b.op("reshape", {x}, {{"shape", {0, 6}}}), UserError);
  EXPECT_EQ(b.type(b.op("reshape", {x}, {{"shape", {6}}})), (graph::TensorType{DType::F32, {6}}));
}

}  // namespace
}  // namespace surogate
