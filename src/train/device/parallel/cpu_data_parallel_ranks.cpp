// The CPU backend's ranks of the parallel device for data parallelism (parallel_device.cpp says the
// step's algorithm): the device the trainer drives when `gpus: N` (N > 1) trains on the CPU backend, or
// when the ranks are spread over several processes. Each rank (a thread of this process) has its
// own CpuBackend (plan, parameters, gradients, activation arena), joined to every rank of the world
// by gloo (distributed/gloo_communicator.h). A rank is a CpuRank and a CpuReplicaRunner (cpu_rank.h)
// driven by the replica strategy (replica_rank_engine.h); this file is their host side: the units
// and shards, the reduction's pieces each ZeRO stage sets up, the host copies and their transfers.
//
// Replica reduction on a CPU rank:
//   ZeRO-1: after its micro-batches, a rank's gradients (its backend's, summed over its micro-
//     batches) go into one flat fp32 buffer (the trainable tensors in plan order), bucket by bucket
//     during the last micro-batch's backward, each bucket all-reduced with a sum as soon as the
//     backward has written its last gradient (cpu_gradient_reducer.h). The sum over
//     ranks is the window's mean, what one rank computes over the same micro-batches up to the
//     order of the fp32 additions. After the step the flat buffer carries weights: the rank's
//     shard in, one all-gather, every other shard out (shard_publish.h).
//   ZeRO-2 (layout.shard_gradients): every micro-batch's buckets are reduce-scattered as the
//     backward completes them and each rank adds its piece into accumulators of its shard only
//     (sharded_gradients.h: no full-size flat buffer); update() all-gathers the weights bucket by
//     bucket through the same staging.
//   ZeRO-3 (layout.shard_weights): each rank's backend runs the plan with the weights in gather
//     buffers (compiler/weight_gathering.h, weight_shards.h) and keeps only its pieces of them
//     (cpu_weight_gatherer.h: the masters of its trainable weights, which its optimizer updates in
//     place, and its share of the frozen base); its gatherer fills the buffers before the steps that
//     read them. Gradients as in ZeRO-2; no weights move after the step. The host side then holds
//     copies of every weight: upload() broadcasts rank 0's tensor by tensor and each owner keeps its
//     own; download_weight_shards() broadcasts each trainable weight from its owner into them. The
//     frozen ones never change, so their host copies stay as loaded.
//
// Sequence parallelism (layout.sequence_size > 1): the plan is a sequence slice's
// (distributed/sequence_parallel_graph.h) and each rank's backend binds the exchange ops to its
// sequence group's gloo communicator (sequence_groups.h); the sums and ZeRO shards run over every
// rank of the world. Under ZeRO-3 every rank gathers on the schedule of the same slice plan, on the
// world's communicator, never the group's, so each communicator's collectives come in plan order on
// every rank (docs/architecture.md, "ZeRO-3").
//
// fp8_hybrid: each rank's plan holds the scaling state (models/fp8_recipe.h). Before it is rolled
// after a step, every rank's state is all-reduced with the max of the amaxes (only this step's
// row[1] differs between ranks), so every rank rolls the same delayed amaxes and quantizes exactly
// as one rank running the whole window would (quant/fp8_scaling.h). The FP8 copies of trained
// weights are rewritten on every rank from its (identical) weights after the all-gather.
//
// The host side (ZeRO-1/2) is the first local rank's: weights() and trainable() are its views;
// upload() broadcasts rank 0's weights (and fp8_hybrid's scaling state) to every rank. The same
// gloo collectives in the same order run whether the ranks are threads of one process or spread
// over several, so a run's numbers do not depend on that split.
#include "train/device/parallel/cpu_rank.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/replica_rank_engine.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "distributed/shard_placement.h"
#include "models/decoder_graph.h"
#include "runtime/cpu_backend.h"
#include "train/device/backend_selection.h"
#include "train/device/cpu_gradient_reducer.h"
#include "train/device/cpu_parameters.h"
#include "train/device/cpu_quantized_base.h"
#include "train/device/cpu_weight_gatherer.h"
#include "train/device/fp8_state.h"
#include "train/device/scratch_transfer.h"
#include "train/device/sequence_groups.h"
#include "train/device/shard_publish.h"
#include "train/device/sharded_gradients.h"
#include "train/device/weight_shards.h"
#include "train/fp8_weight_copies.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

// What every CPU replica reads of the ranks it belongs to (written before they run).
struct CpuReplicaShared {
  std::optional<graph::TensorId> router_aux_loss;  // MoE plans with the router loss
  std::vector<Fp8WeightCopy> fp8_copies;           // the trained weights' FP8 copies (full fine-tuning)
  double max_grad_norm = 0.0;
};

// One replica rank: its runner (the CpuBackend the plan runs on) and its CpuRank (owned by its engine).
struct CpuReplica {
  CpuReplicaRunner* runner = nullptr;
  CpuRank* rank = nullptr;
};

// ZeRO-3's host copies of every weight (the trainer's weights() and trainable()).
struct HostCopies {
  std::vector<std::vector<float>> values;
  std::vector<WeightView> weights, trainable;
};

class CpuDataParallelRanks final : public BackendRanks {
public:
  explicit CpuDataParallelRanks(const RanksSetup& made)
      : layout_(made.layout), threads_(made.threads), plan_(*made.device.plan) {
    const TrainingDeviceSetup& setup = made.device;
    const Config& config = *setup.config;  // read here only
    check_cpu_backend_options(config);
    replica_.plan = &plan_;
    replica_.shard_gradients = layout_.shard_gradients;
    cpu_.router_aux_loss = plan_.graph.find_tensor(models::kRouterAuxLoss);
    cpu_.max_grad_norm = config.optimizer.max_grad_norm;
    optimizer_name_ = to_string(config.optimizer.algorithm);
    std::unique_ptr<distributed::ProcessWorld> alone;
    distributed::ProcessWorld& world = setup.world != nullptr ? *setup.world : *(alone = distributed::ProcessWorld::single());
    std::vector<std::unique_ptr<distributed::Communicator>> communicators =
        distributed::connect_gloo(threads_, world, layout_.first_rank, layout_.world_size);
    sequence_groups_ = connect_cpu_sequence_groups(threads_, world, layout_);
    // The units: every trainable tensor, in spec order; the optimizer's shards over them.
    std::vector<size_t> sizes;
    std::vector<graph::TensorId> gradients;
    for (const models::ParameterSpec& spec : setup.specs) {
      weight_ids_.push_back(plan_.tensor(spec.name));
      auto gradient = plan_.parameter_gradients.find(weight_ids_.back());
      if (gradient == plan_.parameter_gradients.end()) continue;
      trainable_ids_.push_back(weight_ids_.back());
      gradients.push_back(gradient->second);
      sizes.push_back(static_cast<size_t>(graph::shape_numel(spec.shape)));
    }
    const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, layout_.world_size);
    replica_.shard_sizes = distributed::shard_sizes(shards);
    if (layout_.shard_weights) shard_weights(setup, shards, quantized_base_keeping(config.offload));
    replica_.rank_plan = gathered_plan_ ? &*gathered_plan_ : &plan_;
    buckets_ = plan_gradient_buckets(*replica_.rank_plan, gradients, sizes, shards,
                                     std::max<size_t>(1, setup.gradient_bucket_bytes / sizeof(float)), layout_.shard_gradients);
    replica_.units = trainable_ids_.size();
    for (int r = 0; r < layout_.local_ranks; ++r) {
      auto engine = std::make_unique<ReplicaRankEngine>(replica_, layout_.first_rank + r);
      auto runner = std::make_unique<CpuReplicaRunner>(plan_, cpu_.router_aux_loss, cpu_.fp8_copies);
      runner->backend.load(*replica_.rank_plan, sequence_groups_.registry(r, *setup.registry));
      auto rank = std::make_unique<CpuRank>(runner->backend, cpu_.max_grad_norm);
      rank->parameters = bind_cpu_parameters(runner->backend, *replica_.rank_plan, setup.specs);
      engine->world = std::move(communicators[static_cast<size_t>(r)]);
      replicas_.push_back({runner.get(), rank.get()});
      engine->runner = std::move(runner);
      engine->rank = std::move(rank);
      ranks_.push_back(std::move(engine));
    }
    if ((replica_.fp8 = fp8_state(plan_))) {
      for (const CpuReplica& replica : replicas_) {
        std::ranges::fill(replica.runner->backend.view<float>(replica_.fp8->tensor), 0.0f);
      }
    }
    cpu_.fp8_copies = fp8_weight_copies(plan_);
    for (int r = 0; r < layout_.local_ranks; ++r) {
      set_up_rank(*ranks_[static_cast<size_t>(r)], replicas_[static_cast<size_t>(r)], r,
                  shards[static_cast<size_t>(layout_.first_rank + r)], gradients, config.optimizer);
    }
  }

  RankEngine& engine(int local_rank) override { return *ranks_[static_cast<size_t>(local_rank)]; }

  std::string description() const override {
    return fmt::format("CPU backend, fp32 weights, gradients and {} state; {} ({}, gloo)", optimizer_name_,
                       layout_.describe(), layout_.spans_processes() ? "rank threads in each process" : "threads of this process");
  }
  std::span<const WeightView> weights() const override {
    return gathered_plan_ ? std::span<const WeightView>(host_.weights) : replicas_[0].rank->parameters.weights;
  }
  std::span<const WeightView> trainable() const override {
    return gathered_plan_ ? std::span<const WeightView>(host_.trainable) : replicas_[0].rank->parameters.trainable;
  }
  bool host_views_are_live() const override { return true; }
  // The same on every rank after each step's all-reduce: rank 0's.
  std::optional<StateTensor> fp8_state_tensor() override {
    if (!replica_.fp8) return std::nullopt;
    return replica_.fp8->state_tensor(replicas_[0].runner->backend.view<float>(replica_.fp8->tensor).data());
  }
  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return make_cpu_evaluator(setup, weights(), quantized_);
  }
  void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override {
    quantized_.push_back({weight, pieces});  // kept: a copy (the caller reuses its buffers)
    if (quantized_base_ && quantized_base_->gathered()) {
      quantized_base_->keep(plan_, weight, quantized_.back().pieces);  // ZeRO-3: shared out, or the host image
      return;
    }
    for (const CpuReplica& replica : replicas_) write_quantized(replica.runner->backend, plan_, weight, quantized_.back().pieces);
  }

  // Every rank starts from rank 0's parameters (frozen ones included) and scaling state; the
  // optimizer state needs nothing (each rank's own shard is what optimizer_state() views).
  void upload() override {
    threads_.run([&](int r) {
      CpuRank& rank = *replicas_[static_cast<size_t>(r)].rank;
      runtime::CpuBackend& backend = replicas_[static_cast<size_t>(r)].runner->backend;
      distributed::Communicator& world = *ranks_[static_cast<size_t>(r)]->world;
      if (rank.gatherer) {
        upload_shards(rank, world);
      } else {
        for (const WeightView& weight : rank.parameters.weights) {
          world.broadcast(weight.values.data(), weight.values.size(), DType::F32, 0);
        }
      }
      if (replica_.fp8) {
        std::span<float> state = backend.view<float>(replica_.fp8->tensor);
        world.broadcast(state.data(), state.size(), DType::F32, 0);
      }
      refresh_fp8_weight_copies(backend, cpu_.fp8_copies);
    });
  }
  // ZeRO-3: each trainable weight is broadcast from its owner and the first local rank writes the
  // host copy.
  void download_weight_shards() override {
    threads_.run([&](int r) {
      CpuRank& rank = *replicas_[static_cast<size_t>(r)].rank;
      std::vector<size_t> counts;
      std::vector<int> owners;
      for (size_t unit = 0; unit < trainable_ids_.size(); ++unit) {
        counts.push_back(host_.trainable[unit].values.size());
        owners.push_back(rank.gatherer->owner(trainable_ids_[unit]));
      }
      download_through_scratch(
          {*ranks_[static_cast<size_t>(r)]->world, rank.scratch.data(), scratch_elements_, r == 0}, counts, owners,
          [&](size_t unit, size_t first, size_t count) {
            std::copy_n(rank.gatherer->owned(trainable_ids_[unit]).begin() + static_cast<std::ptrdiff_t>(first), count,
                        rank.scratch.begin());
          },
          [&](size_t unit, size_t first, size_t count) {
            std::copy_n(rank.scratch.begin(), count, host_.trainable[unit].values.begin() + static_cast<std::ptrdiff_t>(first));
          });
    });
  }
  // ZeRO-1/2: every rank holds the same weights after a step; rank 0's are the host's.
  void download() override {}
  bool replicas_hold_weights() const override { return !gathered_plan_ && layout_.sequence_size == 1; }
  const runtime::Backend& replica_weights(int local_rank) override {
    return replicas_[static_cast<size_t>(local_rank)].runner->backend;
  }

private:
  // A rank's shard, its replica reduction, ZeRO-3's gatherers and its optimizer.
  void set_up_rank(ReplicaRankEngine& engine, const CpuReplica& replica, int r, const distributed::Shard& shard,
                   std::span<const graph::TensorId> gradients, const config::Optimizer& optimizer) {
    engine.shard = shard;
    CpuRank& rank = *replica.rank;
    runtime::CpuBackend& backend = replica.runner->backend;
    distributed::Communicator& world = *engine.world;
    std::vector<size_t> units(trainable_ids_.size());
    std::iota(units.begin(), units.end(), size_t{0});
    rank.set_units(std::move(units), !layout_.shard_gradients);
    if (gathered_plan_) {
      rank.gatherer = std::make_unique<CpuWeightGatherer>(gathering_, layout_.first_rank + r, backend, world);
      rank.scratch.resize(scratch_elements_);
      engine.first_batches.add(rank.gatherer.get());
      engine.last_batch.add(rank.gatherer.get());
      if (quantized_base_->gathered()) {
        rank.quantized_gatherer = quantized_base_->gatherer(r, backend, world);
        engine.first_batches.add(rank.quantized_gatherer.get());
        engine.last_batch.add(rank.quantized_gatherer.get());
      }
    }
    if (layout_.shard_gradients) {
      std::vector<std::span<float>> views;
      for (graph::TensorId id : gradients) views.push_back(backend.view<float>(id));
      rank.sharded = std::make_unique<CpuShardedGradients>(buckets_, std::move(views), engine.shard, world);
      engine.first_batches.add(rank.sharded.get());
      engine.last_batch.add(rank.sharded.get());
    } else {
      rank.reducer = std::make_unique<CpuGradientReducer>(buckets_, rank.parameters.gradients, rank.offsets(),
                                                          rank.flat.data(), world);
      engine.last_batch.add(rank.reducer.get());
    }
    // ZeRO-3: the master is the rank's own copy, which the gathers read.
    std::function<float*(size_t)> master;
    if (rank.gatherer) master = [&](size_t unit) { return rank.gatherer->owned(trainable_ids_[unit]).data(); };
    rank.make_optimizer(shard, optimizer, master);
  }

  // ZeRO-3: the plan with the weights in gather buffers, their schedule and the host copies.
  void shard_weights(const TrainingDeviceSetup& setup, const std::vector<distributed::Shard>& shards,
                     const QuantizedBaseKeeping& keeping) {
    gathered_plan_ = plan_;
    gathering_ = zero3_gathering(*gathered_plan_, trainable_ids_, shards, layout_.world_size);
    const std::vector<graph::TensorId> shardable = shardable_weights(plan_);
    SUROGATE_CHECK(std::set<graph::TensorId>(shardable.begin(), shardable.end()) ==
                       std::set<graph::TensorId>(weight_ids_.begin(), weight_ids_.end()),
                   "ZeRO-3 shards exactly the weights the trainer loads");
    compiler::apply_weight_gathering(*gathered_plan_, gathering_);
    quantized_base_.emplace(*gathered_plan_, keeping, layout_.world_size, layout_.first_rank, layout_.local_ranks);
    size_t largest = 0;
    for (const models::ParameterSpec& spec : setup.specs) {
      const auto count = static_cast<size_t>(graph::shape_numel(spec.shape));
      largest = std::max(largest, count);
      host_.values.emplace_back(count, 0.0f);
      host_.weights.push_back({spec.name, spec.shape, std::span<float>(host_.values.back())});
      if (plan_.parameter_gradients.contains(plan_.tensor(spec.name))) host_.trainable.push_back(host_.weights.back());
    }
    scratch_elements_ = largest;
  }

  // ZeRO-3 upload: each weight broadcast from global rank 0's host copy; its owner keeps it.
  // A chunk is the largest weight: one broadcast per weight.
  void upload_shards(CpuRank& rank, distributed::Communicator& world) {
    std::vector<size_t> counts;
    for (const WeightView& weight : host_.weights) counts.push_back(weight.values.size());
    upload_through_scratch(
        {world, rank.scratch.data(), scratch_elements_}, counts,
        [&](size_t i, size_t first, size_t count) {
          std::copy_n(host_.weights[i].values.begin() + static_cast<std::ptrdiff_t>(first), count, rank.scratch.begin());
        },
        [&](size_t i, size_t first, size_t count) {
          const std::span<float> owned = rank.gatherer->owned(weight_ids_[i]);
          if (!owned.empty()) std::copy_n(rank.scratch.begin(), count, owned.begin() + static_cast<std::ptrdiff_t>(first));
        });
  }

  distributed::ParallelLayout layout_;
  distributed::RankThreads& threads_;
  const compiler::ExecutionPlan& plan_;
  ReplicaShared replica_;
  CpuReplicaShared cpu_;
  SequenceGroups sequence_groups_;  // sequence parallelism: each rank's group and exchange ops
  std::vector<std::unique_ptr<ReplicaRankEngine>> ranks_;
  std::vector<CpuReplica> replicas_;  // each rank's runner and rank (owned by its engine)
  std::vector<StoredQuantizedWeight> quantized_;  // QLoRA's base, kept for the evaluator's backend
  std::vector<graph::TensorId> weight_ids_;     // every spec's tensor, in spec order
  std::vector<graph::TensorId> trainable_ids_;  // the trainable ones (the flat buffer's units)
  GradientBuckets buckets_;
  std::optional<compiler::ExecutionPlan> gathered_plan_;  // ZeRO-3: the ranks' plan (weights in gather buffers)
  compiler::WeightGathering gathering_;
  std::optional<CpuQuantizedBase> quantized_base_;  // ZeRO-3: where the quantized base stays (persistent_quants)
  HostCopies host_;                  // ZeRO-3: what weights() and trainable() show
  size_t scratch_elements_ = 0;      // ZeRO-3: the largest weight
  std::string optimizer_name_;
};

}  // namespace

std::unique_ptr<BackendRanks> make_cpu_data_parallel_ranks(const RanksSetup& setup) { return std::make_unique<CpuDataParallelRanks>(setup); }

}  // namespace surogate::train
