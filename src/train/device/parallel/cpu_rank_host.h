// The CPU backend's host side of the parallel device's ranks, for both strategies (rank_host.h):
// each rank (a thread of this process) has its own CpuBackends (plan, fp32 parameters, gradients,
// activation arena: cpu_rank_plans.h) under a CpuRank (cpu_rank.h), joined to the ranks of the world by
// gloo (distributed/gloo_communicator.h); sequence parallelism binds the exchange ops of each
// rank's plans to its sequence group's gloo communicator (sequence_groups.h). The ranks' weights
// are host memory: a replica's are the trainer's views where no weight is sharded.
//   Replicas (cpu_rank_host.cpp): ZeRO-1's gradient buckets reduce into the CpuRank's flat buffer
//     (cpu_gradient_reducer.h), ZeRO-2/3's into its shard's accumulators (sharded_gradients.h:
//     ZeRO-2 then publishes the weights bucket by bucket through their staging), ZeRO-3's rank keeps
//     its pieces of the weights and gathers them (cpu_weight_gatherer.h; a quantized base:
//     cpu_quantized_base.h); upload broadcasts the first rank's weights tensor by tensor.
//   Stages (cpu_rank_host_stages.cpp): a stage's plans on CpuBackends (cpu_rank_plans.h) under
//     the pipeline stage (pipeline_stage.h), their weights copied from and to the host copies on
//     the trainer's thread.
// The evaluator is an fp32 plan on its own CpuBackend that copies the weights in (with the stored
// quantized base).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/sections/optimizer.h"
#include "train/device/cpu_quantized_base.h"
#include "train/device/parallel/cpu_rank.h"
#include "train/device/parallel/cpu_rank_plans.h"
#include "train/device/parallel/rank_host.h"
#include "train/device/sequence_groups.h"
#include "train/fp8_weight_copies.h"
#include "train/quantized_weights.h"

namespace surogate::train {

class CpuRankHost final : public RankHost {
public:
  explicit CpuRankHost(const RanksSetup& setup);

  std::string description(const std::string& parallelism) const override;
  HostWeights make_host_copies(std::span<const models::ParameterSpec> specs,
                               const std::set<std::string>& trainable) const override;
  bool ranks_share_host_memory() const override { return true; }
  bool host_views_are_live() const override { return true; }

  ReplicaUnits replica_units() override;
  void shard_quantized_base(compiler::ExecutionPlan& gathered) override;
  void make_replicas(const RanksSetup& setup, const ReplicaPlan& plan,
                     std::span<const std::unique_ptr<ReplicaRankEngine>> engines) override;
  std::span<const WeightView> replica_weights(int r) const override { return parameters(r).weights; }
  std::span<const WeightView> replica_trainable(int r) const override { return parameters(r).trainable; }
  StateTensor replica_fp8_state(const Fp8State& fp8) override { return fp8.state_tensor(replicas_[0]->fp8_state(fp8)); }
  std::unique_ptr<Evaluator> make_replica_evaluator(const EvaluatorSetup& setup,
                                              std::span<const WeightView> weights) override;
  void store_replica_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override;
  // The first rank's weights are the host's.
  void load_first_rank(int, const HostWeights&, bool) override {}
  void broadcast_weights(int r) override;
  void upload_owned(int r, const HostWeights& host) override;
  void finish_upload(int r) override;
  void download_owned(int r, const HostWeights& host) override;
  // Every rank holds the same weights after a step, in host memory.
  void download_replica(int, const HostWeights&, bool) override {}
  const runtime::Backend& replica_backend(int r) override { return replicas_[static_cast<size_t>(r)]->training(); }

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
  const CpuParameters& parameters(int r) const { return ranks_[static_cast<size_t>(r)]->parameters; }
  void make_stage(StageRankEngine& engine, const graph::OpRegistry& registry, const StagePlan& plan);
  // A replica rank's replica reduction, ZeRO-3's gatherers and its optimizer.
  void set_up_replica(ReplicaRankEngine& engine, int r, const ReplicaPlan& plan);

  distributed::ParallelLayout layout_;
  distributed::RankThreads& threads_;
  const compiler::ExecutionPlan& plan_;
  std::vector<models::ParameterSpec> specs_;
  config::Optimizer optimizer_;
  config::Offload offload_;
  SequenceGroups sequence_groups_;  // sequence parallelism: each rank's group and exchange ops
  std::vector<CpuRank*> ranks_;  // each rank's (owned by its engine)
  std::vector<StoredQuantizedWeight> quantized_;  // QLoRA's base, kept for the evaluator's backend
  // Replicas: each rank's plans (owned by its engine) and world communicator.
  std::vector<CpuRankPlans*> replicas_;
  std::vector<distributed::Communicator*> worlds_;
  std::optional<graph::TensorId> router_aux_loss_;  // MoE plans with the router loss
  std::vector<Fp8WeightCopy> fp8_copies_;           // the trained weights' FP8 copies (full fine-tuning)
  std::optional<Fp8State> fp8_;
  std::vector<graph::TensorId> weight_ids_, trainable_ids_;  // ZeRO-3: the units' and every weight's ids
  const compiler::WeightGathering* gathering_ = nullptr;    // ZeRO-3
  std::optional<CpuQuantizedBase> quantized_base_;  // ZeRO-3: where the quantized base stays (persistent_quants)
  size_t scratch_elements_ = 0;                     // ZeRO-3: the largest weight
  // Stages.
  std::vector<CpuRankPlans*> stages_;                  // each rank's plans (owned by its engine's stage)
  std::vector<const distributed::StageGraph*> graphs_;  // every stage's (the transfers' program)
};

}  // namespace surogate::train
