// Data parallelism with ZeRO-1 on CPU ranks: the TrainingDevice the trainer drives when `gpus: N`
// (N > 1) trains on the CPU backend. The ranks are threads of this process
// (distributed/rank_threads.h), each with its own CpuBackend (plan, parameters, gradients,
// activation arena), joined by gloo (distributed/gloo_communicator.h).
//
// One optimizer step, as the trainer sees one device:
//   accumulate() × (gradient_accumulation_steps × N): micro-batch i of the window is copied to
//     rank i mod N (distributed::owner_of_micro_batch); nothing runs yet.
//   measure(): every rank runs its micro-batches (gradients add up in its backend), packs its
//     gradients into one flat fp32 buffer (the trainable tensors in plan order) and all-reduces
//     it with a sum. The trainer scaled every micro-batch's loss by 1 / (loss tokens of the whole
//     window), so each rank's gradient is its share of the window's mean and the sum over ranks
//     is the window's mean — exactly what one rank computes over the same micro-batches, up to
//     the order of the fp32 additions. No division by N. The loss is the ranks' losses summed.
//   ZeRO-2 (layout.shard_gradients): a reduce-scatter instead of the all-reduce, so rank r ends
//     with the summed gradients of its shard only; the norm is the ranks' sums of squares added.
//   update(): rank r clips and steps the optimizer for its shard only (distributed::place_shards:
//     a contiguous run of whole tensors of the flat buffer; its optimizer holds state for those
//     tensors alone: ZeRO-1), writes its updated weights into its piece of the flat buffer, and
//     an all-gather gives every rank every piece; each copies them into its backend.
//
// The host side is rank 0's: weights() and trainable() are its views; upload() broadcasts rank
// 0's weights to the others (after loading, initialising or resuming). optimizer_state() is the
// ranks' shards in rank order, which is the single-rank optimizer's list of tensors (same names,
// shapes and order, since shards are contiguous runs of whole tensors), so checkpoints have the
// single-rank format and a run resumes on any number of ranks.
#include "train/device/cpu_data_parallel_device.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "distributed/rank_threads.h"
#include "distributed/shard_placement.h"
#include "ops/gradient_norm.h"
#include "runtime/cpu_backend.h"
#include "train/device/backend_selection.h"
#include "train/device/cpu_parameters.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

// A micro-batch's inputs, copied: the trainer reuses its buffers for the next micro-batch.
struct MicroBatch {
  std::vector<graph::TensorId> tensors;
  std::vector<std::vector<std::byte>> bytes;
};

struct Rank {
  runtime::CpuBackend backend;
  CpuParameters parameters;
  distributed::Shard shard;
  std::vector<ParameterSlot> shard_slots;  // the shard's slots, gradients read from `flat`
  std::unique_ptr<Optimizer> optimizer;    // state for the shard's tensors only (none if empty)
  std::unique_ptr<distributed::Communicator> communicator;
  std::vector<MicroBatch> pending;
  double loss_sum = 0.0;
  double shard_squares = 0.0;              // ZeRO-2: the sum of squares of the shard's summed gradients
  std::vector<float> flat;                 // gradients in measure(), weights in update()
};

class CpuDataParallelDevice final : public TrainingDevice {
public:
  CpuDataParallelDevice(const TrainingDeviceSetup& setup, const distributed::ParallelLayout& layout)
      : plan_(*setup.plan), config_(*setup.config), layout_(layout), threads_(layout.world_size) {
    check_cpu_backend_precision(config_);
    std::vector<std::unique_ptr<distributed::Communicator>> communicators = distributed::connect_in_process_gloo(threads_);
    for (int r = 0; r < layout_.world_size; ++r) {
      auto rank = std::make_unique<Rank>();
      rank->backend.load(plan_, *setup.registry);
      rank->parameters = bind_cpu_parameters(rank->backend, plan_, setup.specs);
      rank->communicator = std::move(communicators[static_cast<size_t>(r)]);
      ranks_.push_back(std::move(rank));
    }
    // The flat buffer: every trainable tensor, in plan order.
    std::vector<size_t> sizes;
    for (const WeightView& weight : ranks_[0]->parameters.trainable) {
      offsets_.push_back(total_);
      sizes.push_back(weight.values.size());
      total_ += weight.values.size();
    }
    const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, layout_.world_size);
    shard_sizes_ = distributed::shard_sizes(shards);
    for (int r = 0; r < layout_.world_size; ++r) {
      Rank& rank = *ranks_[static_cast<size_t>(r)];
      rank.shard = shards[static_cast<size_t>(r)];
      rank.flat.assign(total_, 0.0f);
      for (size_t unit = rank.shard.first_unit; unit < rank.shard.end_unit; ++unit) {
        ParameterSlot slot = rank.parameters.slots[unit];
        slot.gradient = rank.flat.data() + offsets_[unit];
        rank.shard_slots.push_back(slot);
      }
      if (!rank.shard_slots.empty()) rank.optimizer = make_cpu_optimizer(config_, rank.shard_slots);
    }
    optimizer_name_ = to_string(config_.optimizer);
  }

  std::string description() const override {
    return fmt::format("CPU backend, fp32 weights, gradients and {} state; {} (threads of this process, gloo)",
                       optimizer_name_, layout_.describe());
  }
  int data_parallel_ranks() const override { return layout_.world_size; }
  std::span<const WeightView> weights() const override { return ranks_[0]->parameters.weights; }
  std::span<const WeightView> trainable() const override { return ranks_[0]->parameters.trainable; }
  std::vector<StateTensor> optimizer_state() override {
    std::vector<StateTensor> tensors;
    for (const auto& rank : ranks_) {
      if (!rank->optimizer) continue;
      for (StateTensor& tensor : rank->optimizer->state_tensors()) tensors.push_back(std::move(tensor));
    }
    return tensors;
  }
  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return make_cpu_evaluator(setup, ranks_[0]->parameters.weights, quantized_);
  }
  void store_quantized(const models::QuantizedWeight& weight, QuantizedPieces pieces) override {
    quantized_.push_back({weight, std::move(pieces)});
    for (auto& rank : ranks_) write_quantized(rank->backend, plan_, weight, quantized_.back().pieces);
  }

  // Every rank starts from rank 0's parameters (frozen ones included). The optimizer state needs
  // nothing: optimizer_state() views each rank's own shard.
  void upload() override {
    threads_.run([&](int r) {
      Rank& rank = *ranks_[static_cast<size_t>(r)];
      for (const WeightView& weight : rank.parameters.weights) {
        rank.communicator->broadcast(weight.values.data(), weight.values.size(), DType::F32, 0);
      }
    });
  }
  void download() override {}  // every rank holds the same weights after update(); rank 0's are the host's

  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    const int owner = distributed::owner_of_micro_batch(micro_batches_++, layout_.world_size);
    MicroBatch batch;
    for (const runtime::InputBinding& input : inputs) {
      batch.tensors.push_back(input.tensor);
      batch.bytes.emplace_back(input.data.begin(), input.data.end());
    }
    ranks_[static_cast<size_t>(owner)]->pending.push_back(std::move(batch));
  }

  StepMetrics measure() override {
    threads_.run([&](int r) {
      Rank& rank = *ranks_[static_cast<size_t>(r)];
      for (const MicroBatch& batch : rank.pending) {
        std::vector<runtime::InputBinding> bindings;
        for (size_t i = 0; i < batch.tensors.size(); ++i) bindings.push_back({batch.tensors[i], batch.bytes[i]});
        rank.backend.execute(bindings);
        rank.loss_sum += rank.backend.view<float>(plan_.loss)[0];
      }
      rank.pending.clear();
      for (size_t unit = 0; unit < offsets_.size(); ++unit) {
        const std::span<const float> gradient = rank.parameters.gradients[unit];
        std::memcpy(rank.flat.data() + offsets_[unit], gradient.data(), gradient.size_bytes());
      }
      if (layout_.shard_gradients) {
        rank.communicator->reduce_scatter_sum(rank.flat.data(), shard_sizes_, DType::F32);
        const std::span<const float> shard(rank.flat.data() + rank.shard.begin, rank.shard.size());
        rank.shard_squares = ops::sum_of_squares(shard.data(), static_cast<int64_t>(shard.size()));
      } else {
        rank.communicator->all_reduce_sum(rank.flat.data(), total_, DType::F32);
      }
    });
    micro_batches_ = 0;
    StepMetrics metrics;
    for (const auto& rank : ranks_) {
      metrics.loss += rank->loss_sum;
      rank->loss_sum = 0.0;
    }
    if (layout_.shard_gradients) {
      // Each rank holds its shard's sums: the norm adds the ranks' sums of squares (in one
      // process the caller adds them; a world of processes will all-reduce them).
      double squares = 0.0;
      for (const auto& rank : ranks_) squares += rank->shard_squares;
      metrics.grad_norm = std::sqrt(squares);
    } else {
      // Every rank holds the same summed gradients: rank 0's give the norm.
      const std::span<const float> flat(ranks_[0]->flat);
      metrics.grad_norm = ops::global_norm<float>(std::span<const std::span<const float>>(&flat, 1));
    }
    grad_norm_ = metrics.grad_norm;
    return metrics;
  }

  void update(const OptimizerStep& step) override {
    threads_.run([&](int r) {
      Rank& rank = *ranks_[static_cast<size_t>(r)];
      if (rank.optimizer) {
        clip_slot_gradients(rank.shard_slots, grad_norm_, config_.max_grad_norm, step.gradient_scale);
        rank.optimizer->step(rank.shard_slots, step);
      }
      // The flat buffer now carries weights: this rank's piece in, every piece out.
      const std::vector<WeightView>& trainable = rank.parameters.trainable;
      for (size_t unit = rank.shard.first_unit; unit < rank.shard.end_unit; ++unit) {
        std::memcpy(rank.flat.data() + offsets_[unit], trainable[unit].values.data(), trainable[unit].values.size_bytes());
      }
      rank.communicator->all_gather(rank.flat.data(), shard_sizes_, DType::F32);
      for (size_t unit = 0; unit < trainable.size(); ++unit) {
        if (unit >= rank.shard.first_unit && unit < rank.shard.end_unit) continue;
        std::memcpy(trainable[unit].values.data(), rank.flat.data() + offsets_[unit], trainable[unit].values.size_bytes());
      }
      rank.backend.zero_gradients();
    });
  }

  void skip_update() override {
    threads_.run([&](int r) { ranks_[static_cast<size_t>(r)]->backend.zero_gradients(); });
  }

private:
  const compiler::ExecutionPlan& plan_;
  const Config& config_;
  distributed::ParallelLayout layout_;
  distributed::RankThreads threads_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<StoredQuantizedWeight> quantized_;  // QLoRA's base, kept for the evaluator's backend
  std::vector<size_t> offsets_;      // each trainable tensor's offset in the flat buffer
  size_t total_ = 0;                 // the flat buffer's elements
  std::vector<size_t> shard_sizes_;  // the all-gather's pieces, one per rank
  std::string optimizer_name_;
  int64_t micro_batches_ = 0;        // accumulate() calls since the last measure()
  double grad_norm_ = 0.0;
};

}  // namespace

std::unique_ptr<TrainingDevice> make_cpu_data_parallel_training_device(const TrainingDeviceSetup& setup,
                                                                       const distributed::ParallelLayout& layout) {
  return std::make_unique<CpuDataParallelDevice>(setup, layout);
}

}  // namespace surogate::train
