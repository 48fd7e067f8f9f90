// The GPUs' host side of the parallel device's ranks, for both strategies (rank_host.h): local rank
// l runs on GPU first_device + l under a CudaRank (cuda_rank.h) over its plans (cuda_rank_plans.h):
// its CudaRankState (bf16 weights, fp32 masters, flat gradient accumulators, optimizer), joined by NCCL
// with every collective on the rank's streams, so compute and communication stay in order without
// host waits; the host waits through the communicator, which fails with a message instead of
// hanging when another rank stopped. A rank makes no call that may wait for the device
// (allocation, pinned memory) between entering a task and enqueuing its collectives (NCCL's rule
// for several GPUs driven from one process). Every rank's state is made first (no collective yet,
// so a rank that fails here, e.g. out of memory, stops the run with its message), then the NCCL
// communicators; each rank's CUDA objects are released on its own thread (its device current).
// The host copies are fp32 (the trainable ones pinned), read by the evaluator on GPU 0 where no GPU
// holds every weight (make_cuda_gathering_evaluator).
//   Replicas (cuda_rank_host.cpp): the replica reduction on the rank's side stream and its NCCL
//     communicator (ZeRO-1: cuda_gradient_reducer.h; ZeRO-2/3: cuda_sharded_gradients.h), ZeRO-3's
//     pieces of the weights and their gatherers (cuda_weight_gatherer.h; a quantized base:
//     cuda_quantized_base.h) and their transfers to and from the host copies
//     (cuda_weight_transfer.h). With an observer the backend runs eagerly: ZeRO-2 and ZeRO-3 give
//     up CUDA graphs, and ZeRO-1 keeps them for all but each step's last micro-batch. Sequence
//     parallelism: a slice's plan whose exchange ops are the group's NCCL all-to-all on the compute
//     stream (cuda_sequence_groups.h).
//   Stages (cuda_rank_host_stages.cpp): a stage's plans (cuda_rank_plans.h) under the pipeline
//     stage (pipeline_stage.h), with sequence parallelism over two sequence groups, one per stream.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/sections/offload.h"
#include "config/sections/optimizer.h"
#include "train/device/cuda_quantized_base.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/cuda_sequence_groups.h"
#include "train/device/cuda_weight_transfer.h"
#include "train/device/parallel/cuda_rank.h"
#include "train/device/parallel/cuda_rank_plans.h"
#include "train/device/parallel/rank_host.h"

namespace surogate::train {

class CudaRankHost final : public RankHost {
public:
  explicit CudaRankHost(const RanksSetup& setup);

  std::string description(const std::string& parallelism) const override;
  HostWeights make_host_copies(std::span<const models::ParameterSpec> specs,
                               const std::set<std::string>& trainable) const override;
  bool ranks_share_host_memory() const override { return false; }
  bool host_views_are_live() const override { return offload_optimizer_; }
  void release() noexcept override;
  std::vector<std::pair<std::string, double>> time_breakdown() override;
  std::vector<std::pair<std::string, double>> step_phases() override;

  ReplicaUnits replica_units() override;
  void shard_quantized_base(compiler::ExecutionPlan& gathered) override;
  void make_replicas(const RanksSetup& setup, const ReplicaPlan& plan,
                     std::span<const std::unique_ptr<ReplicaRankEngine>> engines) override;
  std::span<const WeightView> replica_weights(int) const override { return {}; }
  std::span<const WeightView> replica_trainable(int) const override { return {}; }
  StateTensor replica_fp8_state(const Fp8State& fp8) override { return fp8.state_tensor(fp8_host_.data()); }
  std::unique_ptr<Evaluator> make_replica_evaluator(const EvaluatorSetup& setup,
                                              std::span<const WeightView> weights) override;
  void store_replica_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override;
  void load_first_rank(int r, const HostWeights& host, bool whole) override;
  void broadcast_weights(int r) override;
  void upload_owned(int r, const HostWeights& host) override;
  void finish_upload(int r) override;
  void download_owned(int r, const HostWeights& host) override;
  void download_replica(int r, const HostWeights& host, bool whole) override;
  const runtime::Backend& replica_backend(int r) override;

  void make_stages(const RanksSetup& setup, const StagePlan& plan,
                   std::span<const std::unique_ptr<StageRankEngine>> engines) override;
  std::vector<std::string> stage_weights(int r) const override;
  std::vector<std::string> stage_trainable(int r) const override;
  std::unique_ptr<Evaluator> make_stage_evaluator(const EvaluatorSetup& setup,
                                              std::span<const WeightView> weights) override;
  void store_stage_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override;
  void upload_stage(int r, std::span<const WeightView> weights) override;
  void download_stage(int r, std::span<const WeightView> weights) override;

private:
  // What the host side keeps of one stage rank: its parameters (the last stage: tied ones first),
  // the layout of its CudaRankState, its pipeline stage and the stage's device (owned by its
  // engine) and download scratch.
  struct CudaStage {
    std::vector<models::ParameterSpec> specs;
    CudaTrainableLayout layout;  // outlives the stage's CudaRank
    size_t owned_first = 0;      // the first entry the stage steps (after the last stage's tied ones)
    CudaRankPlans* device = nullptr;
    std::vector<std::vector<float>> scratch;  // download_stage(): the weights not the rank's to write
  };

  // The rank's state on its GPU (ZeRO-3: its pieces of the weights, their scratch), before any collective.
  void make_replica_state(const TrainingDeviceSetup& setup, const compiler::ExecutionPlan& rank_plan,
                          ReplicaRankEngine& engine, int r);
  void release_replica(int r);
  void plan_stage(StageRankEngine& engine, const StagePlan& plan);
  // The rank's pipeline stage on its GPU, before any collective.
  void make_stage_state(const TrainingDeviceSetup& setup, int r);
  void release_stage(int r);
  // ZeRO-3's gatherers, and the replica reduction (the step observers of each micro-batch).
  void set_up_reduction(ReplicaRankEngine& engine, int r, const ReplicaPlan& plan);
  CudaShardTransfer transfer(int r);
  CudaRankState& state(int r) const { return ranks_[static_cast<size_t>(r)]->state(); }

  distributed::ParallelLayout layout_;
  distributed::RankThreads& threads_;
  const compiler::ExecutionPlan& plan_;
  std::vector<models::ParameterSpec> specs_;
  config::Offload offload_;
  std::string optimizer_name_;
  int64_t max_micro_batches_ = 1;  // a rank's in one step: gradient_accumulation_steps
  bool bf16_gradients_ = false, time_breakdown_ = false, offload_optimizer_ = false;
  std::vector<CudaRank*> ranks_;  // each rank's (owned by its engine)
  // Replicas.
  // Sequence parallelism: each rank's kernel table and group (a stage's training plan's).
  CudaSequenceGroups sequence_groups_;
  std::optional<CudaTrainableLayout> trainable_layout_;
  std::vector<CudaRankPlans*> replicas_;  // each rank's plans (owned by its engine)
  std::vector<ReplicaRankEngine*> engines_;
  const compiler::WeightGathering* gathering_ = nullptr;  // ZeRO-3
  std::optional<CudaQuantizedBase> quantized_base_;  // ZeRO-3: where the quantized base stays (persistent_quants)
  std::optional<Fp8State> fp8_;
  std::vector<float> fp8_host_;  // the first rank's copy of the fp8 state: zeros at the start, what checkpoints read
  // Stages.
  const PipelinePlan* pipeline_ = nullptr;
  std::vector<const distributed::StageGraph*> graphs_;
  std::vector<StageRankEngine*> stage_engines_;
  std::vector<std::unique_ptr<CudaStage>> stages_;
  CudaSequenceGroups forward_sequence_;  // sequence parallelism: a stage's forward plan's
  std::vector<StoredQuantizedWeight> quantized_;  // kept for the evaluator, which gathers them
  std::map<std::string, std::span<const std::byte>> quantized_pieces_;
};

}  // namespace surogate::train
