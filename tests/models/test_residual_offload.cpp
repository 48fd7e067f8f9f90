// offload_residual on real decoders (compiler/residual_offload.h): the plan's structure (which
// checkpoints go to host memory, where the copies sit, what they must complete by), gradients
// bit-identical (memcmp) to the plan without it under several recompute policies, and the arena
// peak: lower, and with recompute_block no longer growing with depth.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "compiler/execution_plan.h"
#include "compiler/recompute.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "fixture_util.h"

namespace surogate::models {
namespace {

using compiler::ExecutionPlan;
using compiler::RecomputePolicy;
using compiler::Storage;

ExecutionPlan compile(const io::ModelConfig& config, int64_t batch, int64_t sequence, const RecomputePolicy& policy,
                      bool offload) {
  const graph::OpRegistry registry = ops::make_model_registry();
  DecoderGraph decoder = build_decoder_graph(config, registry, {.batch = batch, .sequence = sequence});
  return compiler::compile_training(std::move(decoder.graph), decoder.loss, registry,
                                    {.recompute = policy, .offload_residual = offload});
}

// The loss and every parameter gradient after one step on the fixture's batch.
std::vector<std::vector<float>> train_step(const std::string& name, const RecomputePolicy& policy, bool offload) {
  testing::Fixture fixture = testing::open_fixture(name);
  const graph::OpRegistry registry = ops::make_model_registry();
  ExecutionPlan plan = compile(fixture.config, fixture.batch, fixture.sequence, policy, offload);
  EXPECT_EQ(plan.offloaded_tensors > 0, offload);
  runtime::CpuBackend backend;
  backend.load(plan, registry);
  testing::load_weights(backend, plan, name, fixture.config, 1.0f / static_cast<float>(fixture.scored_tokens()));
  backend.zero_gradients();
  backend.execute(testing::bindings(plan, fixture));
  std::vector<std::vector<float>> results;
  auto keep = [&](graph::TensorId id) {
    std::span<float> values = backend.view<float>(id);
    results.emplace_back(values.begin(), values.end());
  };
  keep(plan.loss);
  for (const ParameterSpec& spec : parameter_specs(fixture.config)) keep(plan.parameter_gradients.at(plan.tensor(spec.name)));
  return results;
}

class ResidualOffload : public ::testing::TestWithParam<std::string> {};

TEST_P(ResidualOffload, GradientsStayBitIdenticalUnderEveryPolicy) {
  for (const RecomputePolicy& policy : {RecomputePolicy::none(), RecomputePolicy{.rmsnorm = true, .ffn = true},
                                        RecomputePolicy::all()}) {
    const auto plain = train_step(GetParam(), policy, false);
    const auto offloaded = train_step(GetParam(), policy, true);
    ASSERT_EQ(offloaded.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      ASSERT_EQ(offloaded[i].size(), plain[i].size());
      EXPECT_EQ(std::memcmp(offloaded[i].data(), plain[i].data(), plain[i].size() * sizeof(float)), 0)
          << "result " << i << " (0 = loss, then gradients) differs with policy block=" << policy.block;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ResidualOffload, ::testing::Values("llama_bias_untied", "qwen3_qknorm"));

// A fixture's model with `layers` layers (the fixtures have 2).
io::ModelConfig with_layers(io::ModelConfig config, int64_t layers) {
  config.num_hidden_layers = layers;
  return config;
}

TEST(ResidualOffloadPlan, CheckpointsBelowTheTopLayerGoToHostAndComeBackOneLayerAhead) {
  const testing::Fixture fixture = testing::open_fixture("qwen3_qknorm");
  constexpr int64_t kLayers = 4;
  const ExecutionPlan plan =
      compile(with_layers(fixture.config, kLayers), fixture.batch, fixture.sequence, RecomputePolicy::all(), true);
  const graph::Graph& g = plan.graph;
  std::map<graph::TensorId, graph::TensorId> fetched_from;  // fetched copy -> its host tensor
  std::map<graph::TensorId, graph::TensorId> host_of;       // host tensor -> the checkpoint
  std::set<int64_t> offloaded_layers;
  size_t offloads = 0, fetches = 0;
  for (size_t step = 0; step < plan.steps.size(); ++step) {
    const graph::Node& node = g.nodes[step];
    const compiler::PlanStep& plan_step = plan.steps[step];
    EXPECT_EQ(plan_step.asynchronous, node.op == "offload_to_host" || node.op == "fetch_from_host") << node.name;
    for (size_t joined : plan_step.joins) {
      EXPECT_TRUE(plan.steps[joined].asynchronous);
      EXPECT_EQ(plan.steps[joined].complete_by, step);
    }
    if (!plan_step.asynchronous) continue;
    EXPECT_GT(plan_step.complete_by, step) << node.name;
    if (node.op == "offload_to_host") {
      ++offloads;
      const graph::TensorId checkpoint = node.inputs[0];
      EXPECT_EQ(node.phase, graph::NodePhase::Forward);
      EXPECT_TRUE(compiler::is_checkpoint(g, checkpoint)) << g.tensor(checkpoint).name;
      EXPECT_EQ(plan.placement(node.outputs[0]).storage, Storage::Host);
      EXPECT_EQ(plan.placement(checkpoint).storage, Storage::Arena);
      // Its last forward read came just before; the source stays allocated until the copy completes.
      EXPECT_EQ(plan.placement(checkpoint).last_step, static_cast<int>(plan_step.complete_by) - 1);
      EXPECT_LT(plan_step.complete_by, plan.forward_steps + 1) << "an offload completes before the backward";
      host_of[node.outputs[0]] = checkpoint;
    } else {
      ++fetches;
      EXPECT_EQ(node.phase, graph::NodePhase::Backward);
      EXPECT_EQ(plan.placement(node.inputs[0]).storage, Storage::Host);
      EXPECT_EQ(plan.placement(node.outputs[0]).storage, Storage::Arena);
      fetched_from[node.outputs[0]] = node.inputs[0];
      // The first reader is the step the fetch completes by. The fetch is issued where the layer
      // above starts its backward: the steps between belong to that layer (the copy overlaps it),
      // then to the reader's own.
      const graph::Node& reader = g.nodes[plan_step.complete_by];
      EXPECT_NE(std::find(reader.inputs.begin(), reader.inputs.end(), node.outputs[0]), reader.inputs.end()) << node.name;
      const int64_t layer = compiler::layer_of(reader);
      offloaded_layers.insert(layer);
      size_t first_kernel = step + 1;
      while (plan.steps[first_kernel].asynchronous) ++first_kernel;
      EXPECT_EQ(compiler::layer_of(g.nodes[first_kernel]), layer + 1) << g.nodes[first_kernel].name;
      for (size_t between = first_kernel; between < plan_step.complete_by; ++between) {
        if (plan.steps[between].asynchronous) continue;  // the other copies of the layer
        const int64_t at = compiler::layer_of(g.nodes[between]);
        EXPECT_TRUE(at == layer || at == layer + 1) << g.nodes[between].name;
      }
    }
  }
  EXPECT_EQ(offloads, fetches);
  EXPECT_EQ(offloads, plan.offloaded_tensors);
  // Per layer below the top: its input stream (the embeddings for layer 0) and the stream after
  // attention; the top layer keeps its two on the GPU.
  EXPECT_EQ(offloads, static_cast<size_t>(2 * (kLayers - 1)));
  EXPECT_EQ(offloaded_layers, (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(plan.memory.host_bytes, offloads * compiler::align_up(plan.placement(host_of.begin()->second).size_bytes, 256));
  // No backward step reads an offloaded checkpoint itself, only its fetched copy.
  for (size_t step = plan.forward_steps; step < plan.steps.size(); ++step) {
    for (graph::TensorId input : g.nodes[step].inputs) {
      for (const auto& [host, checkpoint] : host_of) {
        EXPECT_NE(input, checkpoint) << g.nodes[step].name << " reads " << g.tensor(checkpoint).name;
      }
    }
  }
}

// The arena peak with offload_residual is lower, and with recompute_block it no longer grows with
// the depth: 8 layers need what 2 need, while without it every layer adds its two checkpoints.
TEST(ResidualOffloadPlan, ArenaPeakStopsGrowingWithDepthUnderRecomputeBlock) {
  const testing::Fixture fixture = testing::open_fixture("qwen3_qknorm");
  auto peak = [&](int64_t layers, bool offload) {
    return compile(with_layers(fixture.config, layers), fixture.batch, fixture.sequence, RecomputePolicy::all(), offload)
        .memory.peak_live_bytes;
  };
  const size_t stream = compiler::align_up(
      static_cast<size_t>(fixture.batch * fixture.sequence * fixture.config.hidden_size) * sizeof(float), 256);
  EXPECT_EQ(peak(8, false) - peak(2, false), 6 * 2 * stream) << "without offloading, two checkpoints per layer";
  EXPECT_EQ(peak(8, true), peak(2, true));
  EXPECT_LT(peak(8, true), peak(8, false));
  EXPECT_LE(peak(2, true), peak(2, false));
}

}  // namespace
}  // namespace surogate::models
