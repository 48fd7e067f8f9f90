// The CPU backend's host side of the parallel device's pipeline stages; see cpu_rank_host.h. A stage
// rank's CpuRank runs over the stage's training CpuBackend: its fp32 owned gradients are copied
// into one flat buffer (the trainable tensors the stage steps, in plan order) for the gradient
// group's sum, and its weights travel through it for ZeRO-1.
#include "train/device/parallel/cpu_rank_host.h"

#include <algorithm>

#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "train/device/cpu_parameters.h"
#include "train/device/parallel/cpu_rank_plans.h"
#include "train/device/parallel/pipeline_stage.h"
#include "train/device/pipeline_parameters.h"
#include "train/device/pipeline_stage_groups.h"

namespace surogate::train {

void CpuRankHost::make_stages(const RanksSetup& setup, const StagePlan& plan,
                              std::span<const std::unique_ptr<StageRankEngine>> engines) {
  for (const PipelineStagePlan& stage : plan.pipeline.stages) graphs_.push_back(&stage.graph);
  std::unique_ptr<distributed::ProcessWorld> alone = distributed::ProcessWorld::single();
  auto world = distributed::connect_gloo(threads_, *alone, 0, layout_.world_size);
  auto groups = distributed::connect_gloo_groups(threads_, *alone, 0,
                                                 [&](int rank) { return stage_gradient_group(layout_, rank); });
  const bool tied = !plan.tied.empty();
  auto pairs = distributed::connect_gloo_groups(threads_, *alone, 0,
                                                [&](int rank) { return tied_pair_group(layout_, rank, tied); });
  sequence_groups_ = connect_cpu_sequence_groups(threads_, *alone, layout_);
  for (int r = 0; r < layout_.local_ranks; ++r) {
    StageRankEngine& engine = *engines[static_cast<size_t>(r)];
    engine.world = std::move(world[static_cast<size_t>(r)]);
    engine.group = std::move(groups[static_cast<size_t>(r)]);
    engine.tied_pair = std::move(pairs[static_cast<size_t>(r)]);
    make_stage(engine, sequence_groups_.registry(r, *setup.device.registry), plan);
  }
}

// The rank's stage on CPU backends: its owned units (the first stage steps the tied ones), its
// shard of them and the optimizer over it.
void CpuRankHost::make_stage(StageRankEngine& engine, const graph::OpRegistry& registry, const StagePlan& plan) {
  const int stage_index = engine.place.stage;
  const PipelineStagePlan& stage_plan = plan.pipeline.stages[static_cast<size_t>(stage_index)];
  const StageBoundary boundary = stage_boundary(stage_plan);
  auto device = std::make_unique<CpuRankPlans>(stage_plan, registry, boundary);
  CpuRankPlans& stage = *device;
  auto runner = std::make_unique<PipelineStage>(plan_, stage_plan, graphs_, boundary, std::move(device));
  auto rank = std::make_unique<CpuRank>(stage.training(), optimizer_.max_grad_norm);
  rank->parameters =
      bind_cpu_parameters(stage.training(), stage_plan.training, stage_parameter_specs(stage_plan, specs_));
  std::vector<size_t> owned, sizes;
  for (size_t i = 0; i < rank->parameters.trainable.size(); ++i) {
    const WeightView& weight = rank->parameters.trainable[i];
    if (plan.tied.contains(weight.name)) {
      const std::span<const float> gradient = rank->parameters.gradients[i];
      rank->tied_gradient_regions.push_back({const_cast<float*>(gradient.data()), gradient.size()});
      rank->tied_weight_regions.push_back({weight.values.data(), weight.values.size()});
    }
    if (plan.tied.contains(weight.name) && stage_index != 0) continue;  // the first stage steps it
    owned.push_back(i);
    sizes.push_back(weight.values.size());
  }
  engine.place_shard(sizes);
  rank->set_units(std::move(owned), true);
  rank->make_optimizer(engine.shard, optimizer_);
  stages_.push_back(&stage);
  ranks_.push_back(rank.get());
  engine.runner = std::move(runner);
  engine.rank = std::move(rank);
}

std::vector<std::string> CpuRankHost::stage_weights(int r) const {
  std::vector<std::string> names;
  for (const WeightView& weight : ranks_[static_cast<size_t>(r)]->parameters.weights) names.push_back(weight.name);
  return names;
}

std::vector<std::string> CpuRankHost::stage_trainable(int r) const {
  std::vector<std::string> names;
  for (const WeightView& weight : ranks_[static_cast<size_t>(r)]->parameters.trainable) names.push_back(weight.name);
  return names;
}

std::unique_ptr<Evaluator> CpuRankHost::make_stage_evaluator(const EvaluatorSetup& setup,
                                                             std::span<const WeightView> weights) {
  return make_cpu_evaluator(setup, weights, quantized_);
}

void CpuRankHost::store_stage_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) {
  quantized_.push_back({weight, pieces});  // kept: a copy (the caller reuses its buffers)
  const QuantizedPieces& stored = quantized_.back().pieces;
  for (CpuRankPlans* stage : stages_) {
    for (size_t i = 0; i < weight.pieces.size(); ++i) stage->write_weight(weight.pieces[i], stored.bytes[i]);
  }
}

// The optimizer state needs nothing: each rank's own shard is what optimizer_state() views.
void CpuRankHost::upload_stage(int r, std::span<const WeightView> weights) {
  const std::vector<WeightView>& own = ranks_[static_cast<size_t>(r)]->parameters.weights;
  for (size_t i = 0; i < own.size(); ++i) std::ranges::copy(weights[i].values, own[i].values.begin());
  stages_[static_cast<size_t>(r)]->refresh_forward_weights(false);
}

void CpuRankHost::download_stage(int r, std::span<const WeightView> weights) {
  const std::vector<WeightView>& own = ranks_[static_cast<size_t>(r)]->parameters.weights;
  for (size_t i = 0; i < own.size(); ++i) {
    if (!weights[i].values.empty()) std::ranges::copy(own[i].values, weights[i].values.begin());
  }
}

}  // namespace surogate::train
