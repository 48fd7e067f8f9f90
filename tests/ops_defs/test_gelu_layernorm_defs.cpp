// The graph ops "gelu" and "layernorm" (src/ops/defs/gelu_def.cpp, layernorm_def.cpp): gradients of
// every operand through compile_training on the CPU backend in F64 against finite differences
// (ops_defs_test_util.h: relative error < 1e-6), the optional bias, frozen parameters giving no
// gradient outputs, and the attributes' errors.
#include <gtest/gtest.h>

#include <string>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

TEST(OpsDefs, GeluBothForms) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3, 5});
        TensorId y = b.parameter("y", DType::F64, {4, 6});
        return b.op("add", {probe_loss(b, b.op("gelu", {x}), "p1"),
                            probe_loss(b, b.op("gelu", {y}, {{"approximate", "tanh"}}), "p2")});
      },
      {});
  EXPECT_EQ(checked, 2u);
}

TEST(OpsDefs, LayerNormWithAndWithoutBias) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3, 6});
        TensorId w = b.parameter("w", DType::F64, {6});
        TensorId bias = b.parameter("b", DType::F64, {6});
        TensorId z = b.parameter("z", DType::F64, {4, 5});
        TensorId v = b.parameter("v", DType::F64, {5});
        return b.op("add", {probe_loss(b, b.op("layernorm", {x, w, bias}, {{"eps", 1e-5}}), "p1"),
                            probe_loss(b, b.op("layernorm", {z, v}, {{"eps", 1e-6}}), "p2")});
      },
      {});
  EXPECT_EQ(checked, 5u);
}

// A frozen weight and bias (LoRA's base model): the backward node has only d_x; a frozen weight
// with a trainable bias: d_x and d_bias.
TEST(OpsDefs, LayerNormFrozenParametersGiveNoGradientOutputs) {
  struct Case {
    bool weight_trainable, bias_trainable;
    size_t outputs;
  };
  for (const Case& c : {Case{false, false, 1}, Case{false, true, 2}, Case{true, false, 2}, Case{true, true, 3}}) {
    auto build = [&](GraphBuilder& b) {
      TensorId x = b.parameter("x", DType::F64, {3, 4});
      TensorId w = b.parameter("w", DType::F64, {4}, c.weight_trainable);
      TensorId bias = b.parameter("b", DType::F64, {4}, c.bias_trainable);
      return probe_loss(b, b.op("layernorm", {x, w, bias}, {{"eps", 1e-5}}));
    };
    EXPECT_EQ(check_gradients(build, {}), 1u + c.weight_trainable + c.bias_trainable);
    GraphBuilder b(registry());
    TensorId loss = build(b);
    b.mark_output(loss);
    compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
    int found = 0;
    for (const graph::Node& node : plan.graph.nodes) {
      if (node.op != "layernorm_backward") continue;
      ++found;
      EXPECT_EQ(node.outputs.size(), c.outputs) << c.weight_trainable << c.bias_trainable;
    }
    EXPECT_EQ(found, 1);
  }
}

TEST(OpsDefs, GeluAndLayerNormAttributeErrors) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {3, 5});
  try {
    b.op("gelu", {x}, {{"approximate", "erf"}}, "act");
    FAIL() << "expected a UserError";
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("act"), std::string::npos) << message;
    EXPECT_NE(message.find("\"none\" or \"tanh\""), std::string::npos) << message;
  }
  EXPECT_THROW(b.op("layernorm", {x, b.parameter("w", DType::F32, {5})}), UserError);  // eps missing
  EXPECT_THROW(b.op("layernorm", {x, b.parameter("w4", DType::F32, {4})}, {{"eps", 1e-5}}), UserError);
  EXPECT_THROW(b.op("layernorm", {x, b.parameter("w5", DType::F32, {5}), b.parameter("b4", DType::F32, {4})},
                    {{"eps", 1e-5}}),
               UserError);
}

}  // namespace
}  // namespace surogate
