// The pipeline stage strategy of the parallel device (parallel_device.cpp), written once for every
// backend: a StageRankEngine is one rank's part of the step when pipeline_parallel_size > 1
// (docs/architecture.md, "Pipeline parallel"), driving the rank of a backend (rank_backend.h:
// CpuRank, CudaRank; its units are the stage's "owned" ones below) and its StageRunner (the stage's
// plans in 1F1B order: pipeline_stage.h, for every backend) over the rank's communicators
// (pipeline_stage_groups.h):
//   run_micro_batches(): the rank's micro-batches through its stage in 1F1B order over the world
//     (the trainer scaled each micro-batch's loss by 1 / (loss tokens of the window), so the
//     gradients add up to the window's mean as on one rank). A parameter the first and the last
//     stage read (tied embeddings) belongs to the first: the last stage's gradient of it is added
//     to the first's over their tied pair. Then the stage's gradient group (data × sequence ranks)
//     sums the gradients of the tensors the stage steps, the "owned" units, as one flat buffer
//     (reduce-scatter: each rank receives the sums of its shard, the tensors it steps, alone), and
//     the rank counts their squares.
//   measure(): the last stage's losses, the rank's share of the squares.
//   step_shard() / publish_shard(): each rank steps the optimizer for its shard of the owned units
//     (ZeRO-1 over the gradient group: place_shards), an all-gather of the fp32 weights within the
//     group gives every rank of the stage its weights (shard_publish.h), the first stage sends the
//     tied weights to the last, and the backend refreshes what reads them.
// Every communicator's collectives come in this one order on every rank.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/parallel_layout.h"
#include "distributed/shard_placement.h"
#include "train/device/parallel/rank_backend.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/pipeline_parameters.h"
#include "train/device/pipeline_stage_groups.h"
#include "train/device/shard_publish.h"

namespace surogate::train {

class StageRankEngine final : public RankEngine {
public:
  // Local rank `local` of `layout` (which must outlive the engine): its place and its group index.
  StageRankEngine(const distributed::ParallelLayout& layout, int local);

  // The rank's shard of its stage's owned units (`owned_sizes`: their elements), placed over the
  // gradient group; before the rank is made (its optimizer steps the shard).
  void place_shard(std::span<const size_t> owned_sizes);

  void take(std::span<const runtime::InputBinding> inputs, int sequence_index, int sequence_ranks) override;
  void run_micro_batches() override;
  RankMeasure measure() override;
  bool has_router_aux_loss() const override { return false; }
  void set_grad_norm(double norm) override { rank->set_grad_norm(norm); }
  void step_shard(const OptimizerStep& step) override { rank->step(step); }
  void publish_shard() override;
  void finish_update(const OptimizerStep&) override { zero_gradients(); }
  // Pipelines run no fp8_hybrid (config/feature_support.cpp refuses the recipe with them).
  void calibrate_fp8_scaling() override {}
  void drop_fp8_amaxes() override {}
  // The flat buffers are overwritten by the next step's reduction.
  void zero_gradients() override { rank->zero_gradients(); }
  std::vector<StateTensor> optimizer_state() override { return rank->optimizer_state(); }
  size_t gradient_accumulator_bytes() const override { return rank->gradient_accumulator_bytes(); }

  distributed::RankPlace place;
  int group_index = 0;            // in its stage's gradient group (pipeline_stage_groups.h)
  distributed::Shard shard;       // over the owned units
  std::unique_ptr<StageRunner> runner;
  std::unique_ptr<RankBackend> rank;  // released before the runner, whose plans its views read
  std::unique_ptr<distributed::Communicator> world, group, tied_pair;

private:
  const distributed::ParallelLayout& layout_;
  std::vector<size_t> shard_sizes_;  // the gradient group's pieces of the owned flat buffer
  size_t units_ = 0;                 // the owned units
  std::vector<StageMicroBatch> pending_;
};

}  // namespace surogate::train
