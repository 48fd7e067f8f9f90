// Data parallelism with ZeRO-1/2/3 on CPU ranks: the TrainingDevice the trainer drives when `gpus: N`
// (N > 1) trains on the CPU backend, or when the ranks are spread over several processes (a
// launcher or Ray: distributed/process_world.h). This process's ranks are threads
// (distributed/rank_threads.h), each with its own CpuBackend (plan, parameters, gradients,
// activation arena), joined to every rank of the world by gloo (distributed/gloo_communicator.h).
//
// One optimizer step, as the trainer sees one device:
//   accumulate() × (gradient_accumulation_steps × local ranks): micro-batch i of the window belongs
//     to rank i mod N (distributed::owner_of_micro_batch); the trainer hands this process only its
//     own ranks' micro-batches (takes_micro_batch), each copied to its rank; nothing runs yet.
//   measure(): every rank runs its micro-batches (gradients add up in its backend), packs its
//     gradients into one flat fp32 buffer (the trainable tensors in plan order) and all-reduces
//     it with a sum. The trainer scaled every micro-batch's loss by 1 / (loss tokens of the whole
//     window, window_totals), so each rank's gradient is its share of the window's mean and the
//     sum over ranks is the window's mean — exactly what one rank computes over the same
//     micro-batches, up to the order of the fp32 additions. No division by N. The loss is the
//     ranks' losses summed in rank order (process_window.h).
//     The gradients travel in buckets (gradient_buckets.h): during each rank's last micro-batch,
//     a bucket of the flat buffer is packed and summed as soon as the backward has written its
//     last gradient.
//   ZeRO-2 (layout.shard_gradients): every micro-batch's buckets are reduce-scattered as the
//     backward completes them and each rank adds its piece into accumulators of its shard only
//     (sharded_gradients.h: no full-size flat buffer); the norm is the ranks' sums of squares
//     added, and update() all-gathers the weights bucket by bucket through the same staging.
//   update(): rank r clips and steps the optimizer for its shard only (distributed::place_shards:
//     a contiguous run of whole tensors of the flat buffer; its optimizer holds state for those
//     tensors alone: ZeRO-1), writes its updated weights into its piece of the flat buffer, and
//     an all-gather gives every rank every piece; each copies them into its backend (shard_publish.h).
//
// ZeRO-3 (layout.shard_weights): each rank's backend runs the plan with the weights in gather
// buffers (compiler/weight_gathering.h, weight_shards.h) and keeps only its pieces of them
// (cpu_weight_gatherer.h: the masters of its trainable weights, which its optimizer updates in
// place, and its share of the frozen base); its gatherer fills the buffers before the steps that
// read them. The gradients are reduce-scattered as in ZeRO-2 and update() moves no weights. The
// host side then holds copies of every weight: upload() broadcasts rank 0's tensor by tensor and
// each owner keeps its own; download() (and before_evaluation(), since the evaluator reads the
// host copies) broadcasts each trainable weight from its owner into them. The frozen ones never
// change, so their host copies stay as loaded.
//
// Sequence parallelism (layout.sequence_size > 1): the plan is a sequence slice's
// (distributed/sequence_parallel_graph.h), each rank's backend binds the exchange ops to its sequence
// group's gloo communicator (sequence_groups.h), and accumulate() gives every rank of a replica its
// slice of the micro-batch (micro_batch.h); the rest is unchanged, the sums and ZeRO shards running
// over every rank of the world. Under ZeRO-3 every rank gathers on the schedule of the same slice
// plan, on the world's communicator, never the group's, so each communicator's collectives come in
// plan order on every rank (docs/architecture.md, "ZeRO-3").
//
// fp8_hybrid: each rank's plan holds the scaling state (models/fp8_recipe.h). Before it is rolled
// after a step, every rank's state is all-reduced with the max of the amaxes (only this step's
// row[1] differs between ranks), so every rank rolls the same delayed amaxes and quantizes exactly
// as one rank running the whole window would (quant/fp8_scaling.h). The FP8 copies of trained
// weights are rewritten on every rank from its (identical) weights after the all-gather.
//
// The host side (ZeRO-1/2) is the first local rank's (global rank 0's in the leading process):
// weights() and trainable() are its views; upload() broadcasts rank 0's weights (and fp8_hybrid's
// scaling state) to every rank (after loading, initialising or resuming). optimizer_state() is the
// ranks' shards in rank order, which is the single-rank optimizer's list of tensors (same names, shapes and order, since shards are
// contiguous runs of whole tensors), so checkpoints have the single-rank format and a run resumes
// on any number of ranks; across processes the leader gathers the others' shards to save them
// and scatters them back after a resume (process_optimizer_state.h). The same gloo collectives in
// the same order run whether the ranks are threads of one process or spread over several, so a
// run's numbers do not depend on that split.
#include "train/device/cpu_data_parallel_device.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "distributed/shard_placement.h"
#include "ops/gradient_norm.h"
#include "runtime/cpu_backend.h"
#include "models/decoder_graph.h"
#include "train/device/backend_selection.h"
#include "quant/fp8_scaling.h"
#include "train/device/cpu_parameters.h"
#include "train/device/cpu_weight_gatherer.h"
#include "train/device/cpu_quantized_base.h"
#include "train/device/scratch_transfer.h"
#include "train/device/shard_publish.h"
#include "train/device/sharded_gradients.h"
#include "train/device/weight_shards.h"
#include "train/device/micro_batch.h"
#include "train/device/multi_rank_device.h"
#include "train/device/sequence_groups.h"
#include "train/device/fp8_state.h"
#include "train/fp8_weight_copies.h"
#include "train/device/process_optimizer_state.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

struct CpuReplica {
  runtime::CpuBackend backend;
  CpuParameters parameters;
  distributed::Shard shard;
  std::vector<ParameterSlot> shard_slots;  // the shard's slots, gradients read from `flat`
  std::unique_ptr<Optimizer> optimizer;    // state for the shard's tensors only (none if empty)
  std::unique_ptr<distributed::Communicator> communicator;
  std::vector<MicroBatch> pending;
  RankMeasure measure;                     // the step's losses and the rank's share of the squares
  std::vector<float> flat;                 // ZeRO-1: gradients in measure(), weights in update()
  std::unique_ptr<CpuShardedGradients> sharded;  // ZeRO-2/3: the shard's accumulators, reduced every micro-batch
  std::unique_ptr<CpuWeightGatherer> gatherer;  // ZeRO-3: the rank's pieces and their gathers
  std::unique_ptr<runtime::StepObserver> quantized_gatherer;  // ZeRO-3: the quantized base's gathers
  std::unique_ptr<CpuGradientReducer> reducer;  // the gradient buckets, during the last micro-batch
  runtime::StepObserverList first_batches, last_batch;  // what each micro-batch's execute calls
  std::vector<float> scratch;                   // ZeRO-3: one weight on its way to or from the host
};

// ZeRO-3's host copies of every weight (the trainer's weights() and trainable()).
struct HostCopies {
  std::vector<std::vector<float>> values;
  std::vector<WeightView> weights, trainable;
};

class CpuDataParallelDevice final : public MultiRankDevice {
public:
  CpuDataParallelDevice(const TrainingDeviceSetup& setup, const distributed::ParallelLayout& layout)
      : MultiRankDevice(layout, setup.world), plan_(*setup.plan), config_(*setup.config), optimizer_exchange_(setup.world),
        router_aux_loss_(plan_.graph.find_tensor(models::kRouterAuxLoss)) {
    check_cpu_backend_options(config_);
    std::unique_ptr<distributed::ProcessWorld> alone;
    distributed::ProcessWorld& world = setup.world != nullptr ? *setup.world : *(alone = distributed::ProcessWorld::single());
    std::vector<std::unique_ptr<distributed::Communicator>> communicators =
        distributed::connect_gloo(threads_, world, layout_.first_rank, layout_.world_size);
    sequence_groups_ = connect_cpu_sequence_groups(threads_, world, layout_);
    // The flat buffer: every trainable tensor, in spec order; the optimizer's shards over it.
    std::vector<size_t> sizes;
    std::vector<graph::TensorId> gradients;
    for (const models::ParameterSpec& spec : setup.specs) {
      weight_ids_.push_back(plan_.tensor(spec.name));
      auto gradient = plan_.parameter_gradients.find(weight_ids_.back());
      if (gradient == plan_.parameter_gradients.end()) continue;
      trainable_ids_.push_back(weight_ids_.back());
      gradients.push_back(gradient->second);
      offsets_.push_back(total_);
      sizes.push_back(static_cast<size_t>(graph::shape_numel(spec.shape)));
      total_ += sizes.back();
    }
    const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, layout_.world_size);
    shard_sizes_ = distributed::shard_sizes(shards);
    if (layout_.shard_weights) shard_weights(setup, shards);
    const compiler::ExecutionPlan& rank_plan = gathered_plan_ ? *gathered_plan_ : plan_;
    buckets_ = plan_gradient_buckets(rank_plan, gradients, sizes, shards,
                                     std::max<size_t>(1, setup.gradient_bucket_bytes / sizeof(float)), layout_.shard_gradients);
    for (int r = 0; r < layout_.local_ranks; ++r) {
      auto rank = std::make_unique<CpuReplica>();
      rank->backend.load(rank_plan, sequence_groups_.registry(r, *setup.registry));
      rank->parameters = bind_cpu_parameters(rank->backend, rank_plan, setup.specs);
      rank->communicator = std::move(communicators[static_cast<size_t>(r)]);
      ranks_.push_back(std::move(rank));
    }
    if ((fp8_ = fp8_state(plan_))) {
      for (auto& rank : ranks_) std::ranges::fill(rank->backend.view<float>(fp8_->tensor), 0.0f);
    }
    fp8_copies_ = fp8_weight_copies(plan_);
    for (int r = 0; r < layout_.local_ranks; ++r) {
      CpuReplica& rank = *ranks_[static_cast<size_t>(r)];
      rank.shard = shards[static_cast<size_t>(layout_.first_rank + r)];
      if (!layout_.shard_gradients) rank.flat.assign(total_, 0.0f);
      if (gathered_plan_) {
        rank.gatherer = std::make_unique<CpuWeightGatherer>(gathering_, layout_.first_rank + r, rank.backend,
                                                            *rank.communicator);
        rank.scratch.resize(scratch_elements_);
        rank.first_batches.add(rank.gatherer.get());
        rank.last_batch.add(rank.gatherer.get());
        if (quantized_base_->gathered()) {
          rank.quantized_gatherer = quantized_base_->gatherer(r, rank.backend, *rank.communicator);
          rank.first_batches.add(rank.quantized_gatherer.get());
          rank.last_batch.add(rank.quantized_gatherer.get());
        }
      }
      if (layout_.shard_gradients) {
        std::vector<std::span<float>> views;
        for (graph::TensorId id : gradients) views.push_back(rank.backend.view<float>(id));
        rank.sharded = std::make_unique<CpuShardedGradients>(buckets_, std::move(views), rank.shard, *rank.communicator);
        rank.first_batches.add(rank.sharded.get());
        rank.last_batch.add(rank.sharded.get());
      } else {
        rank.reducer = std::make_unique<CpuGradientReducer>(buckets_, rank.parameters.gradients, offsets_,
                                                            rank.flat.data(), *rank.communicator);
        rank.last_batch.add(rank.reducer.get());
      }
      for (size_t unit = rank.shard.first_unit; unit < rank.shard.end_unit; ++unit) {
        ParameterSlot slot = rank.parameters.slots[unit];
        slot.gradient = rank.sharded ? rank.sharded->accumulator(unit) : rank.flat.data() + offsets_[unit];
        // ZeRO-3: the master is the rank's own copy, which the gathers read.
        if (rank.gatherer) slot.master = rank.gatherer->owned(trainable_ids_[unit]).data();
        rank.shard_slots.push_back(slot);
      }
      if (!rank.shard_slots.empty()) rank.optimizer = make_cpu_optimizer(config_, rank.shard_slots);
    }
    optimizer_name_ = to_string(config_.optimizer.algorithm);
  }

  std::string description() const override {
    return fmt::format("CPU backend, fp32 weights, gradients and {} state; {} ({}, gloo)", optimizer_name_,
                       layout_.describe(), layout_.spans_processes() ? "rank threads in each process" : "threads of this process");
  }
  std::span<const WeightView> weights() const override {
    return gathered_plan_ ? std::span<const WeightView>(host_.weights) : ranks_[0]->parameters.weights;
  }
  std::span<const WeightView> trainable() const override {
    return gathered_plan_ ? std::span<const WeightView>(host_.trainable) : ranks_[0]->parameters.trainable;
  }
  // The ranks' shards (gathered to the leader across processes), then fp8_hybrid's scaling state,
  // the same on every rank after each step's all-reduce: rank 0's.
  std::vector<StateTensor> optimizer_state() override {
    std::vector<StateTensor> tensors = optimizer_exchange_.gather(local_optimizer_state());
    if (fp8_) tensors.push_back(fp8_->state_tensor(ranks_[0]->backend.view<float>(fp8_->tensor).data()));
    return tensors;
  }
  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return make_cpu_evaluator(setup, weights(), quantized_);
  }
  void store_quantized(const models::QuantizedWeight& weight, QuantizedPieces pieces) override {
    quantized_.push_back({weight, std::move(pieces)});
    if (quantized_base_ && quantized_base_->gathered()) {
      quantized_base_->keep(plan_, weight, quantized_.back().pieces);  // ZeRO-3: shared out, or the host image
      return;
    }
    for (auto& rank : ranks_) write_quantized(rank->backend, plan_, weight, quantized_.back().pieces);
  }

  // Every rank starts from rank 0's parameters (frozen ones included) and scaling state. The
  // optimizer state needs nothing in one process (optimizer_state() views each rank's own shard);
  // across processes the leader hands back the shards a resume restored into its copies.
  void upload() override {
    optimizer_exchange_.scatter(local_optimizer_state());
    threads_.run([&](int r) {
      CpuReplica& rank = *ranks_[static_cast<size_t>(r)];
      if (rank.gatherer) {
        upload_shards(rank);
      } else {
        for (const WeightView& weight : rank.parameters.weights) {
          rank.communicator->broadcast(weight.values.data(), weight.values.size(), DType::F32, 0);
        }
      }
      if (fp8_) {
        std::span<float> state = rank.backend.view<float>(fp8_->tensor);
        rank.communicator->broadcast(state.data(), state.size(), DType::F32, 0);
      }
      refresh_fp8_weight_copies(rank.backend, fp8_copies_);
    });
    host_current_ = true;  // ZeRO-3: the owners hold what the host copies hold
  }
  // ZeRO-1/2: every rank holds the same weights after update(); rank 0's are the host's. ZeRO-3:
  // each trainable weight is broadcast from its owner and the first local rank writes the host
  // copy — only when a step changed them since (every process makes the same calls, so they all
  // agree; the leader's last download for the outputs then finds its copies current and calls
  // no collective alone).
  void download() override {
    if (!gathered_plan_ || host_current_) return;
    host_current_ = true;
    threads_.run([&](int r) {
      CpuReplica& rank = *ranks_[static_cast<size_t>(r)];
      std::vector<size_t> counts;
      std::vector<int> owners;
      for (size_t unit = 0; unit < trainable_ids_.size(); ++unit) {
        counts.push_back(host_.trainable[unit].values.size());
        owners.push_back(rank.gatherer->owner(trainable_ids_[unit]));
      }
      download_through_scratch(
          {*rank.communicator, rank.scratch.data(), scratch_elements_, r == 0}, counts, owners,
          [&](size_t unit, size_t first, size_t count) {
            std::copy_n(rank.gatherer->owned(trainable_ids_[unit]).begin() + static_cast<std::ptrdiff_t>(first), count,
                        rank.scratch.begin());
          },
          [&](size_t unit, size_t first, size_t count) {
            std::copy_n(rank.scratch.begin(), count, host_.trainable[unit].values.begin() + static_cast<std::ptrdiff_t>(first));
          });
    });
  }
  void before_evaluation() override { download(); }

  // The micro-batch goes to its replica's ranks, each of a sequence group keeping its slice.
  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    for (const int local : window_.next_local_ranks()) {
      const int sequence = layout_.place(layout_.first_rank + local).sequence;
      ranks_[static_cast<size_t>(local)]->pending.push_back(
          copy_micro_batch(plan_, gathered_plan_ ? *gathered_plan_ : plan_, inputs, sequence, layout_.sequence_size));
    }
  }

  StepMetrics measure() override {
    threads_.run([&](int r) {
      CpuReplica& rank = *ranks_[static_cast<size_t>(r)];
      SUROGATE_CHECK(!rank.pending.empty(), "every rank trains gradient_accumulation_steps micro-batches a step");
      for (size_t index = 0; index < rank.pending.size(); ++index) {
        // The last micro-batch's backward reduces the gradient buckets as it completes them.
        runtime::StepObserverList& observers = index + 1 == rank.pending.size() ? rank.last_batch : rank.first_batches;
        rank.backend.set_step_observer(observers.empty() ? nullptr : &observers);
        rank.backend.execute(rank.pending[index].bindings());
        rank.measure.loss += rank.backend.view<float>(plan_.loss)[0];
        if (router_aux_loss_) rank.measure.router_aux_loss += rank.backend.view<float>(*router_aux_loss_)[0];
      }
      rank.backend.set_step_observer(nullptr);
      rank.pending.clear();
      // ZeRO-2/3: each rank holds its shard's sums and counts their squares; ZeRO-1: every rank
      // holds the same summed gradients, and the world's first rank counts them.
      if (rank.sharded) {
        const std::span<const float> shard = rank.sharded->accumulators();
        rank.measure.squares = ops::sum_of_squares(shard.data(), static_cast<int64_t>(shard.size()));
      } else {
        const bool counts = layout_.first_rank + r == 0;
        rank.measure.squares = counts ? ops::sum_of_squares(rank.flat.data(), static_cast<int64_t>(rank.flat.size())) : 0.0;
      }
    });
    std::vector<RankMeasure> measures;
    for (const auto& rank : ranks_) measures.push_back(std::exchange(rank->measure, {}));
    const StepMetrics metrics = window_.measure(measures, router_aux_loss_.has_value());
    grad_norm_ = metrics.grad_norm;
    return metrics;
  }

  void update(const OptimizerStep& step) override {
    threads_.run([&](int r) {
      CpuReplica& rank = *ranks_[static_cast<size_t>(r)];
      if (rank.optimizer) {
        clip_slot_gradients(rank.shard_slots, grad_norm_, config_.optimizer.max_grad_norm, step.gradient_scale);
        rank.optimizer->step(rank.shard_slots, step);
      }
      // ZeRO-1/2: the flat buffer now carries weights: this rank's piece in, every piece out.
      // ZeRO-3: the rank's own copies are the masters just updated, gathered where they are read.
      if (!rank.gatherer) publish_weights(rank);
      refresh_fp8_weight_copies(rank.backend, fp8_copies_);
      rank.backend.zero_gradients();
      if (rank.sharded) rank.sharded->zero();
      if (fp8_) {
        std::span<float> state = rank.backend.view<float>(fp8_->tensor);
        rank.communicator->all_reduce_amax(state.data(), state.size());
        quant::roll_fp8_history(state.data(), fp8_->shape.sites, fp8_->shape.history, step.step);
      }
    });
    host_current_ = false;
  }

  void skip_update() override {
    threads_.run([&](int r) {
      CpuReplica& rank = *ranks_[static_cast<size_t>(r)];
      rank.backend.zero_gradients();
      if (rank.sharded) rank.sharded->zero();
    });
  }

  size_t gradient_accumulator_bytes() const override {
    size_t largest = 0;
    for (const auto& rank : ranks_) {
      largest = std::max(largest, rank->sharded ? rank->sharded->bytes() : rank->flat.size() * sizeof(float));
    }
    return largest;
  }

private:
  // ZeRO-3: the plan with the weights in gather buffers, their schedule and the host copies.
  void shard_weights(const TrainingDeviceSetup& setup, const std::vector<distributed::Shard>& shards) {
    gathered_plan_ = plan_;
    gathering_ = zero3_gathering(*gathered_plan_, trainable_ids_, shards, layout_.world_size);
    const std::vector<graph::TensorId> shardable = shardable_weights(plan_);
    SUROGATE_CHECK(std::set<graph::TensorId>(shardable.begin(), shardable.end()) ==
                       std::set<graph::TensorId>(weight_ids_.begin(), weight_ids_.end()),
                   "ZeRO-3 shards exactly the weights the trainer loads");
    compiler::apply_weight_gathering(*gathered_plan_, gathering_);
    quantized_base_.emplace(*gathered_plan_, quantized_base_keeping(config_), layout_.world_size, layout_.first_rank,
                            layout_.local_ranks);
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
  void upload_shards(CpuReplica& rank) {
    std::vector<size_t> counts;
    for (const WeightView& weight : host_.weights) counts.push_back(weight.values.size());
    upload_through_scratch(
        {*rank.communicator, rank.scratch.data(), scratch_elements_}, counts,
        [&](size_t i, size_t first, size_t count) {
          std::copy_n(host_.weights[i].values.begin() + static_cast<std::ptrdiff_t>(first), count, rank.scratch.begin());
        },
        [&](size_t i, size_t first, size_t count) {
          const std::span<float> owned = rank.gatherer->owned(weight_ids_[i]);
          if (!owned.empty()) std::copy_n(rank.scratch.begin(), count, owned.begin() + static_cast<std::ptrdiff_t>(first));
        });
  }

  // ZeRO-1: this rank's updated weights to every rank through the flat buffer; ZeRO-2 through the
  // bucket staging.
  void publish_weights(CpuReplica& rank) {
    if (rank.sharded) {
      rank.sharded->all_gather(rank.parameters.trainable);
      return;
    }
    publish_shard(*rank.communicator, rank.flat.data(), shard_sizes_, DType::F32, rank.shard,
                  rank.parameters.trainable.size(), cpu_shard_copies(rank.parameters.trainable, offsets_, rank.flat.data()));
  }

  // This process's ranks' optimizer state, in rank order.
  std::vector<StateTensor> local_optimizer_state() {
    return ranks_optimizer_state(ranks_, [](const auto& rank) { return rank->optimizer.get(); });
  }

  const compiler::ExecutionPlan& plan_;
  const Config& config_;
  SequenceGroups sequence_groups_;  // sequence parallelism: each rank's group and exchange ops
  ProcessOptimizerState optimizer_exchange_;
  std::optional<graph::TensorId> router_aux_loss_;  // MoE plans with the router loss
  std::vector<std::unique_ptr<CpuReplica>> ranks_;
  std::vector<StoredQuantizedWeight> quantized_;  // QLoRA's base, kept for the evaluator's backend
  std::optional<Fp8State> fp8_;                   // fp8_hybrid's scaling state, in each rank's plan
  std::vector<Fp8WeightCopy> fp8_copies_;         // the trained weights' FP8 copies (full fine-tuning)
  std::vector<graph::TensorId> weight_ids_;     // every spec's tensor, in spec order
  std::vector<graph::TensorId> trainable_ids_;  // the trainable ones (the flat buffer's units)
  GradientBuckets buckets_;
  std::optional<compiler::ExecutionPlan> gathered_plan_;  // ZeRO-3: the ranks' plan (weights in gather buffers)
  compiler::WeightGathering gathering_;
  std::optional<CpuQuantizedBase> quantized_base_;  // ZeRO-3: where the quantized base stays (persistent_quants)
  HostCopies host_;                  // ZeRO-3: what weights() and trainable() show
  size_t scratch_elements_ = 0;      // ZeRO-3: the largest weight
  bool host_current_ = true;         // ZeRO-3: no step since the host copies were uploaded or downloaded
  std::vector<size_t> offsets_;      // each trainable tensor's offset in the flat buffer
  size_t total_ = 0;                 // the flat buffer's elements
  std::vector<size_t> shard_sizes_;  // the all-gather's pieces, one per rank
  std::string optimizer_name_;
  double grad_norm_ = 0.0;
};

}  // namespace

std::unique_ptr<TrainingDevice> make_cpu_data_parallel_training_device(const TrainingDeviceSetup& setup,
                                                                       const distributed::ParallelLayout& layout) {
  return std::make_unique<CpuDataParallelDevice>(setup, layout);
}

}  // namespace surogate::train
