// The recompute options on a real decoder (a parity fixture's config and weights): peak
// activation memory must fall as the options are turned on one after another, while the loss
// and every parameter gradient stay bit-identical (memcmp) to the all-saved run.
#include <gtest/gtest.h>

#include <cstring>

#include "compiler/execution_plan.h"
#include "compiler/memory_plan.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "fixture_util.h"

namespace surogate::models {
namespace {

struct StepResult {
  size_t peak_live_bytes = 0;
  size_t recomputed_nodes = 0;
  std::vector<std::vector<float>> results;  // loss, then gradients in parameter-spec order
};

StepResult train_step(const std::string& name, const compiler::RecomputePolicy& policy) {
  testing::Fixture fixture = testing::open_fixture(name);
  const graph::OpRegistry registry = ops::make_model_registry();
  DecoderGraph decoder =
      build_decoder_graph(fixture.config, registry, {.batch = fixture.batch, .sequence = fixture.sequence});
  compiler::ExecutionPlan plan =
      compiler::compile_training(std::move(decoder.graph), decoder.loss, registry, {.recompute = policy});
  runtime::CpuBackend backend;
  backend.load(plan, registry);
  testing::load_weights(backend, plan, name, fixture.config, 1.0f / static_cast<float>(fixture.scored_tokens()));
  backend.zero_gradients();
  backend.execute(testing::bindings(plan, fixture));
  StepResult run{plan.memory.peak_live_bytes, plan.recomputed_nodes, {}};
  auto keep = [&](graph::TensorId id) {
    std::span<float> values = backend.view<float>(id);
    run.results.emplace_back(values.begin(), values.end());
  };
  keep(plan.loss);
  for (const ParameterSpec& spec : parameter_specs(fixture.config)) {
    keep(plan.parameter_gradients.at(plan.tensor(spec.name)));
  }
  return run;
}

class DecoderRecompute : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderRecompute, PeakFallsAndGradientsStayBitIdentical) {
  const StepResult saved = train_step(GetParam(), compiler::RecomputePolicy::none());
  EXPECT_EQ(saved.recomputed_nodes, 0u);
  // Each policy turns on everything the previous one did, plus more.
  const compiler::RecomputePolicy chain[] = {
      {.rmsnorm = true},
      {.rmsnorm = true, .swiglu = true},
      {.rmsnorm = true, .swiglu = true, .ffn = true},
      {.rmsnorm = true, .qkv = true, .swiglu = true, .ffn = true},
      {.rmsnorm = true, .qkv = true, .att = true, .swiglu = true, .ffn = true},
      compiler::RecomputePolicy::all(),
  };
  size_t previous_peak = saved.peak_live_bytes;
  for (size_t step = 0; step < std::size(chain); ++step) {
    const StepResult run = train_step(GetParam(), chain[step]);
    EXPECT_GT(run.recomputed_nodes, 0u) << "policy " << step;
    EXPECT_LE(run.peak_live_bytes, previous_peak) << "policy " << step;
    previous_peak = run.peak_live_bytes;
    ASSERT_EQ(run.results.size(), saved.results.size());
    for (size_t i = 0; i < saved.results.size(); ++i) {
      ASSERT_EQ(run.results[i].size(), saved.results[i].size());
      EXPECT_EQ(std::memcmp(run.results[i].data(), saved.results[i].data(), saved.results[i].size() * sizeof(float)), 0)
          << "policy " << step << ": result " << i << " (0 = loss, then gradients) differs";
    }
  }
  // Recomputing the whole block must save a real share of the activations, not a rounding.
  EXPECT_LT(previous_peak * 10, saved.peak_live_bytes * 8)
      << "all: " << previous_peak << " bytes vs none: " << saved.peak_live_bytes;
  // Only each block's input kept: the same bits again.
  compiler::RecomputePolicy inputs_only = compiler::RecomputePolicy::all();
  inputs_only.block_inputs_only = true;
  const StepResult run = train_step(GetParam(), inputs_only);
  EXPECT_GT(run.recomputed_nodes, 0u);
  ASSERT_EQ(run.results.size(), saved.results.size());
  for (size_t i = 0; i < saved.results.size(); ++i) {
    ASSERT_EQ(run.results[i].size(), saved.results[i].size());
    EXPECT_EQ(std::memcmp(run.results[i].data(), saved.results[i].data(), saved.results[i].size() * sizeof(float)), 0)
        << "block_inputs_only: result " << i << " (0 = loss, then gradients) differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderRecompute,
                         ::testing::Values("llama_bias_untied", "qwen3_qknorm", "qwen3_moe_topk", "qwen2_moe_shared"));

// The residual adds are fused into the norms (fused_residual_rmsnorm: ln2, the next layer's ln1,
// final_norm). Under recompute_rmsnorm the stream they produce stays a checkpoint: no fused node
// is re-emitted, and each recomputed fused norm is an rmsnorm of the kept stream.
TEST(DecoderRecomputeFusedNorm, ResidualStreamStaysACheckpoint) {
  testing::Fixture fixture = testing::open_fixture("qwen3_qknorm");
  const graph::OpRegistry registry = ops::make_model_registry();
  DecoderGraph decoder =
      build_decoder_graph(fixture.config, registry, {.batch = fixture.batch, .sequence = fixture.sequence});
  compiler::ExecutionPlan plan = compiler::compile_training(std::move(decoder.graph), decoder.loss, registry,
                                                            {.recompute = {.rmsnorm = true}});
  const graph::Graph& g = plan.graph;
  const int64_t layers = fixture.config.num_hidden_layers;
  size_t fused_forward = 0, norms_of_stream = 0;
  for (const graph::Node& node : g.nodes) {
    if (node.phase == graph::NodePhase::Forward && node.op == "fused_residual_rmsnorm") ++fused_forward;
    if (node.phase != graph::NodePhase::Recompute) continue;
    EXPECT_NE(node.op, "fused_residual_rmsnorm") << node.name;
    const graph::NodeId producer = g.tensor(node.inputs[0]).producer;
    if (node.op == "rmsnorm" && producer != graph::kNoNode && g.node(producer).op == "fused_residual_rmsnorm") {
      EXPECT_EQ(node.inputs[0], g.node(producer).outputs[1]) << node.name << " reads the residual stream";
      ++norms_of_stream;
    }
  }
  EXPECT_EQ(fused_forward, static_cast<size_t>(2 * layers));      // ln2 of each layer, ln1 of layers ≥ 1, final_norm
  EXPECT_EQ(norms_of_stream, static_cast<size_t>(2 * layers - 1));  // final_norm is untagged (always saved)
}

// block_inputs_only: each layer's ln2 (the fused add + norm inside the block) is re-run whole, its
// residual_out (the stream after attention) read by the backward from the copy; the stream
// between blocks (the next layer's ln1) stays a checkpoint, recomputed norms reading it.
TEST(DecoderRecomputeFusedNorm, BlockInputsOnlyRecomputesTheStreamInsideEachBlock) {
  testing::Fixture fixture = testing::open_fixture("qwen3_qknorm");
  const graph::OpRegistry registry = ops::make_model_registry();
  DecoderGraph decoder =
      build_decoder_graph(fixture.config, registry, {.batch = fixture.batch, .sequence = fixture.sequence});
  compiler::RecomputePolicy policy = compiler::RecomputePolicy::all();
  policy.block_inputs_only = true;
  compiler::ExecutionPlan plan =
      compiler::compile_training(std::move(decoder.graph), decoder.loss, registry, {.recompute = policy});
  const graph::Graph& g = plan.graph;
  const int64_t layers = fixture.config.num_hidden_layers;
  size_t fused_recomputed = 0;
  for (const graph::Node& node : g.nodes) {
    if (node.phase != graph::NodePhase::Recompute || node.op != "fused_residual_rmsnorm") continue;
    EXPECT_TRUE(node.name.ends_with(".ln2")) << node.name;
    ++fused_recomputed;
  }
  EXPECT_EQ(fused_recomputed, static_cast<size_t>(layers));
  // Each layer keeps one stream checkpoint instead of two: 8 layers need 6 streams more than 2,
  // where the literal plan needs 12 more, and deep enough the plan is the smaller one.
  auto peak = [&](int64_t depth, bool inputs_only) {
    io::ModelConfig config = fixture.config;
    config.num_hidden_layers = depth;
    DecoderGraph deep = build_decoder_graph(config, registry, {.batch = fixture.batch, .sequence = fixture.sequence});
    compiler::RecomputePolicy chosen = compiler::RecomputePolicy::all();
    chosen.block_inputs_only = inputs_only;
    return compiler::compile_training(std::move(deep.graph), deep.loss, registry, {.recompute = chosen})
        .memory.peak_live_bytes;
  };
  const size_t stream = compiler::align_up(
      static_cast<size_t>(fixture.batch * fixture.sequence * fixture.config.hidden_size) * sizeof(float), 256);
  EXPECT_EQ(peak(8, true) - peak(2, true), 6 * stream);
  EXPECT_EQ(peak(8, false) - peak(2, false), 6 * 2 * stream);
  EXPECT_LT(peak(32, true), peak(32, false));
  for (const graph::Node& node : g.nodes) {
    if (node.phase != graph::NodePhase::Backward) continue;
    for (graph::TensorId input : node.inputs) {
      const graph::NodeId producer = g.tensor(input).producer;
      if (producer == graph::kNoNode) continue;
      const graph::Node& from = g.node(producer);
      if (from.phase == graph::NodePhase::Forward && from.op == "fused_residual_rmsnorm") {
        EXPECT_FALSE(from.name.ends_with(".ln2")) << node.name << " reads " << from.name << "'s forward output";
      }
    }
  }
}

}  // namespace
}  // namespace surogate::models
