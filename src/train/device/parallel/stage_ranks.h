// The pipeline stage strategy of the parallel device (parallel_device.cpp), written once for every
// backend: a StageRankEngine is one rank's part of the step when pipeline_parallel_size > 1
// (docs/architecture.md, "Pipeline parallel"), driving a StageBackend — what one stage rank of a
// backend is (cpu_pipeline_ranks.cpp: the stage on CpuBackends; cuda_pipeline_ranks.cpp: on a
// GPU) — over the rank's communicators (pipeline_stage_groups.h):
//   run_micro_batches(): the rank's micro-batches through its stage in 1F1B order over the world
//     (the trainer scaled each micro-batch's loss by 1 / (loss tokens of the window), so the
//     gradients add up to the window's mean as on one rank). A parameter the first and the last
//     stage read (tied embeddings) belongs to the first: the last stage's gradient of it is added
//     to the first's over their tied pair. Then the stage's gradient group (data × sequence ranks)
//     sums the gradients of the tensors the stage steps, the "owned" units, as one flat buffer
//     (all-reduce, or reduce-scatter under ZeRO-2), and the rank counts the squares of what it
//     holds: its shard's (ZeRO-2), or all of them (the group's first rank reports them).
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
#include "train/device/parallel/rank_engine.h"
#include "train/device/pipeline_parameters.h"
#include "train/device/pipeline_stage_groups.h"
#include "train/device/shard_publish.h"

namespace surogate::train {

// One pipeline-stage rank of a backend: its stage's plans on the rank's device, its gradients and
// weights as regions of flat buffers, its optimizer over its shard. The "owned" units are the
// trainable tensors the stage steps (all but the last stage's tied ones), in one flat buffer.
// Everything but take() runs on the rank's thread.
class StageBackend {
public:
  virtual ~StageBackend() = default;

  // The micro-batch's inputs the stage's plans read: rank `sequence` of a sequence group of
  // `sequence_ranks` keeps its slice of the token inputs (micro_batch.h).
  virtual StageMicroBatch take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) = 0;
  // One step's micro-batches through the stage's schedule (run, or enqueued on the rank's device);
  // `peer(stage)` is the world rank of that stage in the rank's replica, at its sequence index.
  virtual void run(std::span<const StageMicroBatch> batches, distributed::Communicator& world,
                   const std::function<int(int stage)>& peer) = 0;
  // The gradients' dtype in the collectives, the tied tensors' gradients and fp32 weights (in one
  // order on both ends of the pipeline), and the owned gradients as one flat buffer (a backend whose
  // gradients are not one buffer copies them into it here).
  virtual DType gradient_dtype() const = 0;
  virtual std::vector<CollectiveRegion> tied_gradients() = 0;
  virtual std::vector<CollectiveRegion> tied_weights() = 0;
  virtual CollectiveRegion owned_gradients() = 0;
  // After the group's sum: the squares of the owned units [first, end) (a GPU: enqueued).
  virtual void count_squares(size_t first, size_t end) = 0;
  // Waits for the rank's device (a GPU's communicators all enqueue on its stream, `world`'s
  // included): the step's summed loss (0 but on the last stage) and the squares counted.
  virtual RankMeasure measure(distributed::Communicator& world) = 0;
  virtual void set_grad_norm(double norm) = 0;
  // Clips by the norm and steps the optimizer for the rank's shard (nothing when it is empty).
  virtual void step(const OptimizerStep& step) = 0;
  // ZeRO-1's exchange (shard_publish.h): the fp32 flat buffer of the owned weights the group
  // all-gathers, and how a run of units travels between it and the stage's weights.
  virtual void* owned_weights() = 0;
  virtual ShardCopies shard_copies() = 0;
  // After the weights changed (the group's and the tied pair's exchanges): what reads them rewritten.
  virtual void refresh_weights() = 0;
  virtual void zero_gradients() = 0;
  virtual std::vector<StateTensor> optimizer_state() = 0;
  virtual size_t gradient_accumulator_bytes() const = 0;
};

class StageRankEngine final : public RankEngine {
public:
  // Local rank `local` of `layout` (which must outlive the engine): its place and its group index.
  StageRankEngine(const distributed::ParallelLayout& layout, int local);

  // The rank's shard of its stage's owned units (`owned_sizes`: their elements), placed over the
  // gradient group; before the backend is made (its optimizer steps the shard).
  void place_shard(std::span<const size_t> owned_sizes);

  void take(std::span<const runtime::InputBinding> inputs, int sequence_index, int sequence_ranks) override;
  void run_micro_batches() override;
  RankMeasure measure() override;
  bool has_router_aux_loss() const override { return false; }
  void set_grad_norm(double norm) override { backend->set_grad_norm(norm); }
  void step_shard(const OptimizerStep& step) override { backend->step(step); }
  void publish_shard() override;
  void finish_update(const OptimizerStep&) override { zero_gradients(); }
  // The flat buffers are overwritten by the next step's reduction.
  void zero_gradients() override { backend->zero_gradients(); }
  std::vector<StateTensor> optimizer_state() override { return backend->optimizer_state(); }
  size_t gradient_accumulator_bytes() const override { return backend->gradient_accumulator_bytes(); }

  distributed::RankPlace place;
  int group_index = 0;            // in its stage's gradient group (pipeline_stage_groups.h)
  distributed::Shard shard;       // over the owned units
  std::unique_ptr<StageBackend> backend;
  std::unique_ptr<distributed::Communicator> world, group, tied_pair;

private:
  // Whether the rank reports the squares it counts (ZeRO-2: its shard; else the group's first).
  bool counts_squares() const;

  const distributed::ParallelLayout& layout_;
  std::vector<size_t> shard_sizes_;  // the gradient group's pieces of the owned flat buffer
  size_t units_ = 0;                 // the owned units
  std::vector<StageMicroBatch> pending_;
};

}  // namespace surogate::train
