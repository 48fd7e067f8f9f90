// Autodiff: gradients of composed graphs match finite differences (F64), fan-out sums (and a
// rule folding the partial sum into its own output), frozen parameters get nothing, gradients
// accumulate across executions.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "compiler/autodiff.h"
#include "compiler/engine_test_util.h"
#include "compiler/toy_ops.h"

namespace surogate::testing {
namespace {

using namespace surogate::graph;
using compiler::ExecutionPlan;
using runtime::CpuBackend;

double run_loss(CpuBackend& backend, const ExecutionPlan& plan) {
  backend.execute({});
  return backend.view<double>(plan.loss)[0];
}

// Compares every parameter gradient with central differences; relative tolerance 1e-6 of
// max(|analytic|, |numeric|, 1e-3): F64 with step 1e-6 gives ~1e-9 error on these graphs.
void expect_gradients_match_finite_differences(Graph forward, TensorId loss, size_t expected_gradients) {
  ExecutionPlan plan = compiler::compile_training(std::move(forward), loss, toy_registry());
  ASSERT_EQ(plan.parameter_gradients.size(), expected_gradients);
  CpuBackend backend;
  backend.load(plan, toy_registry());
  randomize_all<double>(backend, plan, 11);
  backend.zero_gradients();
  run_loss(backend, plan);
  // Read every analytic gradient first: the executions below keep accumulating into them.
  std::map<TensorId, std::vector<double>> analytic_gradients;
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    analytic_gradients[parameter] = read_vector<double>(backend, gradient);
  }
  for (const auto& [parameter, analytic] : analytic_gradients) {
    auto values = backend.view<double>(parameter);
    for (size_t i = 0; i < values.size(); i += 1 + values.size() / 7) {
      const double step = 1e-6;
      double saved = values[i];
      values[i] = saved + step;
      double plus = run_loss(backend, plan);
      values[i] = saved - step;
      double minus = run_loss(backend, plan);
      values[i] = saved;
      double numeric = (plus - minus) / (2 * step);
      double bound = 1e-6 * std::max({std::fabs(analytic[i]), std::fabs(numeric), 1e-3});
      EXPECT_NEAR(analytic[i], numeric, bound) << plan.graph.tensor(parameter).name << "[" << i << "]";
    }
  }
}

TEST(Autodiff, ToyTransformerMatchesFiniteDifferences) {
  ToyModel model = build_toy_transformer(2, 3, 8, 12, DType::F64);
  expect_gradients_match_finite_differences(std::move(model.graph), model.loss, 10);
}

TEST(Autodiff, FanOutAndTiedWeightsSumTheirContributions) {
  GraphBuilder b(toy_registry());
  TensorId x = b.input("x", DType::F64, {3, 4});
  TensorId w = b.parameter("tied", DType::F64, {4, 4});
  TensorId h = b.op("toy_matmul", {x, w});                                    // uses w
  TensorId t = b.op("toy_tanh", {h});
  TensorId y = b.op("toy_matmul", {t, w}, {{"transpose_b", true}});          // uses w again
  TensorId z = b.op("add", {b.op("mul", {y, y}), b.op("mul", {y, h})});      // y and h fan out
  TensorId loss = b.op("sum", {z}, {}, "loss");
  b.mark_output(loss);
  Graph forward = b.finish();

  compiler::TrainingGraph training = compiler::build_training_graph(forward, loss, toy_registry());
  size_t accumulates = 0, sums = 0;
  for (const Node& node : training.graph.nodes) {
    if (node.op == "accumulate") ++accumulates;
    if (node.op == "add" && node.name.ends_with(".sum")) ++sums;
  }
  EXPECT_EQ(accumulates, 1u);
  EXPECT_GE(sums, 3u);  // tied weight, y (used twice by mul and once more), h
  expect_gradients_match_finite_differences(std::move(forward), loss, 1);
}

TEST(Autodiff, FrozenParametersGetNoGradientButGradientsFlowPastThem) {
  // LoRA shape: y = x W + (x A) B with W frozen.
  GraphBuilder b(toy_registry());
  TensorId x = b.input("x", DType::F64, {3, 6});
  TensorId w = b.parameter("base.weight", DType::F64, {6, 5}, /*trainable=*/false);
  TensorId a = b.parameter("lora_A", DType::F64, {6, 2});
  TensorId lora_b = b.parameter("lora_B", DType::F64, {2, 5});
  TensorId base = b.op("toy_matmul", {x, w}, {}, "base");
  TensorId adapter = b.op("toy_matmul", {b.op("toy_matmul", {x, a}), lora_b});
  TensorId out = b.op("toy_tanh", {b.op("add", {base, adapter})});
  TensorId loss = b.op("sum", {b.op("mul", {out, out})}, {}, "loss");
  b.mark_output(loss);
  Graph forward = b.finish();

  compiler::TrainingGraph training = compiler::build_training_graph(forward, loss, toy_registry());
  EXPECT_FALSE(training.parameter_gradients.contains(w));
  EXPECT_TRUE(training.parameter_gradients.contains(a));
  EXPECT_TRUE(training.parameter_gradients.contains(lora_b));
  // No backward node computes a gradient for x (an input) or w (frozen): the base matmul's
  // gradient rule is never asked for anything.
  for (const Node& node : training.graph.nodes) {
    EXPECT_FALSE(node.name.starts_with("grad.base.")) << node.name;
  }
  expect_gradients_match_finite_differences(std::move(forward), loss, 2);
}

TEST(Autodiff, GradientsAccumulateAcrossExecutionsUntilZeroed) {
  ToyModel model = build_toy_transformer(1, 2, 4, 6, DType::F64);
  ExecutionPlan plan = compiler::compile_training(std::move(model.graph), model.loss, toy_registry());
  CpuBackend backend;
  backend.load(plan, toy_registry());
  randomize_all<double>(backend, plan, 3);
  backend.execute({});
  TensorId gradient = plan.parameter_gradients.begin()->second;
  std::vector<double> once = read_vector<double>(backend, gradient);
  backend.execute({});
  std::vector<double> twice = read_vector<double>(backend, gradient);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_EQ(twice[i], 2 * once[i]);
  backend.zero_gradients();
  for (double value : read_vector<double>(backend, gradient)) EXPECT_EQ(value, 0.0);
}

TEST(Autodiff, RejectsNonScalarLossesAndOpsWithoutGradientRules) {
  GraphBuilder b(toy_registry());
  TensorId x = b.input("x", DType::F64, {3});
  TensorId w = b.parameter("w", DType::F64, {3});
  TensorId y = b.op("mul", {x, w}, {}, "y");
  TensorId through = b.op("accumulate", {y}, {}, "no_rule");  // no gradient rule
  TensorId loss = b.op("sum", {through}, {}, "loss");
  b.mark_output(loss);
  Graph forward = b.finish();
  EXPECT_THROW(compiler::build_training_graph(forward, y, toy_registry()), UserError);
  try {
    compiler::build_training_graph(forward, loss, toy_registry());
    FAIL();
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("node 'no_rule' (op accumulate) has no gradient rule"), std::string::npos)
        << error.what();
  }
}

// "twice"(x) = 2x whose gradient rule takes x's pending contributions and returns
// add(pending, 2·d_out) itself (as linear's rule folds them into a matmul in BF16 graphs); with
// `drop` it takes them and returns nothing, which autodiff must refuse.
const OpRegistry& folding_registry() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_core_ops(r);
    register_toy_ops(r);
    for (bool drop : {false, true}) {
      r.add(OpDef{
          .name = drop ? "twice_dropping" : "twice",
          .inputs = {"x"},
          .outputs = {"out"},
          .infer = [](const InferContext& ctx) { return std::vector<TensorType>{ctx.input(0)}; },
          .gradient = [drop](GradientContext& ctx) -> InputGradients {
            std::optional<TensorId> pending = ctx.take_pending_input_grad(0);
            if (drop) return {std::nullopt};
            TensorId own = ctx.op("scale", {ctx.output_grad(0)}, {{"factor", 2.0}});
            return {pending ? ctx.op("add", {*pending, own}, {}, "folded") : own};
          },
          .cpu = [](const CpuBindContext& ctx) -> CpuKernel {
            const int64_t count = ctx.outputs[0].numel();
            return [count](const CpuKernelArgs& args) {
              for (int64_t i = 0; i < count; ++i) args.outputs[0].as<double>()[i] = 2.0 * args.inputs[0].as<double>()[i];
            };
          },
      });
    }
    return r;
  }();
  return registry;
}

TEST(Autodiff, RuleThatTakesPendingContributionsReplacesTheFanOutSum) {
  GraphBuilder b(folding_registry());
  TensorId x = b.parameter("x", DType::F64, {2, 3});
  TensorId doubled = b.op("twice", {x}, {}, "doubled");          // differentiated last: takes the others
  TensorId squared = b.op("mul", {x, x}, {}, "squared");         // two contributions
  TensorId bent = b.op("toy_tanh", {x}, {}, "bent");             // one more
  TensorId loss = b.op("sum", {b.op("add", {b.op("add", {doubled, squared}), bent})}, {}, "loss");
  b.mark_output(loss);
  Graph forward = b.finish();

  compiler::TrainingGraph training = compiler::build_training_graph(forward, loss, folding_registry());
  size_t sums = 0, folded = 0;
  for (const Node& node : training.graph.nodes) {
    if (node.op == "add" && node.name.find("grad.x.sum") != std::string::npos) ++sums;
    if (node.name.ends_with(".folded")) ++folded;
  }
  // tanh's and mul's two contributions take two adds when 'twice' takes them; the rule's own add
  // replaces the third add autodiff would have emitted.
  EXPECT_EQ(folded, 1u);
  EXPECT_EQ(sums, 2u);
  ExecutionPlan plan = compiler::compile_training(std::move(forward), loss, folding_registry());
  CpuBackend backend;
  backend.load(plan, folding_registry());
  std::vector<double> values = random_values<double>(6, 4);
  std::copy(values.begin(), values.end(), backend.view<double>(x).begin());
  backend.zero_gradients();
  run_loss(backend, plan);
  const std::vector<double> gradient = read_vector<double>(backend, plan.parameter_gradients.at(x));
  for (size_t i = 0; i < values.size(); ++i) {
    const double t = std::tanh(values[i]);
    EXPECT_NEAR(gradient[i], 2.0 + 2.0 * values[i] + (1.0 - t * t), 1e-12) << i;
  }
}

TEST(Autodiff, RuleThatTakesPendingContributionsMustReturnAGradient) {
  GraphBuilder b(folding_registry());
  TensorId x = b.parameter("x", DType::F64, {3});
  TensorId loss = b.op("sum", {b.op("add", {b.op("twice_dropping", {x}), b.op("toy_tanh", {x})})}, {}, "loss");
  b.mark_output(loss);
  EXPECT_THROW(compiler::build_training_graph(b.finish(), loss, folding_registry()), InternalError);
}

}  // namespace
}  // namespace surogate::testing
