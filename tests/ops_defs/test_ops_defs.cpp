// Graph-level tests of the model op registrations (src/ops/defs): every op is put in a small
// graph built with GraphBuilder, compiled with compile_training, run on the CpuBackend in F64,
// and every parameter gradient is checked against central finite differences of the whole
// graph's loss (directional derivative along a random direction, step 1e-5, relative error
// < 1e-6). Floating operands are trainable parameters so activation gradients are checked too;
// the loss is sum(out · probe) with a frozen random probe. Plus a 2-layer Llama-shaped decoder,
// shape-rule errors, and the names the trainer's decoder builder relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "graph/builder.h"
#include "graph/op_registry.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"

namespace surogate {
namespace {
using graph::GraphBuilder;
using graph::Shape;
using graph::TensorId;
using nlohmann::json;

constexpr double kStep = 1e-5;
constexpr double kTolerance = 1e-6;

const graph::OpRegistry& registry() {
  static const graph::OpRegistry instance = [] {
    graph::OpRegistry r;
    graph::register_core_ops(r);
    ops::register_model_ops(r);
    return r;
  }();
  return instance;
}

std::vector<double> random_doubles(size_t count, uint32_t seed, double scale) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> distribution(-scale, scale);
  std::vector<double> values(count);
  for (double& value : values) value = distribution(generator);
  return values;
}

// sum(out · probe) with a frozen random probe of out's type.
TensorId probe_loss(GraphBuilder& b, TensorId out, const std::string& name = "probe") {
  TensorId probe = b.parameter(name, DType::F64, b.type(out).shape, /*trainable=*/false);
  return b.op("sum", {b.op("mul", {out, probe})});
}

using IntInputs = std::map<std::string, std::vector<int32_t>>;

struct Run {
  compiler::ExecutionPlan plan;
  runtime::CpuBackend backend;
  double loss() {
    double value = 0.0;
    backend.read(plan.loss, std::as_writable_bytes(std::span<double>(&value, 1)));
    return value;
  }
  double step() {
    backend.zero_gradients();
    backend.execute({});
    return loss();
  }
};

// A forward-only plan on the CPU backend, for comparing op outputs: parameters filled with seeded
// random doubles, outputs read back as doubles.
struct ForwardRun {
  compiler::ExecutionPlan plan;
  runtime::CpuBackend backend;

  ForwardRun(GraphBuilder& builder, uint32_t seed) : plan(compiler::compile_forward(builder.finish(), registry())) {
    backend.load(plan, registry());
    for (TensorId id : plan.graph.parameters) {
      auto values = random_doubles(static_cast<size_t>(plan.graph.tensor(id).type.numel()), seed++, 1.0);
      backend.write(id, std::as_bytes(std::span<const double>(values)));
    }
  }
  std::vector<double> read(TensorId id) {
    std::vector<double> values(static_cast<size_t>(plan.graph.tensor(id).type.numel()));
    backend.read(id, std::as_writable_bytes(std::span<double>(values)));
    return values;
  }
};

// Builds, compiles and runs the graph; checks every parameter gradient by finite differences.
// Returns the number of gradients checked.
size_t check_gradients(const std::function<TensorId(GraphBuilder&)>& build, const IntInputs& ints,
                       std::map<std::string, double> fixed = {}) {
  GraphBuilder builder(registry());
  TensorId loss = build(builder);
  builder.mark_output(loss);
  Run run{compiler::compile_training(builder.finish(), loss, registry()), {}};
  run.backend.load(run.plan, registry());
  const graph::Graph& g = run.plan.graph;
  uint32_t seed = 11;
  for (TensorId id : g.parameters) {
    auto values = random_doubles(static_cast<size_t>(g.tensor(id).type.numel()), seed++, 0.5);
    if (auto it = fixed.find(g.tensor(id).name); it != fixed.end()) values.assign(values.size(), it->second);
    run.backend.write(id, std::as_bytes(std::span<const double>(values)));
  }
  for (TensorId id : g.inputs) {
    const auto& info = g.tensor(id);
    auto it = ints.find(info.name);
    EXPECT_NE(it, ints.end()) << "no values for input " << info.name;
    if (it == ints.end()) return 0;
    run.backend.write(id, std::as_bytes(std::span<const int32_t>(it->second)));
  }
  const double loss0 = run.step();
  EXPECT_TRUE(std::isfinite(loss0));
  size_t checked = 0;
  for (auto [parameter, gradient_id] : run.plan.parameter_gradients) {
    const std::string& name = g.tensor(parameter).name;
    const size_t count = static_cast<size_t>(g.tensor(parameter).type.numel());
    std::vector<double> gradient(count), original(count);
    run.backend.read(gradient_id, std::as_writable_bytes(std::span<double>(gradient)));
    run.backend.read(parameter, std::as_writable_bytes(std::span<double>(original)));
    auto direction = random_doubles(count, seed++, 1.0);
    double analytic = 0.0;
    for (size_t i = 0; i < count; ++i) analytic += gradient[i] * direction[i];
    auto evaluate = [&](double sign) {
      std::vector<double> moved(original);
      for (size_t i = 0; i < count; ++i) moved[i] += sign * kStep * direction[i];
      run.backend.write(parameter, std::as_bytes(std::span<const double>(moved)));
      return run.step();
    };
    const double numeric = (evaluate(+1.0) - evaluate(-1.0)) / (2.0 * kStep);
    run.backend.write(parameter, std::as_bytes(std::span<const double>(original)));
    const double error = std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), 1e-8});
    EXPECT_GT(std::abs(numeric), 1e-6) << "parameter " << name << ": the check is vacuous (zero derivative)";
    EXPECT_LT(error, kTolerance) << "parameter " << name << ": analytic " << analytic << " numeric " << numeric;
    // Running again gives the same gradient (outputs fully overwritten, parameter grads re-zeroed).
    run.step();
    std::vector<double> again(count);
    run.backend.read(gradient_id, std::as_writable_bytes(std::span<double>(again)));
    EXPECT_EQ(again, gradient) << "parameter " << name << ": gradient changed between identical steps";
    ++checked;
  }
  return checked;
}

TEST(OpsDefs, Embedding) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId ids = b.input("ids", DType::I32, {2, 3});
        TensorId table = b.parameter("table", DType::F64, {7, 4});
        return probe_loss(b, b.op("embedding", {ids, table}));
      },
      {{"ids", {1, 3, 3, 0, 6, 1}}});
  EXPECT_EQ(checked, 1u);
}

TEST(OpsDefs, RmsnormGrouped) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3, 8});
        TensorId w = b.parameter("w", DType::F64, {4});
        return probe_loss(b, b.op("rmsnorm", {x, w}, {{"eps", 1e-5}}));
      },
      {});
  EXPECT_EQ(checked, 2u);
}

TEST(OpsDefs, FusedResidualRmsnormBothOutputs) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId r = b.parameter("r", DType::F64, {3, 6});
        TensorId x = b.parameter("x", DType::F64, {3, 6});
        TensorId w = b.parameter("w", DType::F64, {6});
        auto outs = b.op("fused_residual_rmsnorm", {r, x, w}, {{"eps", 1e-6}});  // (out, residual_out, rstd)
        return b.op("add", {probe_loss(b, outs[1], "probe_r"), probe_loss(b, outs[0], "probe_y")});
      },
      {});
  EXPECT_EQ(checked, 3u);
}

TEST(OpsDefs, FusedResidualRmsnormNormOnly) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId r = b.parameter("r", DType::F64, {3, 6});
        TensorId x = b.parameter("x", DType::F64, {3, 6});
        TensorId w = b.parameter("w", DType::F64, {6});
        auto outs = b.op("fused_residual_rmsnorm", {r, x, w}, {{"eps", 1e-6}});
        return probe_loss(b, outs[0]);
      },
      {});
  EXPECT_EQ(checked, 3u);
}

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

// scale_by: a tensor times a scalar tensor (the frozen-head loss backward's d_loss · d_hidden);
// the gradient of x matches finite differences; the factor must be a scalar of the statistic dtype
// and is not differentiable.
TEST(OpsDefs, ScaleBy) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3});
        TensorId factor = b.parameter("factor", DType::F64, {}, false);
        return probe_loss(b, b.op("scale_by", {x, factor}));
      },
      {}, {{"factor", -1.75}});
  EXPECT_EQ(checked, 1u);
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {2, 3});
  EXPECT_THROW(b.op("scale_by", {x, b.parameter("v", DType::F32, {1})}), UserError);    // not a scalar
  EXPECT_THROW(b.op("scale_by", {x, b.parameter("d", DType::F64, {})}), UserError);     // not x's dtype
  TensorId bf16 = b.parameter("h", DType::BF16, {2, 3});
  EXPECT_THROW(b.op("scale_by", {bf16, b.parameter("s16", DType::BF16, {})}), UserError);  // F32 for BF16 x
  EXPECT_EQ(b.type(b.op("scale_by", {bf16, b.parameter("s32", DType::F32, {})})), b.type(bf16));
  GraphBuilder with_trainable_factor(registry());
  TensorId x2 = with_trainable_factor.parameter("x", DType::F32, {2, 3});
  TensorId factor = with_trainable_factor.parameter("factor", DType::F32, {});
  TensorId loss = with_trainable_factor.op("sum", {with_trainable_factor.op("scale_by", {x2, factor})});
  with_trainable_factor.mark_output(loss);
  try {
    compiler::compile_training(with_trainable_factor.finish(), loss, registry());
    ADD_FAILURE() << "a trainable factor was accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("not differentiable"), std::string::npos) << error.what();
  }
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

TEST(OpsDefs, Swiglu) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId gate = b.parameter("gate", DType::F64, {2, 3, 5});
        TensorId up = b.parameter("up", DType::F64, {2, 3, 5});
        TensorId gate_up = b.parameter("gate_up", DType::F64, {4, 6});
        return b.op("add", {probe_loss(b, b.op("swiglu", {gate, up}), "p1"),
                            probe_loss(b, b.op("swiglu_fused", {gate_up}), "p2")});
      },
      {});
  EXPECT_EQ(checked, 3u);
}

TEST(OpsDefs, RopeFromConfigAttrsPartialRotary) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId positions = b.input("position_ids", DType::I32, {2, 5});
        json config{{"rope_type", "llama3"}, {"theta", 500000.0}, {"rotary_dim", 4}, {"factor", 8.0},
                    {"original_max_position_embeddings", 8}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                    {"dtype", "F64"}};
        auto tables = b.op("rope_cos_sin", {positions}, config);
        TensorId x4 = b.parameter("x4", DType::F64, {2, 5, 3, 6});
        TensorId flat = b.parameter("flat", DType::F64, {2, 5, 12});
        TensorId a = b.op("rope", {x4, tables[0], tables[1]});
        TensorId c = b.op("rope", {flat, tables[0], tables[1]}, {{"heads", 2}, {"head_dim", 6}});
        return b.op("add", {probe_loss(b, a, "p1"), probe_loss(b, c, "p2")});
      },
      {{"position_ids", {0, 1, 2, 0, 1, 3, 4, 5, 6, 7}}});
  EXPECT_EQ(checked, 2u);
}

// Qwen3's q/k norm + RoPE: full rotary on a flat projection, partial rotary with a scaling.
TEST(OpsDefs, FusedRmsnormRopeFullAndPartialRotary) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId positions = b.input("position_ids", DType::I32, {2, 5});
        TensorId q = b.parameter("q", DType::F64, {2, 5, 3 * 8});
        TensorId wq = b.parameter("wq", DType::F64, {8});
        TensorId k = b.parameter("k", DType::F64, {2, 5, 2 * 8});
        TensorId wk = b.parameter("wk", DType::F64, {8});
        json full{{"heads", 3}, {"head_dim", 8}, {"eps", 1e-6}, {"inv_freq", {1.0, 0.1, 0.01, 0.001}}};
        json partial{{"heads", 2},       {"head_dim", 8},          {"eps", 1e-6},
                     {"inv_freq", {0.7, 0.05}}, {"attention_scaling", 1.2}};
        TensorId a = b.op("fused_rmsnorm_rope", {q, wq, positions}, full);
        TensorId c = b.op("fused_rmsnorm_rope", {k, wk, positions}, partial);
        return b.op("add", {probe_loss(b, a, "p1"), probe_loss(b, c, "p2")});
      },
      {{"position_ids", {0, 1, 2, 0, 1, 3, 4, 5, 6, 7}}});
  EXPECT_EQ(checked, 4u);
}

// In F32 (the CPU oracle's dtype) the fused op's output and gradients are the unfused graph's
// rmsnorm → rope_cos_sin → rope bit for bit: the decoder's switch to it changes no CPU result.
TEST(OpsDefs, FusedRmsnormRopeEqualsUnfusedGraphInF32) {
  const std::vector<int32_t> positions{0, 1, 2, 3, 0, 1, 0, 1, 2, 3, 4, 5};
  const json inv_freq = {1.0, 0.31622776601683794, 0.1, 0.031622776601683794};
  auto run = [&](bool fused) {
    GraphBuilder b(registry());
    TensorId ids = b.input("position_ids", DType::I32, {2, 6});
    TensorId x = b.parameter("x", DType::F32, {2, 6, 2 * 8});
    TensorId w = b.parameter("w", DType::F32, {8});
    TensorId out;
    if (fused) {
      out = b.op("fused_rmsnorm_rope", {x, w, ids},
                 {{"heads", 2}, {"head_dim", 8}, {"eps", 1e-6}, {"inv_freq", inv_freq}, {"attention_scaling", 1.1}});
    } else {
      TensorId normed = b.op("rmsnorm", {x, w}, {{"eps", 1e-6}});
      auto tables = b.op("rope_cos_sin", {ids}, {{"inv_freq", inv_freq}, {"attention_scaling", 1.1}});
      out = b.op("rope", {normed, tables[0], tables[1]}, {{"heads", 2}, {"head_dim", 8}});
    }
    TensorId probe = b.parameter("probe", DType::F32, b.type(out).shape, false);
    TensorId loss = b.op("sum", {b.op("mul", {out, probe})});
    b.mark_output(out);
    b.mark_output(loss);
    compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
    runtime::CpuBackend backend;
    backend.load(plan, registry());
    uint32_t seed = 5;
    for (const char* name : {"x", "w", "probe"}) {
      TensorId id = plan.tensor(name);
      auto values = random_doubles(static_cast<size_t>(plan.graph.tensor(id).type.numel()), seed++, 1.5);
      std::vector<float> floats(values.begin(), values.end());
      backend.write(id, std::as_bytes(std::span<const float>(floats)));
    }
    runtime::InputBinding input{plan.tensor("position_ids"), std::as_bytes(std::span<const int32_t>(positions))};
    backend.zero_gradients();
    backend.execute(std::span<const runtime::InputBinding>(&input, 1));
    std::vector<std::vector<float>> results;
    const TensorId d_x = plan.parameter_gradients.at(plan.tensor("x"));
    const TensorId d_w = plan.parameter_gradients.at(plan.tensor("w"));
    for (TensorId id : {out, d_x, d_w}) {
      std::vector<float> values(static_cast<size_t>(plan.graph.tensor(id).type.numel()));
      backend.read(id, std::as_writable_bytes(std::span<float>(values)));
      results.push_back(std::move(values));
    }
    return results;
  };
  const auto fused = run(true), unfused = run(false);
  EXPECT_EQ(fused[0], unfused[0]) << "out";
  EXPECT_EQ(fused[1], unfused[1]) << "d_x";
  EXPECT_EQ(fused[2], unfused[2]) << "d_weight";
}

TEST(OpsDefs, FusedRmsnormRopeShapeRules) {
  GraphBuilder b(registry());
  TensorId ids = b.input("ids", DType::I32, {2, 3});
  TensorId x = b.parameter("x", DType::F32, {2, 3, 16});
  TensorId w = b.parameter("w", DType::F32, {8});
  const json attrs{{"heads", 2}, {"head_dim", 8}, {"eps", 1e-6}, {"inv_freq", {1.0, 0.1, 0.01, 0.001}}};
  EXPECT_NO_THROW(b.op("fused_rmsnorm_rope", {x, w, ids}, attrs));
  json wide_rotary = attrs;
  wide_rotary["inv_freq"] = {1.0, 0.5, 0.25, 0.125, 0.0625};  // rotary_dim 10 > head_dim 8
  EXPECT_THROW(b.op("fused_rmsnorm_rope", {x, w, ids}, wide_rotary), UserError);
  json three_heads = attrs;
  three_heads["heads"] = 3;  // 3 · 8 != 16
  EXPECT_THROW(b.op("fused_rmsnorm_rope", {x, w, ids}, three_heads), UserError);
  EXPECT_THROW(b.op("fused_rmsnorm_rope", {x, w, b.input("few", DType::I32, {2})}, attrs), UserError);
  EXPECT_THROW(b.op("fused_rmsnorm_rope", {x, b.parameter("w16", DType::F32, {16}), ids}, attrs), UserError);
}

TEST(OpsDefs, AttentionGqaDocumentsWindow) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId docs = b.input("document_ids", DType::I32, {2, 5});
        TensorId q = b.parameter("q", DType::F64, {2, 5, 4, 3});
        TensorId k = b.parameter("k", DType::F64, {2, 5, 2, 3});
        TensorId v = b.parameter("v", DType::F64, {2, 5, 2, 3});
        return probe_loss(b, b.op("attention", {q, k, v, docs}, {{"window", 3}}));
      },
      {{"document_ids", {0, 0, 0, 1, 1, 0, 0, 0, 0, 0}}});
  EXPECT_EQ(checked, 3u);
}

TEST(OpsDefs, AttentionFlatNoDocumentsCustomScale) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId q = b.parameter("q", DType::F64, {1, 6, 8});
        TensorId k = b.parameter("k", DType::F64, {1, 6, 4});
        TensorId v = b.parameter("v", DType::F64, {1, 6, 4});
        return probe_loss(b, b.op("attention", {q, k, v},
                                  {{"query_heads", 4}, {"kv_heads", 2}, {"head_dim", 2}, {"scale", 0.7}}));
      },
      {});
  EXPECT_EQ(checked, 3u);
}

const std::vector<int32_t> kLabels{3, -100, 0, 10, 5, -100, 7, 2};  // 6 valid of 8

TEST(OpsDefs, LmHeadCrossEntropyScaledMean) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId labels = b.input("labels", DType::I32, {2, 4});
        TensorId hidden = b.parameter("hidden", DType::F64, {2, 4, 6});
        TensorId weight = b.parameter("weight", DType::F64, {11, 6});
        TensorId scale = b.parameter("loss_scale", DType::F64, {}, false);
        auto outs = b.op("lm_head_cross_entropy", {hidden, weight, labels}, {{"chunks", 3}});
        return b.op("mul", {outs[0], scale});
      },
      {{"labels", kLabels}}, {{"loss_scale", 1.0 / 6.0}});
  EXPECT_EQ(checked, 2u);
}

TEST(OpsDefs, LmHeadCrossEntropyCountsValidTokens) {
  GraphBuilder b(registry());
  TensorId labels = b.input("labels", DType::I32, {8});
  TensorId hidden = b.parameter("hidden", DType::F64, {8, 6});
  TensorId weight = b.parameter("weight", DType::F64, {11, 6});
  auto outs = b.op("lm_head_cross_entropy", {hidden, weight, labels});
  b.mark_output(outs[0]);
  b.mark_output(outs[1]);
  auto plan = compiler::compile_forward(b.finish(), registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());
  auto h = random_doubles(48, 1, 0.5), w = random_doubles(66, 2, 0.5);
  backend.write(hidden, std::as_bytes(std::span<const double>(h)));
  backend.write(weight, std::as_bytes(std::span<const double>(w)));
  runtime::InputBinding input{labels, std::as_bytes(std::span<const int32_t>(kLabels))};
  backend.execute(std::span<const runtime::InputBinding>(&input, 1));
  double loss_sum = 0.0, valid = 0.0;
  backend.read(outs[0], std::as_writable_bytes(std::span<double>(&loss_sum, 1)));
  backend.read(outs[1], std::as_writable_bytes(std::span<double>(&valid, 1)));
  EXPECT_EQ(valid, 6.0);
  EXPECT_GT(loss_sum, 6.0 * std::log(11.0) * 0.5);  // near-uniform logits: about ln V per token
}

TEST(OpsDefs, LmHeadLossStopGapConvention) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId labels = b.input("targets", DType::I32, {2, 4});
        TensorId hidden = b.parameter("hidden", DType::F64, {2, 4, 6});
        TensorId weight = b.parameter("weight", DType::F64, {11, 6});
        TensorId scale = b.parameter("loss_scale", DType::F64, {}, false);
        return b.op("lm_head_loss", {hidden, weight, labels, scale}, {{"chunks", 2}})[0];
      },
      {{"targets", kLabels}}, {{"loss_scale", 0.25}});
  EXPECT_EQ(checked, 2u);
}

// A frozen head: compile_training rewrites lm_head_loss to lm_head_loss_with_input_grad
// (compiler/loss_input_grad.h), whose backward only scales the saved ∂loss/∂hidden by d_loss.
// The hidden gradient still matches finite differences, and equals bit for bit the one of the plan
// compiled without the rewrite (lm_head_loss_backward); a trainable head is not rewritten.
TEST(OpsDefs, LmHeadLossFrozenHeadGradientComesFromTheForward) {
  auto build = [](bool trainable_head) {
    return [trainable_head](GraphBuilder& b) {
      TensorId labels = b.input("targets", DType::I32, {2, 4});
      TensorId hidden = b.parameter("hidden", DType::F64, {2, 4, 6});
      TensorId weight = b.parameter("weight", DType::F64, {11, 6}, trainable_head);
      TensorId scale = b.parameter("loss_scale", DType::F64, {}, false);
      return b.op("lm_head_loss", {hidden, weight, labels, scale}, {{"chunks", 2}})[0];
    };
  };
  EXPECT_EQ(check_gradients(build(false), {{"targets", kLabels}}, {{"loss_scale", 0.25}}), 1u);

  auto hidden_gradient = [&](bool trainable_head, bool rewrite) {
    GraphBuilder builder(registry());
    TensorId loss = build(trainable_head)(builder);
    builder.mark_output(loss);
    compiler::CompileOptions options;
    options.loss_input_grad_in_forward = rewrite;
    surogate::Run run{compiler::compile_training(builder.finish(), loss, registry(), options), {}};
    const graph::Graph& g = run.plan.graph;
    bool rewritten = false, recomputes_logits = false;
    for (const graph::Node& node : g.nodes) {
      rewritten |= node.op == "lm_head_loss_with_input_grad";
      recomputes_logits |= node.op == "lm_head_loss_backward";
    }
    EXPECT_EQ(rewritten, rewrite && !trainable_head);
    EXPECT_EQ(recomputes_logits, !rewritten);
    run.backend.load(run.plan, registry());
    const std::vector<double> hidden = random_doubles(48, 3, 0.5), weight = random_doubles(66, 4, 0.5);
    const double scale = 0.25;
    run.backend.write(g.require_tensor("hidden"), std::as_bytes(std::span<const double>(hidden)));
    run.backend.write(g.require_tensor("weight"), std::as_bytes(std::span<const double>(weight)));
    run.backend.write(g.require_tensor("loss_scale"), std::as_bytes(std::span<const double>(&scale, 1)));
    run.backend.write(g.require_tensor("targets"), std::as_bytes(std::span<const int32_t>(kLabels)));
    run.step();
    std::vector<double> gradient(48);
    run.backend.read(run.plan.parameter_gradients.at(g.require_tensor("hidden")),
                     std::as_writable_bytes(std::span<double>(gradient)));
    return gradient;
  };
  const std::vector<double> from_forward = hidden_gradient(false, true);
  EXPECT_EQ(from_forward, hidden_gradient(false, false));
  EXPECT_EQ(from_forward, hidden_gradient(true, true));
}

// A 2-layer Llama-shaped decoder: tied embedding, GQA with RoPE (flat projections, attrs give
// the heads), packed documents, SwiGLU MLP, chunked loss scaled to a token mean.
TEST(OpsDefs, TwoLayerLlamaComposition) {
  const int64_t batch = 2, seq = 5, hidden_size = 8, heads = 4, kv_heads = 2, head_dim = 2, inter = 6, vocab = 13;
  size_t checked = check_gradients(
      [&](GraphBuilder& b) {
        TensorId ids = b.input("input_ids", DType::I32, {batch, seq});
        TensorId positions = b.input("position_ids", DType::I32, {batch, seq});
        TensorId docs = b.input("document_ids", DType::I32, {batch, seq});
        TensorId targets = b.input("targets", DType::I32, {batch, seq});
        TensorId embed = b.parameter("embed.weight", DType::F64, {vocab, hidden_size});
        auto tables = b.op("rope_cos_sin", {positions}, {{"rotary_dim", head_dim}, {"theta", 10000.0}, {"dtype", "F64"}});
        TensorId h = b.op("embedding", {ids, embed});
        for (int layer = 0; layer < 2; ++layer) {
          std::string p = "layers." + std::to_string(layer);
          auto param = [&](const std::string& name, Shape shape) { return b.parameter(p + name, DType::F64, shape); };
          TensorId n1 = b.op("rmsnorm", {h, param(".ln1.weight", {hidden_size})}, {{"eps", 1e-6}});
          TensorId q = b.op("linear", {n1, param(".q.weight", {heads * head_dim, hidden_size}), param(".q.bias", {heads * head_dim})});
          TensorId k = b.op("linear", {n1, param(".k.weight", {kv_heads * head_dim, hidden_size})});
          TensorId v = b.op("linear", {n1, param(".v.weight", {kv_heads * head_dim, hidden_size})});
          q = b.op("rope", {q, tables[0], tables[1]}, {{"heads", heads}, {"head_dim", head_dim}});
          k = b.op("rope", {k, tables[0], tables[1]}, {{"heads", kv_heads}, {"head_dim", head_dim}});
          TensorId context = b.op("attention", {q, k, v, docs},
                                  {{"query_heads", heads}, {"kv_heads", kv_heads}, {"head_dim", head_dim}, {"window", 0}});
          TensorId attention_out = b.op("linear", {context, param(".o.weight", {hidden_size, heads * head_dim})});
          auto fused = b.op("fused_residual_rmsnorm", {h, attention_out, param(".ln2.weight", {hidden_size})}, {{"eps", 1e-6}});
          TensorId gate = b.op("linear", {fused[0], param(".gate.weight", {inter, hidden_size})});
          TensorId up = b.op("linear", {fused[0], param(".up.weight", {inter, hidden_size})});
          TensorId down = b.op("linear", {b.op("swiglu", {gate, up}), param(".down.weight", {hidden_size, inter})});
          h = b.op("add", {fused[1], down});
        }
        TensorId final_hidden = b.op("rmsnorm", {h, b.parameter("final_norm.weight", DType::F64, {hidden_size})}, {{"eps", 1e-6}});
        TensorId scale = b.parameter("loss_scale", DType::F64, {}, false);
        auto loss = b.op("lm_head_cross_entropy", {final_hidden, embed, targets}, {{"chunks", 2}});
        return b.op("mul", {loss[0], scale});
      },
      {{"input_ids", {1, 5, 12, 0, 3, 7, 7, 2, 9, 11}},
       {"position_ids", {0, 1, 2, 0, 1, 0, 1, 2, 3, 4}},
       {"document_ids", {0, 0, 0, 1, 1, 0, 0, 0, 0, 0}},
       {"targets", {5, 12, -100, 3, -100, 7, 2, 9, 11, 4}}},
      {{"loss_scale", 1.0 / 8.0}});
  EXPECT_EQ(checked, 2u + 2u * 10u);
}

TEST(OpsDefs, ShapeRulesGiveReadableErrors) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {3, 5});
  TensorId w = b.parameter("w", DType::F32, {4, 6});
  try {
    b.op("linear", {x, w}, json::object(), "proj");
    FAIL() << "expected a UserError";
  } catch (const UserError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("proj"), std::string::npos) << message;
  }
  TensorId q = b.parameter("q", DType::F32, {1, 4, 3, 2});
  TensorId kv = b.parameter("kv", DType::F32, {1, 4, 2, 2});
  EXPECT_THROW(b.op("attention", {q, kv, kv}), UserError);  // 3 query heads over 2 kv heads
  TensorId ids = b.input("ids", DType::F32, {4});
  EXPECT_THROW(b.op("embedding", {ids, w}), UserError);
  EXPECT_THROW(b.op("rmsnorm", {x, b.parameter("n", DType::F32, {5})}), UserError);  // eps missing
}

// The ops the decoder builder (src/models/decoder_graph.cpp) emits.
TEST(OpsDefs, DecoderOpNamesAreRegistered) {
  for (const char* name : {"embedding", "embedding_backward", "rmsnorm", "rmsnorm_backward", "linear", "linear_backward",
                           "bias_gradient", "swiglu", "swiglu_backward", "rope_cos_sin", "rope", "rope_backward",
                           "attention", "attention_backward", "lm_head_loss", "lm_head_loss_backward", "lm_head_accuracy",
                           "lm_head_loss_with_input_grad", "scale_by", "linear_backward_weight_accumulate",
                           "linear_backward_low_rank", "linear_backward_low_rank_accumulate", "concat", "split",
                           "fused_residual_rmsnorm", "fused_residual_rmsnorm_backward", "fused_rmsnorm_rope",
                           "fused_rmsnorm_rope_backward"}) {
    EXPECT_NE(registry().find(name), nullptr) << name;
  }
}

}  // namespace
}  // namespace surogate
