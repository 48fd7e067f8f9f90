// ZeRO-3's gather schedule (compiler/weight_gathering.h) on the toy transformer: groups by layer
// with each rank's weights one contiguous piece, one use per layer in the forward and one in the
// backward (the last layer's two are one), each gather issued one use ahead, busy buffers never sharing bytes, a region of about
// two layers; and the gathered plan run on the CPU backend by an observer that writes each group
// when its gather is issued and poisons it with NaN when its use is released gives the loss and
// gradients of the plain plan bit for bit (so no step reads a weight outside its use, and no
// prefetch overwrites a buffer still being read), with and without recompute.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "compiler/execution_plan.h"
#include "compiler/toy_ops.h"
#include "compiler/weight_gathering.h"
#include "engine_test_util.h"

namespace surogate::testing {
namespace {

using namespace surogate::graph;
using compiler::ExecutionPlan;
using compiler::RecomputePolicy;
using compiler::ShardedWeight;
using compiler::WeightGathering;

constexpr int kLayers = 4;

ExecutionPlan compile_toy(const RecomputePolicy& policy) {
  ToyModel model = build_toy_transformer(kLayers, 16, 32, 48, DType::F32);
  compiler::CompileOptions options;
  options.recompute = policy;
  return compiler::compile_training(std::move(model.graph), model.loss, toy_registry(), options);
}

// Every parameter, kept by rank (index mod 3): each layer's weights spread over three ranks.
std::vector<ShardedWeight> every_weight(const ExecutionPlan& plan) {
  std::vector<ShardedWeight> weights;
  int index = 0;
  for (TensorId id : plan.graph.parameters) weights.push_back({id, index++ % 3});
  return weights;
}

TEST(WeightGathering, GroupNamesAreLayersOrTheWeightItself) {
  EXPECT_EQ(compiler::gather_group_name("layers.12.attn.q_proj.lora_A.weight"), "layers.12");
  EXPECT_EQ(compiler::gather_group_name("embed_tokens.weight"), "embed_tokens.weight");
  EXPECT_EQ(compiler::gather_group_name("layers.x.weight"), "layers.x.weight");
}

TEST(WeightGathering, LayersAreGroupsWithOnePiecePerRank) {
  const ExecutionPlan plan = compile_toy(RecomputePolicy::none());
  const WeightGathering gathering = compiler::schedule_weight_gathering(plan, every_weight(plan), 3);
  ASSERT_EQ(gathering.groups.size(), static_cast<size_t>(kLayers));
  for (size_t g = 0; g < gathering.groups.size(); ++g) {
    const compiler::GatherGroup& group = gathering.groups[g];
    EXPECT_EQ(group.name, "layers." + std::to_string(g));
    ASSERT_EQ(group.tensors.size(), 5u);
    ASSERT_EQ(group.piece_offsets.size(), 4u);
    EXPECT_EQ(group.piece_offsets.front(), 0u);
    EXPECT_EQ(group.piece_offsets.back(), group.elements);
    for (size_t i = 0; i < group.tensors.size(); ++i) {
      const auto owner = static_cast<size_t>(group.owners[i]);
      const size_t begin = group.tensor_offsets[i];
      const size_t end = begin + static_cast<size_t>(plan.graph.tensor(group.tensors[i]).type.numel());
      EXPECT_EQ(begin % compiler::kGatherAlignmentElements, 0u);
      EXPECT_GE(begin, group.piece_offsets[owner]) << plan.graph.tensor(group.tensors[i]).name;
      EXPECT_LE(end, group.piece_offsets[owner + 1]) << plan.graph.tensor(group.tensors[i]).name;
      if (i > 0) EXPECT_GE(group.owners[i], group.owners[i - 1]);
    }
  }
  size_t owned = 0;
  for (size_t elements : gathering.owned_elements) owned += elements;
  size_t total = 0;
  for (const compiler::GatherGroup& group : gathering.groups) total += group.elements;
  EXPECT_EQ(owned, total);
}

TEST(WeightGathering, EachLayerIsGatheredForTheForwardAndForTheBackwardOneUseAhead) {
  for (const RecomputePolicy& policy : {RecomputePolicy::none(), RecomputePolicy::all()}) {
    const ExecutionPlan plan = compile_toy(policy);
    const WeightGathering gathering = compiler::schedule_weight_gathering(plan, every_weight(plan), 3);
    // Forward layers 0..3; the last layer reads no other group's weight before its backward, so
    // it stays for it (one use); then the backward of layers 2..0.
    ASSERT_EQ(gathering.uses.size(), 2u * kLayers - 1);
    for (size_t k = 0; k < gathering.uses.size(); ++k) {
      const compiler::GatherUse& use = gathering.uses[k];
      const size_t layer = k < kLayers ? k : 2 * kLayers - 2 - k;
      EXPECT_EQ(use.group, layer) << "use " << k;
      EXPECT_LE(use.first_step, use.last_step);
      EXPECT_EQ(use.issue_step, k == 0 ? use.first_step : gathering.uses[k - 1].first_step);
      if (k > 0) EXPECT_LT(gathering.uses[k - 1].first_step, use.first_step);
    }
    EXPECT_LT(gathering.uses[kLayers - 2].last_step, static_cast<int>(plan.forward_steps));
    EXPECT_LT(gathering.uses[kLayers - 1].first_step, static_cast<int>(plan.forward_steps));
    EXPECT_GE(gathering.uses[kLayers - 1].last_step, static_cast<int>(plan.forward_steps));
    EXPECT_GE(gathering.uses[kLayers].first_step, static_cast<int>(plan.forward_steps));
  }
}

TEST(WeightGathering, BusyBuffersNeverShareBytesAndTheRegionHoldsTwoLayers) {
  const ExecutionPlan plan = compile_toy(RecomputePolicy::none());
  const WeightGathering gathering = compiler::schedule_weight_gathering(plan, every_weight(plan), 3);
  for (size_t a = 0; a < gathering.uses.size(); ++a) {
    for (size_t b = a + 1; b < gathering.uses.size(); ++b) {
      const compiler::GatherUse &x = gathering.uses[a], &y = gathering.uses[b];
      if (x.group == y.group || !(x.issue_step <= y.last_step && y.issue_step <= x.last_step)) continue;
      const compiler::GatherGroup &g = gathering.groups[x.group], &h = gathering.groups[y.group];
      EXPECT_TRUE(g.offset + g.bytes() <= h.offset || h.offset + h.bytes() <= g.offset) << g.name << " / " << h.name;
    }
  }
  const size_t layer_bytes = compiler::align_up(gathering.groups[0].bytes(), 256);
  EXPECT_EQ(gathering.region_bytes, 2 * layer_bytes);
}

// Runs a gathered plan: each group written from the plain values when its gather is issued,
// NaN once its use is released.
class PoisoningGatherer final : public runtime::StepObserver {
public:
  PoisoningGatherer(const WeightGathering& gathering, runtime::CpuBackend& backend,
                    const std::map<TensorId, std::vector<float>>& values)
      : gathering_(gathering), backend_(backend), values_(values) {}
  void before_step(size_t step) override {
    for (size_t use : gathering_.issue_before[step]) {
      const compiler::GatherGroup& group = gathering_.groups[gathering_.uses[use].group];
      for (size_t i = 0; i < group.tensors.size(); ++i) {
        const std::vector<float>& source = values_.at(group.tensors[i]);
        std::memcpy(buffer(group) + group.tensor_offsets[i], source.data(), source.size() * sizeof(float));
      }
    }
  }
  void after_step(size_t step) override {
    for (size_t use : gathering_.release_after[step]) {
      const compiler::GatherGroup& group = gathering_.groups[gathering_.uses[use].group];
      std::fill_n(buffer(group), group.elements, std::numeric_limits<float>::quiet_NaN());
    }
  }

private:
  float* buffer(const compiler::GatherGroup& group) {
    return reinterpret_cast<float*>(backend_.arena_data() + gathering_.region_offset + group.offset);
  }
  const WeightGathering& gathering_;
  runtime::CpuBackend& backend_;
  const std::map<TensorId, std::vector<float>>& values_;
};

TEST(WeightGathering, TheGatheredPlanComputesThePlainPlansLossAndGradientsExactly) {
  for (const RecomputePolicy& policy : {RecomputePolicy::none(), RecomputePolicy::all()}) {
    const ExecutionPlan plain = compile_toy(policy);
    runtime::CpuBackend reference;
    reference.load(plain, toy_registry());
    randomize_all<float>(reference, plain, 7);
    reference.execute({});

    ExecutionPlan gathered = compile_toy(policy);
    const WeightGathering gathering = compiler::schedule_weight_gathering(gathered, every_weight(gathered), 3);
    compiler::apply_weight_gathering(gathered, gathering);
    EXPECT_LT(gathered.memory.parameter_bytes, plain.memory.parameter_bytes);
    runtime::CpuBackend backend;
    backend.load(gathered, toy_registry());
    std::map<TensorId, std::vector<float>> weights;
    for (TensorId id : plain.graph.parameters) weights[id] = read_vector<float>(reference, id);
    for (TensorId id : plain.graph.inputs) {
      const std::vector<float> values = read_vector<float>(reference, id);
      std::copy(values.begin(), values.end(), backend.view<float>(id).begin());
    }
    PoisoningGatherer gatherer(gathering, backend, weights);
    backend.set_step_observer(&gatherer);
    backend.execute({});
    EXPECT_EQ(read_vector<float>(backend, gathered.loss), read_vector<float>(reference, plain.loss));
    for (const auto& [parameter, gradient] : plain.parameter_gradients) {
      EXPECT_EQ(read_vector<float>(backend, gradient), read_vector<float>(reference, gradient))
          << plain.graph.tensor(parameter).name;
    }
  }
}

}  // namespace
}  // namespace surogate::testing
