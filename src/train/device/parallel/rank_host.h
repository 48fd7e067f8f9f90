// The host side of one backend's ranks, for both strategies of the parallel device: what the
// strategies' ranks (data_parallel_ranks.cpp: DataParallelRanks; pipeline_ranks.cpp: PipelineRanks)
// ask of a backend, so that which rank holds what, the host-copy policy and the order of the
// collectives are written once per strategy and the backend only supplies its operations:
//   - make a rank's objects on its thread (its RankBackend and its plans, its
//     communicators, the replica reduction's pieces, its optimizer) into the strategy's engine;
//   - host copies of the weights in the backend's host memory, and copy weights between them and
//     a rank (the whole set, ZeRO-3's owned pieces, a stage's);
//   - the evaluator, the quantized base, fp8_hybrid's scaling state, the time breakdown.
// One class per backend: CpuRankHost (cpu_rank_host.h, gloo), CudaRankHost (cuda_rank_host.h,
// NCCL). The upload, download and replica_backend calls run on local rank `r`'s thread
// (distributed/rank_threads.h); the others on the trainer's (the make calls and those that reach
// the ranks run their work on the rank threads themselves).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compiler/execution_plan.h"
#include "compiler/weight_gathering.h"
#include "distributed/communicator.h"
#include "distributed/parallel_layout.h"
#include "models/model_spec.h"
#include "train/device/fp8_state.h"
#include "train/device/gradient_buckets.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/replica_rank_engine.h"
#include "train/device/parallel/stage_ranks.h"
#include "train/pipeline_plan.h"
#include "train/quantized_weights.h"

namespace surogate::train {

// Host copies of weights (fp32, in spec order), in memory the backend allocates (GPUs: the
// trainable ones pinned).
struct HostWeights {
  std::vector<WeightView> weights, trainable;
  std::shared_ptr<void> memory;  // what the views point into
};

// A replica's trainable units, in spec order: the flat buffer's and the optimizer shards' units.
struct ReplicaUnits {
  std::vector<graph::TensorId> weights;    // every spec's tensor in the plan
  std::vector<graph::TensorId> trainable;  // the trainable ones
  std::vector<graph::TensorId> gradients;  // their gradients
  std::vector<size_t> sizes;               // each unit's elements in the flat buffer
  size_t gradient_bytes = sizeof(float);   // an element of the reduced gradients
};

// What the data-parallel strategy decided that a backend's replicas are made from.
struct ReplicaPlan {
  const ReplicaShared& shared;                  // the plans, the shards' sizes, fp8_hybrid's state
  const ReplicaUnits& units;
  const GradientBuckets& buckets;
  const compiler::WeightGathering* gathering;   // ZeRO-3: the ranks' weights in gather buffers; null otherwise
};

// What the pipeline strategy decided that a backend's stage ranks are made from: the tensors the
// first and the last stage share (tied embeddings, stepped by the first).
struct StagePlan {
  const PipelinePlan& pipeline;
  const std::set<std::string>& tied;
};

class RankHost {
public:
  virtual ~RankHost() = default;

  // The device's description: the backend's numbers, then `parallelism` (the strategy's layout).
  virtual std::string description(const std::string& parallelism) const = 0;
  // Host copies of `specs`, `trainable` (by name) among them.
  virtual HostWeights make_host_copies(std::span<const models::ParameterSpec> specs,
                                       const std::set<std::string>& trainable) const = 0;
  // Whether a rank's weights are host memory the trainer may view in place (the CPU's).
  virtual bool ranks_share_host_memory() const = 0;
  // TrainingDevice::host_views_are_live: the CPU's views are its ranks' (or written by them); a
  // GPU's host copies only by download(), but offload_optimizer's state lives in host memory.
  virtual bool host_views_are_live() const = 0;
  // Before the engines are destroyed: each rank's objects released on its own thread.
  virtual void release() noexcept {}
  virtual std::vector<std::pair<std::string, double>> time_breakdown() { return {}; }
  // The first rank's phases of the last complete replica step (TrainingDevice::step_phases).
  virtual std::vector<std::pair<std::string, double>> step_phases() { return {}; }

  // --- Replicas (data and sequence parallelism).
  // The trainable units of the trainer's plan.
  virtual ReplicaUnits replica_units() = 0;
  // ZeRO-3: where the quantized base stays, over the ranks' plan `gathered`.
  virtual void shard_quantized_base(compiler::ExecutionPlan& gathered) = 0;
  // Each local rank's RankBackend and plans (its ReplicaRunner) into `engines` (their shards set), their world
  // communicators, the replica reduction's step observers and the optimizer of each shard.
  virtual void make_replicas(const RanksSetup& setup, const ReplicaPlan& plan,
                             std::span<const std::unique_ptr<ReplicaRankEngine>> engines) = 0;
  // Local rank `r`'s weights where ranks_share_host_memory() (spec order; trainable ones).
  virtual std::span<const WeightView> replica_weights(int r) const = 0;
  virtual std::span<const WeightView> replica_trainable(int r) const = 0;
  // fp8_hybrid's scaling state as checkpoints read it (the same on every rank after a step).
  virtual StateTensor replica_fp8_state(const Fp8State& fp8) = 0;
  // `weights`: what the evaluator reads the weights from (ZeRO-3: the host copies).
  virtual std::unique_ptr<Evaluator> make_replica_evaluator(const EvaluatorSetup& setup,
                                                            std::span<const WeightView> weights) = 0;
  virtual void store_replica_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) = 0;
  // upload(), on the world's first rank before any collective: fp8_hybrid's state into its rank,
  // and (`whole`: where its weights are neither the host's own nor ZeRO-3's pieces) `host`.
  virtual void load_first_rank(int r, const HostWeights& host, bool whole) = 0;
  // upload(), collective: the world's first rank's weights to every rank.
  virtual void broadcast_weights(int r) = 0;
  // ZeRO-3 upload(), collective: each weight of `host` from the world's first rank to its owner.
  virtual void upload_owned(int r, const HostWeights& host) = 0;
  // After the weights: fp8_hybrid's state from the world's first rank, the FP8 copies of trained
  // weights, the optimizer state from its host views. Collective.
  virtual void finish_upload(int r) = 0;
  // ZeRO-3: each trainable weight from its owner into `host` (the first local rank writes it). Collective.
  virtual void download_owned(int r, const HostWeights& host) = 0;
  // download(): what the rank keeps apart from its host views (`host`: the trainable weights, when
  // `whole`, from the first local rank), the optimizer state, fp8_hybrid's.
  virtual void download_replica(int r, const HostWeights& host, bool whole) = 0;
  // The backend of local rank `r` that holds its replica's weights, its writes to them finished.
  virtual const runtime::Backend& replica_backend(int r) = 0;

  // --- Pipeline stages.
  // Each local rank's RankBackend and PipelineStage over its plans into `engines` (placed: their stages) with their
  // owned units (the first stage steps the tied ones), its shard of them (place_shard) and its
  // optimizer, and their communicators: the world, the stage's gradient group and the tied pair.
  virtual void make_stages(const RanksSetup& setup, const StagePlan& plan,
                           std::span<const std::unique_ptr<StageRankEngine>> engines) = 0;
  // The names of the weights local rank `r`'s stage holds, in the order upload_stage() and
  // download_stage() take their views; the trainable ones among them.
  virtual std::vector<std::string> stage_weights(int r) const = 0;
  virtual std::vector<std::string> stage_trainable(int r) const = 0;
  // From the host copies `weights` (no rank holds them all).
  virtual std::unique_ptr<Evaluator> make_stage_evaluator(const EvaluatorSetup& setup,
                                                          std::span<const WeightView> weights) = 0;
  // Into every stage whose plans read the pieces; kept for the evaluator.
  virtual void store_stage_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) = 0;
  // The stage's weights from `weights` (stage_weights() order), the optimizer state from its host views.
  virtual void upload_stage(int r, std::span<const WeightView> weights) = 0;
  // The stage's weights into `weights` (stage_weights() order; those without values are not this
  // rank's to write), the optimizer state into its host views.
  virtual void download_stage(int r, std::span<const WeightView> weights) = 0;
};

// What a backend's host side is made from (each rank's objects are made on its own thread).
using MakeRankHost = std::unique_ptr<RankHost>(const RanksSetup& setup);
// The CPU's (gloo); the GPUs' (local rank l on GPU first_device + l, NCCL), only in CUDA builds.
MakeRankHost make_cpu_rank_host, make_cuda_rank_host;

// The strategies' ranks over a backend's `host`: replicas (data and sequence parallelism,
// data_parallel_ranks.cpp) and pipeline stages (pipeline_ranks.cpp).
std::unique_ptr<BackendRanks> make_data_parallel_ranks(const RanksSetup& setup, std::unique_ptr<RankHost> host);
std::unique_ptr<BackendRanks> make_pipeline_ranks(const RanksSetup& setup, std::unique_ptr<RankHost> host);

}  // namespace surogate::train
