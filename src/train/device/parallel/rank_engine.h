// What a backend gives the one parallel device (parallel_device.h), so that the step's algorithm —
// which rank trains which micro-batch, the world's loss and norm, the ZeRO shard step and weight
// exchange — is written once for the CPU and the GPUs, for data and for pipeline parallelism:
//   - a RankEngine per rank of this process: it keeps its micro-batches, runs them (a replica's
//     whole model, whose reduction observers, gradient_buckets.h / sharded_gradients.h, sum the
//     gradients over the ranks as the backward completes them; or a pipeline stage in 1F1B order,
//     whose gradient group sums them after the schedule, pipeline_stage_groups.h), counts its part
//     of the squared norm, steps the optimizer for its shard and publishes the shard (ZeRO-1/2:
//     shard_publish.h, or the bucket staging; a pipeline's tied weights) so that every rank holds
//     the updated weights;
//     Both strategies' engines (replica_rank_engine.h, stage_ranks.h, with the stage's 1F1B in
//     pipeline_stage.h) are written once over one rank class and one plans class per backend
//     (rank_backend.h);
//   - BackendRanks, the ranks together with the host side the trainer sees (host copies of the
//     weights, upload / download, the evaluator, the quantized base, fp8_hybrid's state): one class
//     per strategy (data_parallel_ranks.cpp: DataParallelRanks; pipeline_ranks.cpp: PipelineRanks)
//     holding what does not depend on the backend (which rank holds what, the host-copy policy, the
//     order of the collectives that move weights) over one host class per backend (rank_host.h:
//     RankHost; CpuRankHost, CudaRankHost), which makes a rank's objects and copies its weights.
// A new backend is one rank class, one plans class (rank_backend.h) and one host class; a new
// strategy is one engine and one ranks class.
// A RankEngine's work (run_micro_batches through zero_gradients) runs on the rank's own thread
// (distributed/rank_threads.h); take() and the queries run on the trainer's.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "distributed/parallel_layout.h"
#include "distributed/rank_threads.h"
#include "runtime/backend.h"
#include "train/device/process_window.h"
#include "train/device/training_device.h"

namespace surogate::train {

class RankEngine {
public:
  virtual ~RankEngine() = default;

  // Keeps micro-batch `inputs` for run_micro_batches(): the slice `sequence` of `sequence_ranks`
  // of its token inputs (micro_batch.h).
  virtual void take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) = 0;
  // Runs (or enqueues) the kept micro-batches: the gradients add up and the replica reduction sums
  // them over the ranks. Collective.
  virtual void run_micro_batches() = 0;
  // The rank's part of the step's metrics: its losses (a pipeline's last stage reports them), and
  // the squares of its shard's summed gradients (the only sums it receives: the reduction is a
  // reduce-scatter). Waits for the rank's device.
  virtual RankMeasure measure() = 0;
  // Whether measure() reported the router aux loss (MoE plans with it).
  virtual bool has_router_aux_loss() const = 0;
  // The world's gradient norm, which clips every rank's step.
  virtual void set_grad_norm(double norm) = 0;
  // Clips and steps the optimizer for the rank's shard (nothing when the shard is empty).
  virtual void step_shard(const OptimizerStep& step) = 0;
  // ZeRO-1/2: the rank's stepped shard to every rank, and every other shard from them. Collective.
  virtual void publish_shard() = 0;
  // After the weights changed: the FP8 copies of trained weights rewritten, the gradients zeroed,
  // and fp8_hybrid's scaling state max-reduced over the world and rolled. Collective.
  virtual void finish_update(const OptimizerStep& step) = 0;
  // fp8_hybrid's calibration (TrainingDevice::calibrate_fp8_scaling): the recorded amaxes
  // max-reduced over the world and rolled into the history's last slot. Collective.
  virtual void calibrate_fp8_scaling() = 0;
  // The gradients zeroed (a step not applied).
  virtual void zero_gradients() = 0;
  // fp8_hybrid's amaxes recorded since the last roll dropped (a step not applied; nothing without
  // the recipe).
  virtual void drop_fp8_amaxes() = 0;
  // The state tensors of the rank's optimizer (none when its shard is empty).
  virtual std::vector<StateTensor> optimizer_state() = 0;
  // What the rank keeps beside its plan to accumulate gradients (training_device.h).
  virtual size_t gradient_accumulator_bytes() const = 0;
  // A training objective's outputs (TrainingDevice::keep_outputs, the trainer plan's tensors): each
  // micro-batch the rank runs keeps their values, and take_outputs() hands over those kept since the
  // last call, one per micro-batch in the order run (after measure()). Runs on the rank's thread.
  // The replicas' engines keep them (replica_rank_engine.h); a pipeline stage keeps none.
  virtual void keep_outputs(std::span<const graph::TensorId> tensors) {
    SUROGATE_CHECK(tensors.empty(), "a pipeline stage keeps no outputs (surogate dpo is refused with pipelines)");
  }
  virtual std::vector<KeptOutputs> take_outputs() { return {}; }
};

class BackendRanks {
public:
  virtual ~BackendRanks() = default;

  virtual RankEngine& engine(int local_rank) = 0;

  virtual std::string description() const = 0;
  virtual std::span<const WeightView> weights() const = 0;
  virtual std::span<const WeightView> trainable() const = 0;
  virtual bool host_views_are_live() const = 0;
  // fp8_hybrid's scaling state, the same on every rank after each step (after the optimizer state
  // in checkpoints); none without it.
  virtual std::optional<StateTensor> fp8_state_tensor() = 0;
  virtual std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) = 0;
  virtual void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) = 0;
  // The host copies to every rank (each rank's optimizer state from its own host views). Collective.
  virtual void upload() = 0;
  // ZeRO-3: each trainable weight from its owner into the host copies. Collective.
  virtual void download_weight_shards() = 0;
  // The rest of download(): what a backend keeps apart from the host copies (GPUs: rank 0's
  // weights, the optimizer state, fp8_hybrid's state). Collective.
  virtual void download() = 0;
  // Before each evaluation: what the evaluator reads brought up to date (pipelines: the host
  // copies), beyond ZeRO-3's shards. Collective.
  virtual void before_evaluation() {}
  virtual std::vector<std::pair<std::string, double>> time_breakdown() { return {}; }
  virtual std::vector<std::pair<std::string, double>> step_phases() { return {}; }
  // Whether every local rank's backend holds every weight of the trainer's plan, as loaded with it
  // (data-parallel replicas; not ZeRO-3's shards, sequence slices or pipeline stages): GRPO's
  // rollouts read them in place (TrainingDevice::on_weight_ranks).
  virtual bool replicas_hold_weights() const { return false; }
  // That backend of `local_rank`, the rank's writes to it finished (a GPU's stream waited for).
  // On the rank's thread; only where replicas_hold_weights().
  virtual const runtime::Backend& replica_weights(int /*local_rank*/) {
    throw InternalError("replica_weights of ranks that hold no whole replica");
  }
};

// What a backend's ranks are made from: the device's setup, its layout and its rank threads (each
// rank's objects are made on its own thread).
struct RanksSetup {
  const TrainingDeviceSetup& device;
  const distributed::ParallelLayout& layout;
  distributed::RankThreads& threads;
};

}  // namespace surogate::train
