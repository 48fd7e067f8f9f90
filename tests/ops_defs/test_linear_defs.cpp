// The linear family's graph ops (src/ops/defs/linear_def.cpp) on the CPU backend in F64: gradients
// of linear and linear_add (each with and without the LoRA product factor) against finite differences,
// the fused and accumulating forms equal to the separate products, shape rules, and the fan-out
// folding of low-precision graphs.
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

TEST(OpsDefs, LinearWithBias) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3, 5});
        TensorId w = b.parameter("w", DType::F64, {4, 5});
        TensorId bias = b.parameter("b", DType::F64, {4});
        return probe_loss(b, b.op("linear", {x, w, bias}));
      },
      {});
  EXPECT_EQ(checked, 3u);
}

TEST(OpsDefs, LinearFrozenWeightSkipsWeightGradient) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F64, {3, 5});
  TensorId w = b.parameter("w", DType::F64, {4, 5}, /*trainable=*/false);
  TensorId loss = probe_loss(b, b.op("linear", {x, w}));
  b.mark_output(loss);
  auto plan = compiler::compile_training(b.finish(), loss, registry());
  for (const auto& node : plan.graph.nodes) EXPECT_NE(node.op, "linear_backward_weight");
  EXPECT_EQ(check_gradients(
                [](GraphBuilder& b2) {
                  TensorId x2 = b2.parameter("x", DType::F64, {3, 5});
                  TensorId w2 = b2.parameter("w", DType::F64, {4, 5}, false);
                  return probe_loss(b2, b2.op("linear", {x2, w2}));
                },
                {}),
            1u);
}

// linear_add: d_x and d_weight as linear's, d_addend = d_out (every operand trainable).
TEST(OpsDefs, LinearAdd) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3, 5});
        TensorId w = b.parameter("w", DType::F64, {4, 5});
        TensorId addend = b.parameter("addend", DType::F64, {2, 3, 4});
        return probe_loss(b, b.op("linear_add", {x, w, addend}));
      },
      {});
  EXPECT_EQ(checked, 3u);
}

// linear_add with a product factor (the LoRA scaling in low-precision graphs): scale·x·Wᵀ + addend;
// the backward ops carry the factor. In a BF16-like graph (here F64, where the input gradient
// is not folded) and with x fanning out, so linear_backward_input(_add) both see it.
TEST(OpsDefs, LinearAddWithScale) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3, 5});
        TensorId w = b.parameter("w", DType::F64, {4, 5});
        TensorId addend = b.parameter("addend", DType::F64, {2, 3, 4});
        TensorId y = b.op("linear_add", {x, w, addend}, {{"scale", 2.5}});
        return b.op("add", {probe_loss(b, y), probe_loss(b, b.op("linear", {x, w}), "probe2")});
      },
      {});
  EXPECT_EQ(checked, 3u);
}

// linear with a product factor (LoRA's B product in low-precision graphs): scale·x·Wᵀ, and the
// backward ops carry the factor; x fans out so both input-gradient forms see it. A bias with a
// scale is refused by name.
TEST(OpsDefs, LinearWithScale) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3, 5});
        TensorId w = b.parameter("w", DType::F64, {4, 5});
        TensorId y = b.op("linear", {x, w}, {{"scale", 2.5}});
        return b.op("add", {probe_loss(b, y), probe_loss(b, b.op("linear", {x, w}), "probe2")});
      },
      {});
  EXPECT_EQ(checked, 2u);
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {3, 5}), w = b.parameter("w", DType::F32, {4, 5});
  try {
    b.op("linear", {x, w, b.parameter("bias", DType::F32, {4})}, {{"scale", 2.0}});
    ADD_FAILURE() << "a linear with a bias and a scale was accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("takes no scale"), std::string::npos) << error.what();
  }
}

// linear_add and linear_backward_input_add on the CPU backend equal the product plus the addend
// (the same double sums; only the order of the last addition differs: 1e-14).
TEST(OpsDefs, LinearAddOpsEqualProductPlusAddend) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F64, {3, 5}, false), w = b.parameter("w", DType::F64, {4, 5}, false);
  TensorId c_out = b.parameter("c_out", DType::F64, {3, 4}, false), c_in = b.parameter("c_in", DType::F64, {3, 5}, false);
  TensorId d = b.parameter("d", DType::F64, {3, 4}, false);
  TensorId fused_forward = b.op("linear_add", {x, w, c_out});
  TensorId plain_forward = b.op("add", {b.op("linear", {x, w}), c_out});
  TensorId fused_input = b.op("linear_backward_input_add", {d, w, c_in});
  TensorId plain_input = b.op("add", {b.op("linear_backward_input", {d, w}), c_in});
  // With a product factor (the LoRA scaling): the factor multiplies the product, not the addend.
  const json factor{{"scale", 2.5}};
  TensorId scaled_forward = b.op("linear_add", {x, w, c_out}, factor);
  TensorId plain_scaled_forward = b.op("add", {b.op("scale", {b.op("linear", {x, w})}, {{"factor", 2.5}}), c_out});
  TensorId scaled_input = b.op("linear_backward_input_add", {d, w, c_in}, factor);
  TensorId plain_scaled_input = b.op("add", {b.op("linear_backward_input", {d, w}, factor), c_in});
  TensorId scaled_weight = b.op("linear_backward_weight", {d, x}, factor);
  TensorId plain_scaled_weight = b.op("scale", {b.op("linear_backward_weight", {d, x})}, {{"factor", 2.5}});
  for (TensorId id : {fused_forward, plain_forward, fused_input, plain_input, scaled_forward, plain_scaled_forward,
                      scaled_input, plain_scaled_input, scaled_weight, plain_scaled_weight}) {
    b.mark_output(id);
  }
  ForwardRun run(b, 21);
  run.backend.execute({});
  for (auto [fused, plain] : {std::pair{fused_forward, plain_forward}, std::pair{fused_input, plain_input},
                              std::pair{scaled_forward, plain_scaled_forward}, std::pair{scaled_input, plain_scaled_input},
                              std::pair{scaled_weight, plain_scaled_weight}}) {
    const std::vector<double> a = run.read(fused), e = run.read(plain);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(a[i], e[i], 1e-14) << run.plan.graph.tensor(fused).name << "[" << i << "]";
    }
  }
}

// linear_backward_weight_accumulate adds scale·d_outᵀ·x into what its output holds (autodiff's
// form of a low-precision weight gradient); here the output starts from known values.
TEST(OpsDefs, LinearBackwardWeightAccumulateAddsIntoItsOutput) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F64, {3, 5}, false), d = b.parameter("d", DType::F64, {3, 4}, false);
  TensorId accumulated = b.op("linear_backward_weight_accumulate", {d, x}, {{"scale", 2.5}});
  TensorId product = b.op("linear_backward_weight", {d, x});
  b.mark_output(accumulated);
  b.mark_output(product);
  compiler::ExecutionPlan plan = compiler::compile_forward(b.finish(), registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());
  const std::vector<double> xs = random_doubles(15, 31, 1.0), ds = random_doubles(12, 32, 1.0),
                            start = random_doubles(20, 33, 1.0);
  backend.write(x, std::as_bytes(std::span<const double>(xs)));
  backend.write(d, std::as_bytes(std::span<const double>(ds)));
  backend.write(accumulated, std::as_bytes(std::span<const double>(start)));
  backend.execute({});
  std::vector<double> result(20), plain(20);
  backend.read(accumulated, std::as_writable_bytes(std::span<double>(result)));
  backend.read(product, std::as_writable_bytes(std::span<double>(plain)));
  for (size_t i = 0; i < result.size(); ++i) EXPECT_NEAR(result[i], start[i] + 2.5 * plain[i], 1e-14) << i;
}

// linear_backward_low_rank(_accumulate): both gradients of a product with a narrow x in one op
// (the fused LoRA B backward), equal to linear_backward_input and linear_backward_weight with the
// same factor; the accumulating form adds d_weight to what its output holds.
TEST(OpsDefs, LinearBackwardLowRankEqualsTheSeparateProducts) {
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "write");
    GraphBuilder b(registry());
    TensorId d = b.parameter("d", DType::F64, {3, 6}, false), x = b.parameter("x", DType::F64, {3, 2}, false);
    TensorId w = b.parameter("w", DType::F64, {6, 2}, false);
    const json factor{{"scale", 2.5}};
    graph::OpOutputs both = b.op(accumulate ? "linear_backward_low_rank_accumulate" : "linear_backward_low_rank",
                                 {d, x, w}, factor);
    TensorId d_x = b.op("linear_backward_input", {d, w}, factor), d_w = b.op("linear_backward_weight", {d, x}, factor);
    for (TensorId id : {both[0], both[1], d_x, d_w}) b.mark_output(id);
    ForwardRun run(b, 41);
    const std::vector<double> start = random_doubles(12, 45, 1.0);
    run.backend.write(both[1], std::as_bytes(std::span<const double>(start)));
    run.backend.execute({});
    const std::vector<double> fused_x = run.read(both[0]), fused_w = run.read(both[1]), plain_x = run.read(d_x),
                              plain_w = run.read(d_w);
    for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(fused_x[i], plain_x[i], 1e-14) << "d_x " << i;
    for (size_t i = 0; i < 12; ++i) {
      EXPECT_NEAR(fused_w[i], plain_w[i] + (accumulate ? start[i] : 0.0), 1e-14) << "d_weight " << i;
    }
  }
}

TEST(OpsDefs, LinearAddShapeRules) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {3, 5}), w = b.parameter("w", DType::F32, {4, 5});
  EXPECT_THROW(b.op("linear_add", {x, w, b.parameter("c35", DType::F32, {3, 5})}), UserError);  // not the out shape
  EXPECT_THROW(b.op("linear_add", {x, w, b.parameter("c64", DType::F64, {3, 4})}), UserError);  // not the dtype
  EXPECT_THROW(b.op("linear_add", {x, w}), UserError);
  EXPECT_THROW(b.op("linear_backward_input_add", {b.parameter("d", DType::F32, {3, 4}), w,
                                                  b.parameter("c34", DType::F32, {3, 4})}), UserError);
  EXPECT_EQ(b.type(b.op("linear_add", {x, w, b.parameter("c", DType::F32, {3, 4})})),
            (graph::TensorType{DType::F32, {3, 4}}));
}

// x fans out to three linears (frozen weights) and a linear_add. In a BF16 graph the input
// gradients fold x's earlier contributions into their matmul (linear_backward_input_add), so
// autodiff emits no add for x; an F32 graph keeps three plain products and two adds.
TEST(OpsDefs, LowPrecisionLinearInputGradientsFoldTheFanOutSum) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    GraphBuilder b(registry());
    TensorId x = b.parameter("x", dtype, {2, 3, 8});
    TensorId total;
    for (int i = 0; i < 3; ++i) {
      TensorId w = b.parameter("w" + std::to_string(i), dtype, {6, 8}, false);
      TensorId y = i < 2 ? b.op("linear", {x, w}) : b.op("linear_add", {x, w, b.parameter("c", dtype, {2, 3, 6}, false)});
      total = i == 0 ? y : b.op("add", {total, y});
    }
    TensorId loss = b.op("sum", {total});
    b.mark_output(loss);
    compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
    std::map<std::string, int> backward;
    int sums_of_x = 0;
    for (const graph::Node& node : plan.graph.nodes) {
      if (node.phase != graph::NodePhase::Backward) continue;
      ++backward[node.op];
      if (node.op == "add" && node.name.find("grad.x.sum") != std::string::npos) ++sums_of_x;
    }
    EXPECT_EQ(sums_of_x, dtype == DType::BF16 ? 0 : 2) << dtype_safetensors_name(dtype);
    EXPECT_EQ(backward["linear_backward_input"], dtype == DType::BF16 ? 1 : 3) << dtype_safetensors_name(dtype);
    EXPECT_EQ(backward["linear_backward_input_add"], dtype == DType::BF16 ? 2 : 0) << dtype_safetensors_name(dtype);
  }
}

}  // namespace
}  // namespace surogate
