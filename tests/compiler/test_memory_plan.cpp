// Recompute + memory planning: arena offsets never overlap while lifetimes do (also with
// offload_residual's host copies, whose sources stay live until the copy completes), peak memory
// falls as recompute groups are enabled, and the breakdown report names the categories.
#include <gtest/gtest.h>

#include "compiler/execution_plan.h"
#include "compiler/toy_ops.h"

namespace surogate::testing {
namespace {

using namespace surogate::graph;
using compiler::CompileOptions;
using compiler::ExecutionPlan;
using compiler::RecomputePolicy;
using compiler::Storage;

ExecutionPlan compile_toy(const RecomputePolicy& policy, int layers = 4, bool offload_residual = false) {
  ToyModel model = build_toy_transformer(layers, 128, 32, 64, DType::F32);
  CompileOptions options;
  options.recompute = policy;
  options.offload_residual = offload_residual;
  return compiler::compile_training(std::move(model.graph), model.loss, toy_registry(), options);
}

TEST(MemoryPlan, LiveTensorsNeverShareArenaBytes) {
  for (const auto& [policy, offload] : {std::pair{RecomputePolicy::none(), false}, std::pair{RecomputePolicy::all(), false},
                                        std::pair{RecomputePolicy::none(), true}, std::pair{RecomputePolicy::all(), true}}) {
    ExecutionPlan plan = compile_toy(policy, 4, offload);
    // The toy's residual adds are its checkpoints: 2 per layer, the first layer's input being the
    // graph's x, the last layer's output the loss's; the top layer keeps its own.
    EXPECT_EQ(plan.offloaded_tensors, offload ? 5u : 0u);
    for (const compiler::PlanStep& step : plan.steps) {
      if (!step.asynchronous) continue;
      for (const compiler::TensorPlacement& input : step.inputs) {
        if (input.storage == Storage::Arena) EXPECT_GE(input.last_step + 1, static_cast<int>(step.complete_by));
      }
    }
    const auto& placements = plan.memory.placements;
    for (size_t i = 0; i < placements.size(); ++i) {
      const auto& a = placements[i];
      if (a.storage != Storage::Arena) continue;
      EXPECT_EQ(a.offset % 256, 0u);
      EXPECT_LE(a.offset + a.size_bytes, plan.memory.arena_bytes);
      for (size_t j = i + 1; j < placements.size(); ++j) {
        const auto& b = placements[j];
        if (b.storage != Storage::Arena) continue;
        bool live_together = a.first_step <= b.last_step && b.first_step <= a.last_step;
        bool share_bytes = a.offset < b.offset + b.size_bytes && b.offset < a.offset + a.size_bytes;
        EXPECT_FALSE(live_together && share_bytes) << plan.graph.tensors[i].name << " / " << plan.graph.tensors[j].name;
      }
    }
    EXPECT_GE(plan.memory.arena_bytes, plan.memory.peak_live_bytes);
  }
}

TEST(MemoryPlan, ParametersAndGradientsLiveOutsideTheArena) {
  ExecutionPlan plan = compile_toy(RecomputePolicy::none(), 2);
  for (TensorId id : plan.graph.parameters) EXPECT_EQ(plan.placement(id).storage, Storage::Parameters);
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    EXPECT_EQ(plan.placement(gradient).storage, Storage::Gradients);
    EXPECT_EQ(plan.graph.tensor(gradient).name, plan.graph.tensor(parameter).name + ".grad");
  }
  // 2 layers x 5 weights, all 256-aligned.
  EXPECT_EQ(plan.parameter_gradients.size(), 10u);
  EXPECT_EQ(plan.memory.parameter_bytes, plan.memory.gradient_bytes);
}

TEST(Recompute, PeakActivationMemoryFallsAsGroupsAreEnabled) {
  RecomputePolicy policy;
  ExecutionPlan baseline = compile_toy(policy);
  EXPECT_EQ(baseline.recomputed_nodes, 0u);
  size_t previous = baseline.memory.peak_live_bytes;
  for (bool RecomputePolicy::*flag : {&RecomputePolicy::rmsnorm, &RecomputePolicy::swiglu, &RecomputePolicy::ffn,
                                      &RecomputePolicy::qkv, &RecomputePolicy::att, &RecomputePolicy::block}) {
    policy.*flag = true;
    ExecutionPlan plan = compile_toy(policy);
    EXPECT_GT(plan.recomputed_nodes, 0u);
    EXPECT_LE(plan.memory.peak_live_bytes, previous);  // some groups hold nothing backward reads
    previous = plan.memory.peak_live_bytes;
  }
  ExecutionPlan everything = compile_toy(policy);
  EXPECT_LT(everything.memory.peak_live_bytes * 2, baseline.memory.peak_live_bytes);
  EXPECT_LT(everything.memory.arena_bytes, baseline.memory.arena_bytes);
  EXPECT_LT(compile_toy(RecomputePolicy{.swiglu = true}).memory.peak_live_bytes, baseline.memory.peak_live_bytes);
}

TEST(Recompute, CheckpointsAreKeptAndCopiesPrecedeTheirUse) {
  ExecutionPlan plan = compile_toy(RecomputePolicy::all(), 2);
  const Graph& graph = plan.graph;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.phase == NodePhase::Recompute) {
      EXPECT_TRUE(node.name.starts_with("recompute.")) << node.name;
      EXPECT_NE(node.op, "add") << "residual adds are checkpoints, never recomputed";
    }
    if (node.phase != NodePhase::Backward) continue;
    for (TensorId input : node.inputs) {
      const TensorInfo& info = graph.tensor(input);
      if (info.producer == kNoNode) continue;
      EXPECT_LT(static_cast<size_t>(info.producer), n);
      // With every group on, a backward node reads only checkpoints or copies.
      if (graph.node(info.producer).phase == NodePhase::Forward) {
        EXPECT_TRUE(graph.node(info.producer).recompute_group.empty() || graph.is_output(input)) << info.name;
      }
    }
  }
}

TEST(Recompute, UnknownGroupIsAUserError) {
  EXPECT_THROW(RecomputePolicy::all().recomputes("attention"), UserError);
  EXPECT_TRUE(RecomputePolicy{.att = true}.recomputes("qkv"));
  EXPECT_FALSE(RecomputePolicy{.qkv = true}.recomputes("att"));
  EXPECT_TRUE(RecomputePolicy{.block = true}.recomputes("block:7"));
  EXPECT_TRUE(RecomputePolicy{.ffn = true}.recomputes("swiglu"));
}

TEST(MemoryBreakdown, PrintsRegionsCategoriesAndLargestTensors) {
  ExecutionPlan plan = compile_toy(RecomputePolicy{.swiglu = true}, 2);
  std::string report = compiler::format_memory_breakdown(plan, 5, 4096);
  for (const char* fragment : {"parameters + constants", "parameter gradients", "optimizer state", "4.00 KiB",
                               "activation arena", "activation peak:", "forward activations",
                               "recomputed activations", "backward temporaries", "largest arena tensors"}) {
    EXPECT_NE(report.find(fragment), std::string::npos) << fragment << "\n" << report;
  }
}

}  // namespace
}  // namespace surogate::testing
