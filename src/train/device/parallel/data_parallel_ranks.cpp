// The data-parallel strategy's ranks of the parallel device (parallel_device.cpp says the step's
// algorithm), written once for every backend: each rank (a thread of this process) runs a
// replica's whole model, a ReplicaRankEngine (replica_rank_engine.h) over its backend's rank and
// plans (its ReplicaRunner), which the backend's host side makes (rank_host.h: CpuRankHost on gloo,
// CudaRankHost on NCCL). This class holds what does not depend on the backend: which rank holds
// what, the host copies and the order of the collectives that move weights.
//
// Replica reduction (the backends' reducers, each over its buffers):
//   ZeRO-1: after its micro-batches, a rank's gradients (summed over its micro-batches) go into
//     one flat buffer of the trainable tensors in plan order (fp32; on GPUs the accumulators'
//     dtype), bucket by bucket during the last micro-batch's backward, each bucket reduce-scattered
//     with a sum as soon as the backward has written its last gradient (gradient_buckets.h,
//     bucket_reduction.h): a rank receives the sums of its shard, the tensors it steps, alone. The
//     sum over ranks is the window's mean, what one rank computes over the same micro-batches up
//     to the order of the additions. After the step a flat buffer
//     carries the weights: the rank's shard in, one all-gather, every other shard out
//     (shard_publish.h) — CPU ranks' fp32 weights; a GPU's bf16 weights rounded from its masters
//     into its accumulators' memory, the other units' fp32 masters gathered before a download.
//   ZeRO-2 (layout.shard_gradients): every micro-batch's buckets are reduce-scattered as the
//     backward completes them and each rank adds its piece into accumulators of its shard only
//     (sharded_gradients.h); the ZeRO-1 publish, or (CPU, no flat buffer) its bucket staging.
//   ZeRO-3 (layout.shard_weights): each rank runs the plan with the weights in gather buffers
//     (compiler/weight_gathering.h, weight_shards.h) and keeps only its pieces of them (the masters
//     of its trainable weights, which its optimizer updates in place, and its share of the frozen
//     base); its gatherers fill the buffers before the steps that read them (a quantized base
//     likewise). Gradients as in ZeRO-2; no weights move after the step.
//
// Host copies: where the backend's ranks are host memory (the CPU) and no weight is sharded, the
// trainer's weights() and trainable() are the first local rank's own (live); otherwise host copies
// of every weight, which upload() gives to the world's first rank and broadcasts (ZeRO-3: a
// chunk at a time to each weight's owner, scratch_transfer.h) and download() reads back (ZeRO-3:
// each trainable weight from its owner; frozen ones never change). fp8_hybrid: every rank's
// scaling state is max-reduced before each roll (replica_rank_engine.h); the first rank's is the
// checkpoints'. Sequence parallelism (layout.sequence_size > 1): each rank runs a sequence slice's
// plan whose exchange ops are bound to its sequence group (the backend's); the sums and ZeRO
// shards run over every rank of the world, each communicator's collectives in plan order on every
// rank (docs/architecture.md, "ZeRO-3"). The same collectives run in the same order whether the
// ranks are threads of one process or spread over several, so a run's numbers do not depend on it.
#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "distributed/shard_placement.h"
#include "train/device/fp8_state.h"
#include "train/device/gradient_buckets.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/rank_host.h"
#include "train/device/parallel/replica_rank_engine.h"
#include "train/device/weight_shards.h"

namespace surogate::train {
namespace {

class DataParallelRanks final : public BackendRanks {
public:
  DataParallelRanks(const RanksSetup& made, std::unique_ptr<RankHost> host)
      : layout_(made.layout), threads_(made.threads), plan_(*made.device.plan), host_(std::move(host)) {
    const TrainingDeviceSetup& setup = made.device;
    units_ = host_->replica_units();
    const std::vector<distributed::Shard> shards = distributed::place_shards(units_.sizes, layout_.world_size);
    replica_.plan = &plan_;
    replica_.units = units_.trainable.size();
    replica_.shard_sizes = distributed::shard_sizes(shards);
    if (layout_.shard_weights) shard_weights(shards);
    replica_.rank_plan = gathered_plan_ ? &*gathered_plan_ : &plan_;
    replica_.fp8 = fp8_state(plan_);
    if (!views_are_ranks()) host_copies_ = host_->make_host_copies(setup.specs, trainable_names(setup.specs));
    buckets_ = plan_gradient_buckets(*replica_.rank_plan, units_.gradients, units_.sizes, shards,
                                     std::max<size_t>(1, setup.gradient_bucket_bytes / units_.gradient_bytes),
                                     layout_.shard_gradients);
    if (!layout_.shard_gradients) replica_.publish_buckets = buckets_.buckets;  // ZeRO-1
    for (int r = 0; r < layout_.local_ranks; ++r) {
      auto engine = std::make_unique<ReplicaRankEngine>(replica_);
      engine->shard = shards[static_cast<size_t>(layout_.first_rank + r)];
      engines_.push_back(std::move(engine));
    }
    try {
      host_->make_replicas(made, {replica_, units_, buckets_, gathered_plan_ ? &gathering_ : nullptr}, engines_);
    } catch (...) {
      host_->release();
      throw;
    }
  }

  ~DataParallelRanks() override { host_->release(); }

  RankEngine& engine(int local_rank) override { return *engines_[static_cast<size_t>(local_rank)]; }

  std::string description() const override { return host_->description(layout_.describe()); }
  std::span<const WeightView> weights() const override {
    return views_are_ranks() ? host_->replica_weights(0) : std::span<const WeightView>(host_copies_.weights);
  }
  std::span<const WeightView> trainable() const override {
    return views_are_ranks() ? host_->replica_trainable(0) : std::span<const WeightView>(host_copies_.trainable);
  }
  bool host_views_are_live() const override { return host_->host_views_are_live(); }
  std::optional<StateTensor> fp8_state_tensor() override {
    if (!replica_.fp8) return std::nullopt;
    return host_->replica_fp8_state(*replica_.fp8);
  }
  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return host_->make_replica_evaluator(setup, weights());
  }
  void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override {
    host_->store_replica_quantized(weight, pieces);
  }
  std::vector<std::pair<std::string, double>> time_breakdown() override { return host_->time_breakdown(); }
  std::vector<std::pair<std::string, double>> step_phases() override { return host_->step_phases(); }

  // Every rank starts from the world's first rank's weights (frozen ones included; ZeRO-3: each
  // owner its pieces) and scaling state; each rank's optimizer state comes from its own host views.
  // The first rank loads the host copies before any rank enqueues a collective (a GPU allocates
  // and frees pinned staging memory on the way, which may wait for every GPU).
  void upload() override {
    threads_.run([&](int r) {
      engines_[static_cast<size_t>(r)]->settle_publish();
      if (layout_.first_rank + r == 0) host_->load_first_rank(r, host_copies_, !gathered_plan_ && !views_are_ranks());
    });
    threads_.run([&](int r) {
      if (gathered_plan_) {
        host_->upload_owned(r, host_copies_);
      } else {
        host_->broadcast_weights(r);
      }
      host_->finish_upload(r);
    });
  }
  void download_weight_shards() override {
    threads_.run([&](int r) { host_->download_owned(r, host_copies_); });
  }
  // ZeRO-1/2: every rank holds the same weights after a step (a GPU's fp32 masters once the world
  // gathered those its bf16 publish left behind); the first local rank's are the host's.
  void download() override {
    threads_.run([&](int r) {
      engines_[static_cast<size_t>(r)]->gather_stale_masters();
      host_->download_replica(r, host_copies_, !gathered_plan_ && !views_are_ranks());
    });
  }
  // The evaluator reads the first rank's weights once its stream is done (cuda_evaluator.h).
  void before_evaluation() override {
    threads_.run([&](int r) { engines_[static_cast<size_t>(r)]->settle_publish(); });
  }
  bool replicas_hold_weights() const override { return !gathered_plan_ && layout_.sequence_size == 1; }
  const runtime::Backend& replica_weights(int local_rank) override { return host_->replica_backend(local_rank); }

private:
  bool views_are_ranks() const { return host_->ranks_share_host_memory() && !gathered_plan_; }

  std::set<std::string> trainable_names(std::span<const models::ParameterSpec> specs) const {
    const std::set<graph::TensorId> trainable(units_.trainable.begin(), units_.trainable.end());
    std::set<std::string> names;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (trainable.contains(units_.weights[i])) names.insert(specs[i].name);
    }
    return names;
  }

  // ZeRO-3: the ranks' plan with the weights in gather buffers, their schedule, where the quantized
  // base stays and the host copies.
  void shard_weights(const std::vector<distributed::Shard>& shards) {
    gathered_plan_ = plan_;
    gathering_ = zero3_gathering(*gathered_plan_, units_.trainable, shards, layout_.world_size);
    const std::vector<graph::TensorId> shardable = shardable_weights(plan_);
    SUROGATE_CHECK(std::set<graph::TensorId>(shardable.begin(), shardable.end()) ==
                       std::set<graph::TensorId>(units_.weights.begin(), units_.weights.end()),
                   "ZeRO-3 shards exactly the weights the trainer loads");
    compiler::apply_weight_gathering(*gathered_plan_, gathering_);
    host_->shard_quantized_base(*gathered_plan_);
  }

  distributed::ParallelLayout layout_;
  distributed::RankThreads& threads_;
  const compiler::ExecutionPlan& plan_;
  ReplicaUnits units_;
  ReplicaShared replica_;
  GradientBuckets buckets_;
  std::optional<compiler::ExecutionPlan> gathered_plan_;  // ZeRO-3: the ranks' plan (weights in gather buffers)
  compiler::WeightGathering gathering_;
  std::unique_ptr<RankHost> host_;  // after what it reads, before the engines, whose pieces read it
  HostWeights host_copies_;  // where the ranks' views are not the trainer's
  std::vector<std::unique_ptr<ReplicaRankEngine>> engines_;
};

}  // namespace

std::unique_ptr<BackendRanks> make_data_parallel_ranks(const RanksSetup& setup, std::unique_ptr<RankHost> host) {
  return std::make_unique<DataParallelRanks>(setup, std::move(host));
}

}  // namespace surogate::train
