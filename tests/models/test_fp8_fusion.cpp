// The fp8_hybrid producer fusion (models/fp8_fusion.h) on a real decoder (the qwen3_qknorm parity
// fixture, fp32 CPU emulation): the fused graph has the "_fp8" producers in place of their
// quantize_fp8 nodes, and one training step — with the sites' delayed amaxes set, and with none
// yet (the first step) — gives bit for bit the loss, every parameter gradient and the scaling
// state of the unfused graph, also when the norms and the SwiGLU are recomputed in the backward.
// Full fine-tuning (the quantized inputs also feed the weight gradients; the backward's SwiGLU
// gradients feed linear_fp8_backward, so fuse_fp8_gradients leaves them) and LoRA (a frozen FP8
// base: swiglu_backward_fp8 quantizes d_gate and d_up for linear_fp8_backward_input_quantized).
// In full fine-tuning the fused graph also shares one transpose_fp8 of ln1's and ln2's codes
// between the q / k / v and gate / up weight gradients (share_fp8_input_transposes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <random>

#include "compiler/execution_plan.h"
#include "models/decoder_graph.h"
#include "models/fp8_fusion.h"
#include "models/fp8_recipe.h"
#include "models/lora.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "ops/defs/register_ops.h"
#include "ops/fp8_tensor.h"
#include "runtime/cpu_backend.h"
#include "fixture_util.h"

namespace surogate::models {
namespace {

constexpr const char* kFixture = "qwen3_qknorm";
constexpr int64_t kHistory = 4;

LoraOptions lora_options() {
  return {.rank = 4, .alpha = 8.0, .target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                      "down_proj"}};
}

graph::Graph fp8_training_graph(const testing::Fixture& fixture, const graph::OpRegistry& registry, bool fuse, bool lora,
                                graph::TensorId* loss) {
  DecoderGraph decoder =
      build_decoder_graph(fixture.config, registry, {.batch = fixture.batch, .sequence = fixture.sequence});
  *loss = decoder.loss;
  graph::Graph forward = std::move(decoder.graph);
  if (lora) {
    forward = apply_lora(forward, registry, lora_adapters(fixture.config, lora_options()), lora_options(), true);
  }
  Fp8Options options{.layers = fixture.config.num_hidden_layers, .amax_history = kHistory};
  options.fuse_producers = fuse;
  options.trained_weights = !lora;
  return apply_fp8_recipe(forward, registry, options);
}

compiler::ExecutionPlan compile(const testing::Fixture& fixture, const graph::OpRegistry& registry, bool fuse, bool lora,
                                const compiler::RecomputePolicy& policy) {
  graph::TensorId loss = graph::kNoTensor;
  graph::Graph forward = fp8_training_graph(fixture, registry, fuse, lora, &loss);
  compiler::CompileOptions options{.recompute = policy};
  if (fuse) options.rewrite_training_graph = fuse_fp8_gradients;
  return compiler::compile_training(std::move(forward), loss, registry, options);
}

struct StepResult {
  std::vector<std::vector<float>> results;  // loss, the gradients in parameter order, the state
};

// The fixture's weights; a frozen FP8 base weight (LoRA) as its codes, transpose and scale; the
// adapters (absent from the fixture) drawn from a fixed seed.
void load_parameters(runtime::CpuBackend& backend, const compiler::ExecutionPlan& plan, const testing::Fixture& fixture) {
  std::vector<ParameterSpec> specs = parameter_specs(fixture.config);
  std::vector<std::vector<float>> values = load_hf_weights_as_float32(testing::fixture_dir(kFixture), specs);
  std::set<graph::TensorId> written;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (auto id = plan.graph.find_tensor(specs[i].name)) {
      backend.write(*id, std::as_bytes(std::span<const float>(values[i])));
      written.insert(*id);
      continue;
    }
    const graph::TensorId codes_id = plan.tensor(specs[i].name + ".fp8");
    const graph::Shape& shape = plan.graph.tensor(codes_id).type.shape;
    std::vector<uint8_t> codes(values[i].size()), transposed(values[i].size());
    const float scale_inv = ops::quantize_fp8_tensor(values[i].data(), shape[0], shape[1], codes.data(), transposed.data());
    backend.write(codes_id, std::as_bytes(std::span<const uint8_t>(codes)));
    backend.write(plan.tensor(specs[i].name + ".fp8_t"), std::as_bytes(std::span<const uint8_t>(transposed)));
    backend.write(plan.tensor(specs[i].name + ".scale_inv"), std::as_bytes(std::span<const float>(&scale_inv, 1)));
    written.insert(codes_id);
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (graph::TensorId id : plan.graph.parameters) {
    const std::string& name = plan.graph.tensor(id).name;
    if (written.contains(id) || name.find("lora") == std::string::npos) continue;
    std::span<float> adapter = backend.view<float>(id);
    for (float& value : adapter) value = normal(rng);
  }
  const float loss_scale = 1.0f / static_cast<float>(fixture.scored_tokens());
  backend.write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&loss_scale, 1)));
}

// One step; `delayed` > 0 sets every site's delayed amax (row[0]) to it, 0 leaves the state zero.
StepResult train_step(bool fuse, bool lora, const compiler::RecomputePolicy& policy, float delayed) {
  testing::Fixture fixture = testing::open_fixture(kFixture);
  const graph::OpRegistry registry = ops::make_model_registry();
  compiler::ExecutionPlan plan = compile(fixture, registry, fuse, lora, policy);
  runtime::CpuBackend backend;
  backend.load(plan, registry);
  load_parameters(backend, plan, fixture);
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
  for (const auto& [parameter, gradient] : plan.parameter_gradients) keep(gradient);
  keep(state_id);
  return run;
}

TEST(Fp8Fusion, NormsSwigluAndAttentionQuantizeTheirOwnOutput) {
  testing::Fixture fixture = testing::open_fixture(kFixture);
  const graph::OpRegistry registry = ops::make_model_registry();
  graph::TensorId loss = graph::kNoTensor;
  const graph::Graph unfused = fp8_training_graph(fixture, registry, false, false, &loss);
  const graph::Graph fused = fp8_training_graph(fixture, registry, true, false, &loss);
  auto count = [](const graph::Graph& graph, const std::string& op) {
    return std::count_if(graph.nodes.begin(), graph.nodes.end(), [&](const graph::Node& node) { return node.op == op; });
  };
  const int64_t layers = fixture.config.num_hidden_layers;
  // Each layer quantizes 4 inputs: ln1, the attention output, ln2, the SwiGLU output.
  EXPECT_EQ(count(unfused, "quantize_fp8"), 4 * layers);
  EXPECT_EQ(fp8_fused_producer_count(unfused), 0);
  EXPECT_EQ(count(fused, "quantize_fp8"), 0);
  EXPECT_EQ(fp8_fused_producer_count(fused), 4 * layers);
  EXPECT_EQ(count(fused, "rmsnorm_fp8"), 1);  // the first layer's ln1 (the others fuse the residual add)
  EXPECT_EQ(count(fused, "fused_residual_rmsnorm_fp8"), 2 * layers - 1);
  EXPECT_EQ(count(fused, "swiglu_fp8"), layers);
  EXPECT_EQ(count(fused, "attention_fp8"), layers);
  EXPECT_EQ(fused.tensors.size(), unfused.tensors.size());  // the same tensors, fewer nodes
  EXPECT_EQ(fused.nodes.size() + static_cast<size_t>(4 * layers), unfused.nodes.size());
  // Under sequence parallelism the exchange after the attention reorders o_proj's input: the
  // attention keeps its quantize_fp8.
  const graph::Graph sequence = models::fuse_fp8_producers(unfused, registry, false);
  EXPECT_EQ(count(sequence, "quantize_fp8"), layers);
  EXPECT_EQ(count(sequence, "attention_fp8"), 0);
}

// LoRA's backward: each layer's SwiGLU gradients are quantized by the SwiGLU backward for the
// frozen gate and up projections, the residual stream's by the norms' backward for o_proj and
// down_proj. Full fine-tuning: the SwiGLU backward's codes feed the trained gate and up
// projections' weight gradient too, and the trained norms' backward quantizes o_proj's and down_proj's.
TEST(Fp8Fusion, SwigluBackwardQuantizesTheFrozenProjectionsGradients) {
  testing::Fixture fixture = testing::open_fixture(kFixture);
  const graph::OpRegistry registry = ops::make_model_registry();
  auto count = [](const graph::Graph& graph, const std::string& op) {
    return std::count_if(graph.nodes.begin(), graph.nodes.end(), [&](const graph::Node& node) { return node.op == op; });
  };
  const int64_t layers = fixture.config.num_hidden_layers;
  const compiler::ExecutionPlan lora = compile(fixture, registry, true, true, compiler::RecomputePolicy::none());
  EXPECT_EQ(count(lora.graph, "swiglu_backward_fp8"), layers);
  EXPECT_EQ(count(lora.graph, "swiglu_backward"), 0);
  // The frozen norms' backward (ln2, ln1 of the layers after the first, final_norm) quantizes the
  // o_proj and down_proj gradients.
  EXPECT_EQ(count(lora.graph, "fused_residual_rmsnorm_backward_fp8"), 2 * layers);
  EXPECT_EQ(count(lora.graph, "fused_residual_rmsnorm_backward"), 0);
  // The q / k norm + RoPE backward quantizes the q and k gradients, but layer 0's: their
  // projections' input (the frozen embeddings' norm) needs no gradient, so nothing reads them in FP8.
  EXPECT_EQ(count(lora.graph, "fused_rmsnorm_rope_backward_fp8"), 2 * layers - 2);
  EXPECT_EQ(count(lora.graph, "fused_rmsnorm_rope_backward"), 2);
  EXPECT_EQ(count(lora.graph, "linear_fp8_backward_input_quantized"), 4 * layers + 2 * (layers - 1));
  // v, but layer 0's.
  EXPECT_EQ(count(lora.graph, "linear_fp8_backward_input"), layers - 1);
  const compiler::ExecutionPlan full = compile(fixture, registry, true, false, compiler::RecomputePolicy::none());
  EXPECT_EQ(count(full.graph, "swiglu_backward_fp8"), layers);
  EXPECT_EQ(count(full.graph, "swiglu_backward"), 0);
  // gate and up, q and k (the trained q / k norms' backward quantizes their gradients too).
  EXPECT_EQ(count(full.graph, "fused_rmsnorm_rope_backward_fp8"), 2 * layers);
  // ... and o and down.
  EXPECT_EQ(count(full.graph, "linear_fp8_backward_quantized") + count(full.graph, "linear_fp8_backward_quantized_accumulate"),
            6 * layers);
  // v of every layer.
  EXPECT_EQ(count(full.graph, "linear_fp8_backward") + count(full.graph, "linear_fp8_backward_accumulate"), layers);
  EXPECT_EQ(count(full.graph, "fused_residual_rmsnorm_backward_fp8"), 2 * layers);
  EXPECT_EQ(count(full.graph, "fused_residual_rmsnorm_backward"), 0);
  // q / k / v share one transpose of ln1's codes, gate / up one of ln2's; o and down read theirs
  // alone. LoRA trains no projection weight: no weight-gradient product, no shared transpose.
  EXPECT_EQ(count(full.graph, "transpose_fp8"), 2 * layers);
  int64_t shared = 0;
  for (const graph::Node& node : full.graph.nodes) shared += node.attrs.value("x_transposed", false);
  EXPECT_EQ(shared, 5 * layers);
  EXPECT_EQ(count(lora.graph, "transpose_fp8"), 0);
}

TEST(Fp8Fusion, TrainingStepIsBitIdenticalToTheQuantizeNodes) {
  compiler::RecomputePolicy inputs_only = compiler::RecomputePolicy::all();
  inputs_only.block_inputs_only = true;  // ln2's fused fp8 norm re-run whole (compiler/recompute.h)
  const compiler::RecomputePolicy policies[] = {compiler::RecomputePolicy::none(),
                                                {.rmsnorm = true, .swiglu = true}, inputs_only};
  for (const bool lora : {false, true}) {
    for (const float delayed : {0.0f, 1.5f}) {
      for (size_t p = 0; p < std::size(policies); ++p) {
        const StepResult unfused = train_step(false, lora, policies[p], delayed);
        const StepResult fused = train_step(true, lora, policies[p], delayed);
        ASSERT_EQ(fused.results.size(), unfused.results.size());
        for (size_t i = 0; i < unfused.results.size(); ++i) {
          ASSERT_EQ(fused.results[i].size(), unfused.results[i].size());
          EXPECT_EQ(std::memcmp(fused.results[i].data(), unfused.results[i].data(),
                                unfused.results[i].size() * sizeof(float)),
                    0)
              << (lora ? "LoRA" : "full") << ", delayed amax " << delayed << ", policy " << p << ": result " << i
              << " (0 = loss, then the gradients, last the scaling state) differs";
        }
        // The state recorded this step's amaxes, the gradients are not all zero: real values compared.
        const std::vector<float>& state = fused.results.back();
        EXPECT_GT(*std::max_element(state.begin(), state.end()), 0.0f);
        double gradient_mass = 0.0;
        for (size_t i = 1; i + 1 < fused.results.size(); ++i) {
          for (float value : fused.results[i]) gradient_mass += std::fabs(value);
        }
        EXPECT_GT(gradient_mass, 0.0);
        if (p > 0) {  // recompute changes no bit, the scaling state's included
          const StepResult saved = train_step(true, lora, policies[0], delayed);
          for (size_t i = 0; i < saved.results.size(); ++i) {
            EXPECT_EQ(std::memcmp(fused.results[i].data(), saved.results[i].data(),
                                  saved.results[i].size() * sizeof(float)),
                      0)
                << (lora ? "LoRA" : "full") << ", delayed amax " << delayed << ", policy " << p << ": result " << i
                << " differs from the run without recompute";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace surogate::models
