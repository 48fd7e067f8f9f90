// The fp8_hybrid producer fusion (models/fp8_fusion.h) on a real decoder (the qwen3_qknorm parity
// fixture, fp32 CPU emulation, full fine-tuning so that the quantized inputs also feed the weight
// gradients): the fused graph has the "_fp8" producers in place of their quantize_fp8 nodes, and
// one training step — with the sites' delayed amaxes set, and with none yet (the first step) —
// gives bit for bit the loss, every parameter gradient and the scaling state of the unfused
// graph, also when the norms and the SwiGLU are recomputed in the backward.
#include <gtest/gtest.h>

#include <cstring>

#include "compiler/execution_plan.h"
#include "models/decoder_graph.h"
#include "models/fp8_fusion.h"
#include "models/fp8_recipe.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "ops/fp8_tensor.h"
#include "runtime/cpu_backend.h"
#include "fixture_util.h"

namespace surogate::models {
namespace {

constexpr const char* kFixture = "qwen3_qknorm";
constexpr int64_t kHistory = 4;

graph::Graph fp8_training_graph(const testing::Fixture& fixture, const graph::OpRegistry& registry, bool fuse,
                                graph::TensorId* loss) {
  DecoderGraph decoder =
      build_decoder_graph(fixture.config, registry, {.batch = fixture.batch, .sequence = fixture.sequence});
  *loss = decoder.loss;
  Fp8Options options{.layers = fixture.config.num_hidden_layers, .amax_history = kHistory};
  options.fuse_producers = fuse;
  return apply_fp8_recipe(decoder.graph, registry, options);
}

struct StepResult {
  std::vector<std::vector<float>> results;  // loss, the gradients in parameter-spec order, the state
};

// One step; `delayed` > 0 sets every site's delayed amax (row[0]) to it, 0 leaves the state zero.
StepResult train_step(bool fuse, const compiler::RecomputePolicy& policy, float delayed) {
  testing::Fixture fixture = testing::open_fixture(kFixture);
  const graph::OpRegistry registry = ops::make_model_registry();
  graph::TensorId loss = graph::kNoTensor;
  graph::Graph forward = fp8_training_graph(fixture, registry, fuse, &loss);
  compiler::ExecutionPlan plan = compiler::compile_training(std::move(forward), loss, registry, {.recompute = policy});
  runtime::CpuBackend backend;
  backend.load(plan, registry);
  testing::load_weights(backend, plan, kFixture, fixture.config, 1.0f / static_cast<float>(fixture.scored_tokens()));
  // The FP8 copies of the trained weights, as the training device writes them after each step.
  for (const Fp8TrainedWeight& weight : fp8_trained_weights(plan.graph)) {
    const graph::TensorType& type = plan.graph.tensor(plan.tensor(weight.weight)).type;
    std::span<float> values = backend.view<float>(plan.tensor(weight.weight));
    std::vector<uint8_t> codes(values.size()), transposed(values.size());
    const float scale_inv = ops::quantize_fp8_tensor(values.data(), type.shape[0], type.shape[1], codes.data(),
                                                     transposed.data());
    backend.write(plan.tensor(weight.codes), std::as_bytes(std::span<const uint8_t>(codes)));
    backend.write(plan.tensor(weight.transposed), std::as_bytes(std::span<const uint8_t>(transposed)));
    backend.write(plan.tensor(weight.scale_inv), std::as_bytes(std::span<const float>(&scale_inv, 1)));
  }
  const graph::TensorId state_id = plan.tensor(kFp8ScalingState);
  std::span<float> state = backend.view<float>(state_id);
  std::fill(state.begin(), state.end(), 0.0f);
  for (size_t row = 0; row < state.size(); row += 2 + kHistory) state[row] = delayed;
  backend.zero_gradients();
  backend.execute(testing::bindings(plan, fixture));
  StepResult run;
  auto keep = [&](graph::TensorId id) {
    std::span<float> values = backend.view<float>(id);
    run.results.emplace_back(values.begin(), values.end());
  };
  keep(plan.loss);
  for (const ParameterSpec& spec : parameter_specs(fixture.config)) keep(plan.parameter_gradients.at(plan.tensor(spec.name)));
  keep(state_id);
  return run;
}

TEST(Fp8Fusion, NormsAndSwigluQuantizeTheirOwnOutput) {
  testing::Fixture fixture = testing::open_fixture(kFixture);
  const graph::OpRegistry registry = ops::make_model_registry();
  graph::TensorId loss = graph::kNoTensor;
  const graph::Graph unfused = fp8_training_graph(fixture, registry, false, &loss);
  const graph::Graph fused = fp8_training_graph(fixture, registry, true, &loss);
  auto count = [](const graph::Graph& graph, const std::string& op) {
    return std::count_if(graph.nodes.begin(), graph.nodes.end(), [&](const graph::Node& node) { return node.op == op; });
  };
  const int64_t layers = fixture.config.num_hidden_layers;
  // Each layer quantizes 4 inputs: ln1, the attention output, ln2, the SwiGLU output.
  EXPECT_EQ(count(unfused, "quantize_fp8"), 4 * layers);
  EXPECT_EQ(fp8_fused_producer_count(unfused), 0);
  EXPECT_EQ(count(fused, "quantize_fp8"), layers);  // the attention output's
  EXPECT_EQ(fp8_fused_producer_count(fused), 3 * layers);
  EXPECT_EQ(count(fused, "rmsnorm_fp8"), 1);  // the first layer's ln1 (the others fuse the residual add)
  EXPECT_EQ(count(fused, "fused_residual_rmsnorm_fp8"), 2 * layers - 1);
  EXPECT_EQ(count(fused, "swiglu_fp8"), layers);
  EXPECT_EQ(fused.tensors.size(), unfused.tensors.size());  // the same tensors, fewer nodes
  EXPECT_EQ(fused.nodes.size() + static_cast<size_t>(3 * layers), unfused.nodes.size());
}

TEST(Fp8Fusion, TrainingStepIsBitIdenticalToTheQuantizeNodes) {
  const compiler::RecomputePolicy policies[] = {compiler::RecomputePolicy::none(),
                                                {.rmsnorm = true, .swiglu = true}};
  for (const float delayed : {0.0f, 1.5f}) {
    for (size_t p = 0; p < std::size(policies); ++p) {
      const StepResult unfused = train_step(false, policies[p], delayed);
      const StepResult fused = train_step(true, policies[p], delayed);
      ASSERT_EQ(fused.results.size(), unfused.results.size());
      for (size_t i = 0; i < unfused.results.size(); ++i) {
        ASSERT_EQ(fused.results[i].size(), unfused.results[i].size());
        EXPECT_EQ(std::memcmp(fused.results[i].data(), unfused.results[i].data(), unfused.results[i].size() * sizeof(float)),
                  0)
            << "delayed amax " << delayed << ", policy " << p << ": result " << i
            << " (0 = loss, then the gradients, last the scaling state) differs";
      }
      // The state recorded this step's amaxes: the comparison above covers real values.
      const std::vector<float>& state = fused.results.back();
      EXPECT_GT(*std::max_element(state.begin(), state.end()), 0.0f);
    }
  }
}

}  // namespace
}  // namespace surogate::models
