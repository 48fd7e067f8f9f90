// The GPUs' host side of the parallel device's pipeline stages; see cuda_rank_host.h. A stage
// rank's CudaRank runs over its CudaPipelineStage's state, whose flat layout holds the last stage's
// tied tensors first, so that the tensors it steps are one run: its micro-batches are enqueued in
// the rounds of distributed/pipeline_rounds.h (1F1B), each backward adding the stage's bf16
// parameter gradients into the flat accumulators, which the tied pair and the gradient group sum in
// place (in their dtype); ZeRO-1's all-gather carries the fp32 masters, and the last stage rewrites
// its bf16 copies of the tied tensors from the masters the first stage sends. Every communicator
// enqueues on the rank's training stream, in one order on every rank (the pipeline's transfers,
// then the tied pair, then the stage's gradient group), so no two NCCL kernels of different
// communicators wait for each other.
#include "train/device/parallel/cuda_rank_host.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "distributed/nccl_communicator.h"
#include "train/device/cuda_evaluator.h"
#include "train/device/parallel/pipeline_stage.h"
#include "train/device/pipeline_parameters.h"
#include "train/device/pipeline_stage_groups.h"

namespace surogate::train {

// Every rank's stage first, then the NCCL communicators on the ranks' training streams.
void CudaRankHost::make_stages(const RanksSetup& setup, const StagePlan& plan,
                               std::span<const std::unique_ptr<StageRankEngine>> engines) {
  pipeline_ = &plan.pipeline;
  for (const PipelineStagePlan& stage : plan.pipeline.stages) graphs_.push_back(&stage.graph);
  for (const std::unique_ptr<StageRankEngine>& engine : engines) {
    stage_engines_.push_back(engine.get());
    plan_stage(*engine, plan);
  }
  threads_.run([&](int r) { make_stage_state(setup.device, r); });
  std::vector<void*> streams;
  for (int r = 0; r < layout_.local_ranks; ++r) streams.push_back(state(r).stream());
  std::unique_ptr<distributed::ProcessWorld> alone = distributed::ProcessWorld::single();
  auto world = distributed::connect_nccl_world(threads_, *alone, 0, layout_.world_size, layout_.first_device, streams);
  auto groups = distributed::connect_nccl_groups(threads_, *alone, 0, layout_.world_size, layout_.first_device, streams,
                                                 [&](int rank) { return stage_gradient_group(layout_, rank); });
  const bool tied = std::ranges::any_of(ranks_, [](const CudaRank* rank) { return !rank->tied.empty(); });
  auto pairs = distributed::connect_nccl_groups(threads_, *alone, 0, layout_.world_size, layout_.first_device, streams,
                                                [&](int rank) { return tied_pair_group(layout_, rank, tied); });
  for (size_t r = 0; r < engines.size(); ++r) {
    engines[r]->world = std::move(world[r]);
    engines[r]->group = std::move(groups[r]);
    engines[r]->tied_pair = std::move(pairs[r]);
  }
  // Sequence parallelism: each stage's plans exchange over their group on their own stream (the
  // last stage has no forward plan: its forward group, on the training stream, stays idle).
  sequence_groups_.connect(threads_, *alone, layout_, streams, "sequence");
  std::vector<void*> forward_streams;
  for (size_t r = 0; r < stages_.size(); ++r) {
    cudaStream_t forward = stages_[r]->device->forward_stream();
    forward_streams.push_back(forward != nullptr ? forward : streams[r]);
  }
  forward_sequence_.connect(threads_, *alone, layout_, forward_streams, "sequence-forward");
}

// What a rank holds and steps, from the plans alone: its stage's parameters (the last stage's tied
// ones first), their layout, and its shard of the stage's owned tensors over the gradient group.
void CudaRankHost::plan_stage(StageRankEngine& engine, const StagePlan& plan) {
  const int stage_index = engine.place.stage;
  const PipelineStagePlan& stage_plan = plan.pipeline.stages[static_cast<size_t>(stage_index)];
  auto stage = std::make_unique<CudaStage>();
  stage->specs = stage_parameter_specs(stage_plan, specs_, stage_index == 0 ? std::set<std::string>{} : plan.tied);
  stage->layout = cuda_trainable_layout(stage_plan.training, stage->specs);
  std::vector<size_t> tied_entries;
  for (size_t i = 0; i < stage->layout.entries.size(); ++i) {
    if (plan.tied.contains(stage->specs[stage->layout.entries[i].weight].name)) tied_entries.push_back(i);
  }
  stage->owned_first = stage_index == 0 ? 0 : tied_entries.size();
  const std::vector<size_t> units = stage->layout.unit_sizes();
  engine.place_shard(std::span<const size_t>(units).subspan(stage->owned_first));
  auto rank = std::make_unique<CudaRank>(stage->layout, stage->owned_first);
  rank->tied = std::move(tied_entries);
  ranks_.push_back(rank.get());
  engine.rank = std::move(rank);
  stages_.push_back(std::move(stage));
}

void CudaRankHost::make_stage_state(const TrainingDeviceSetup& setup, int r) {
  CUDA_CHECK(cudaSetDevice(layout_.first_device + r));
  StageRankEngine& engine = *stage_engines_[static_cast<size_t>(r)];
  CudaStage& stage = *stages_[static_cast<size_t>(r)];
  const PipelineStagePlan& plan = pipeline_->stages[static_cast<size_t>(engine.place.stage)];
  TrainingDeviceSetup stage_setup = setup;
  stage_setup.plan = &plan.training;
  stage_setup.specs = stage.specs;
  stage_setup.pipeline = nullptr;
  if (const runtime::CudaOpTable* table = sequence_groups_.table(r)) stage_setup.cuda_ops = table;
  const StageBoundary boundary = stage_boundary(plan);
  auto device = std::make_unique<CudaRankPlans>(
      std::make_unique<CudaRankState>(stage_setup, stage.layout, stage.owned_first + engine.shard.first_unit,
                                      stage.owned_first + engine.shard.end_unit),
      stage_setup, plan, boundary, stage.owned_first, forward_sequence_.table(r));
  stage.device = device.get();
  ranks_[static_cast<size_t>(r)]->attach(device->state());
  auto runner = std::make_unique<PipelineStage>(plan_, plan, graphs_, boundary, std::move(device));
  runner->prepare(pipeline_->micro_batches);
  engine.runner = std::move(runner);
  CUDA_CHECK(cudaDeviceSynchronize());
}

void CudaRankHost::release_stage(int r) {
  StageRankEngine& engine = *stage_engines_[static_cast<size_t>(r)];
  forward_sequence_.release(r);
  sequence_groups_.release(r);
  engine.tied_pair.reset();
  engine.group.reset();
  engine.world.reset();
  engine.rank.reset();
  engine.runner.reset();
}

std::vector<std::string> CudaRankHost::stage_weights(int r) const {
  std::vector<std::string> names;
  for (const models::ParameterSpec& spec : stages_[static_cast<size_t>(r)]->specs) names.push_back(spec.name);
  return names;
}

std::vector<std::string> CudaRankHost::stage_trainable(int r) const {
  const CudaStage& stage = *stages_[static_cast<size_t>(r)];
  std::vector<std::string> names;
  for (const CudaTrainable& entry : stage.layout.entries) names.push_back(stage.specs[entry.weight].name);
  return names;
}

// On GPU 0, gathering the weights layer by layer from the host copies (as under ZeRO-3).
std::unique_ptr<Evaluator> CudaRankHost::make_stage_evaluator(const EvaluatorSetup& setup,
                                                              std::span<const WeightView> weights) {
  std::unique_ptr<Evaluator> inner;
  QuantizedPieceSource quantized;
  if (!quantized_.empty()) {
    quantized = [this](const std::string& piece) -> std::span<const std::byte> { return quantized_pieces_.at(piece); };
  }
  threads_.run([&](int r) {
    if (r == 0) inner = make_cuda_gathering_evaluator(setup, state(0).backend(), weights, quantized);
  });
  return on_rank_zero(threads_, std::move(inner));
}

// Written into every stage that holds the pieces (its forward plan reads them in place).
void CudaRankHost::store_stage_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) {
  quantized_.push_back({weight, pieces});  // kept: a copy (the caller reuses its buffers)
  const StoredQuantizedWeight& stored = quantized_.back();
  for (size_t i = 0; i < weight.pieces.size(); ++i) quantized_pieces_[weight.pieces[i]] = stored.pieces.bytes[i];
  threads_.run([&](int r) {
    const compiler::ExecutionPlan& plan =
        pipeline_->stages[static_cast<size_t>(stage_engines_[static_cast<size_t>(r)]->place.stage)].training;
    if (!weight.pieces.empty() && plan.graph.find_tensor(weight.pieces.front())) {
      write_quantized(state(r).backend(), plan, weight, stored.pieces);
    }
  });
}

void CudaRankHost::upload_stage(int r, std::span<const WeightView> weights) {
  CudaRankState& rank_state = state(r);
  rank_state.upload_weights(weights);
  if (rank_state.optimizer()) rank_state.optimizer()->upload(rank_state.stream());
  rank_state.synchronize();
}

// A trainable weight that is not the rank's to write (the last stage's tied ones: the first
// stage's copy is the host's) lands in scratch.
void CudaRankHost::download_stage(int r, std::span<const WeightView> weights) {
  CudaStage& stage = *stages_[static_cast<size_t>(r)];
  CudaRankState& rank_state = state(r);
  if (std::ranges::any_of(weights, [](const WeightView& weight) { return !weight.values.empty(); })) {
    std::vector<WeightView> downloads(weights.begin(), weights.end());
    stage.scratch.resize(downloads.size());
    for (const CudaTrainable& entry : stage.layout.entries) {
      WeightView& download = downloads[entry.weight];
      if (!download.values.empty()) continue;
      stage.scratch[entry.weight].resize(static_cast<size_t>(graph::shape_numel(download.shape)));
      download.values = stage.scratch[entry.weight];
    }
    rank_state.download_trainable(downloads);
  }
  if (rank_state.optimizer()) rank_state.optimizer()->download(rank_state.stream());
  rank_state.synchronize();
}

}  // namespace surogate::train
