// Data parallelism with ZeRO-1/2/3 on GPUs: the TrainingDevice for `gpus: N` on the CUDA backend,
// or ranks spread over processes (a launcher or Ray: distributed/process_world.h); the CPU ranks'
// shape (cpu_data_parallel_device.cpp). This process's ranks are threads (rank_threads.h), local
// rank l on GPU first_device + l with a CudaRankState (its backend, flat fp32 masters and gradient
// accumulators, optimizer), joined by NCCL with every collective on the rank's backend stream, so
// compute and communication stay in order without host waits; the host waits through the
// communicator, which fails with a message instead of hanging when another rank stopped. A rank
// makes no call that may wait for the device (allocation, pinned memory) between entering a task
// and enqueuing its collectives (NCCL's rule for several GPUs driven from one process).
//
// One optimizer step, as the trainer sees one device:
//   accumulate() × (gradient_accumulation_steps × local ranks): micro-batch i of the window belongs
//     to rank i mod N (distributed::owner_of_micro_batch); the trainer hands this process only its
//     own ranks' micro-batches (takes_micro_batch), each copied to its rank; nothing runs yet.
//   measure(): every rank enqueues its micro-batches (execute, bf16 gradients added into its flat
//     accumulators), and the flat accumulators are summed over the ranks in place, in their dtype
//     (fp32, or bf16 with gradient_dtype bf16), bucket by bucket during the last micro-batch's
//     backward (cuda_gradient_reducer.h: each bucket's gradients added and all-reduced on the
//     rank's side stream as soon as the backward has written them). The trainer scaled every
//     micro-batch's loss by 1 / (loss tokens of the whole window), so the sum is the window's mean
//     gradient, as one GPU computes it with accumulation N × A, up to the order of the additions.
//     The norm and clip factor come from the summed buffer (global_grad_norm on the device); the
//     loss is the ranks' losses summed in rank order (process_window.h).
//   ZeRO-2 (layout.shard_gradients): every micro-batch's buckets are reduce-scattered on the side
//     stream as the backward completes them, and each rank adds its piece into accumulators of its
//     shard only (cuda_sharded_gradients.h: two bucket-sized staging slots instead of full-size
//     accumulators); each rank takes its shard's norm, the host adds the squares and every rank's
//     device clip factor is set from the total.
//   ZeRO-3 (layout.shard_weights): the plan runs with the weights in gather buffers
//     (compiler/weight_gathering.h, weight_shards.h); the rank keeps its bf16 pieces (CudaWeightShard)
//     and its shard's fp32 masters, and its gatherer (cuda_weight_gatherer.h) fills the buffers on
//     the side stream one use ahead; a quantized base likewise (cuda_quantized_base.h). Gradients
//     as in ZeRO-2; update() moves no weights; upload() / download() broadcast tensor by tensor
//     between the owners and rank 0's host copies, which the (gathering) evaluator reads.
//     With an observer the backend runs eagerly: ZeRO-2 and ZeRO-3 give up CUDA graphs, and ZeRO-1
//     keeps them for all but each step's last micro-batch.
//   update(): rank r steps its optimizer for its shard only (distributed::place_shards over the
//     flat buffer's tensors; ZeRO-1: its optimizer holds state for those tensors alone), which
//     updates its fp32 masters and bf16 weights of the shard; an NCCL all-gather of the flat fp32
//     masters gives every rank every shard's masters, and each rank rewrites the bf16 weights of
//     the other shards from them (round to nearest even, as the optimizer kernels do, so every
//     rank holds the same bits; shard_publish.h); then the accumulators are zeroed.
//
// Sequence parallelism (layout.sequence_size > 1): each rank runs a sequence slice's plan whose
// exchange ops are the group's NCCL all-to-all (distributed/sequence_exchange_cuda.h) on the
// compute stream; ZeRO shards over every rank of the world, and ZeRO-3's gathers and the bucket
// reductions stay on the side stream's world communicator, each communicator's collectives
// enqueued in plan order on every rank (docs/architecture.md, "ZeRO-3"). fp8_hybrid:
// the ranks' scaling states are max-reduced before each roll, so every GPU quantizes as one GPU
// would. The host side is rank 0's (weights(), trainable(), the evaluator); optimizer_state() is the
// ranks' shards in rank order, the single-GPU list, so checkpoints have the single-GPU format
// (process_optimizer_state.h across processes). master_dtype bf16 is rejected with several GPUs
// (backend_selection.cpp). The whole design, with the reasons: docs/architecture.md, "Data
// parallelism".
#include "train/device/cuda_data_parallel_device.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "distributed/nccl_communicator.h"
#include "distributed/sequence_exchange_cuda.h"
#include "cuda/kernels/fp8_quantize.h"
#include "distributed/shard_placement.h"
#include "train/device/cuda_evaluator.h"
#include "train/device/cuda_gradient_reducer.h"
#include "train/device/cuda_sharded_gradients.h"
#include "train/device/cuda_weight_gatherer.h"
#include "train/device/cuda_quantized_base.h"
#include "train/device/cuda_weight_transfer.h"
#include "train/device/fp8_state.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/weight_shards.h"
#include "train/device/micro_batch.h"
#include "train/device/multi_rank_device.h"
#include "train/device/shard_publish.h"
#include "train/device/process_optimizer_state.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

struct CudaReplica {
  std::unique_ptr<CudaRankState> state;
  std::unique_ptr<distributed::Communicator> communicator;  // on the backend's stream
  std::unique_ptr<distributed::Communicator> sequence;  // sequence parallelism: the rank's group
  distributed::Shard shard;
  std::vector<MicroBatch> pending;
  RankMeasure measure;  // the step's losses and the rank's share of the squares
  // The side stream and its own NCCL communicator: the gradient buckets, ZeRO-3's gathers.
  std::optional<cuda::Stream> side;
  std::unique_ptr<distributed::Communicator> side_communicator;
  std::unique_ptr<CudaGradientReducer> reducer;   // ZeRO-1
  std::unique_ptr<CudaShardedGradients> sharded;  // ZeRO-2/3
  cuda::DeviceBuffer<__nv_bfloat16> owned;  // ZeRO-3: the rank's pieces of the weights
  CudaWeightShard weight_shard;
  std::unique_ptr<CudaWeightGatherer> gatherer;
  std::unique_ptr<CudaWeightGatherer> quantized_gatherer;  // ZeRO-3: the quantized base's gathers
  runtime::StepObserverList first_batches, last_batch;  // what each micro-batch's execute calls
  cuda::DeviceBuffer<float> scratch;        // ZeRO-3: a chunk of a weight on its way to or from the host
};


class CudaDataParallelDevice final : public MultiRankDevice {
public:
  CudaDataParallelDevice(const TrainingDeviceSetup& setup, const distributed::ParallelLayout& layout)
      : MultiRankDevice(layout, setup.world), plan_(*setup.plan), config_(*setup.config), optimizer_exchange_(setup.world),
        trainable_layout_(cuda_trainable_layout(plan_, setup.specs)) {
    // Refused up front by the feature-support table (config/feature_support.cpp: the data-parallel
    // device with bf16 masters, offload_master or offload_grads), before anything loads.
    SUROGATE_CHECK(config_.precision.master_dtype != MasterDtype::Bf16 && !config_.offload.offload_master &&
                       !config_.offload.offload_grads,
                   "an option the feature-support table refuses on the data-parallel device");
    int visible = 0;
    CUDA_CHECK(cudaGetDeviceCount(&visible));
    if (visible < layout_.first_device + layout_.local_ranks) {
      fail_user("{}: GPUs {}-{} asked for, {} visible", config_.sources.of("gpus"), layout_.first_device,
                layout_.first_device + layout_.local_ranks - 1, visible);
    }
    host_ = cuda_host_weights(setup.specs, trainable_layout_);  // rank 0's host copies
    const std::vector<size_t> sizes = trainable_layout_.unit_sizes();
    const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, layout_.world_size);
    shard_sizes_ = distributed::shard_sizes(shards);
    std::vector<graph::TensorId> trainable_ids, gradients;
    for (const CudaTrainable& entry : trainable_layout_.entries) {
      trainable_ids.push_back(entry.parameter);
      gradients.push_back(entry.gradient);
    }
    if (layout_.shard_weights) {
      gathered_plan_ = plan_;
      gathering_ = zero3_gathering(*gathered_plan_, trainable_ids, shards, layout_.world_size);
      const std::vector<graph::TensorId> shardable = shardable_weights(plan_);
      SUROGATE_CHECK(std::set<graph::TensorId>(shardable.begin(), shardable.end()) ==
                         std::set<graph::TensorId>(trainable_layout_.ids.begin(), trainable_layout_.ids.end()),
                     "ZeRO-3 shards exactly the weights the trainer loads");
      compiler::apply_weight_gathering(*gathered_plan_, gathering_);
      quantized_base_.emplace(*gathered_plan_, quantized_base_keeping(config_), layout_.world_size, layout_.first_rank,
                              layout_.local_ranks);
    }
    const size_t accumulator_bytes = config_.precision.gradient_dtype == GradientDtype::Bf16 ? 2 : sizeof(float);
    buckets_ = plan_gradient_buckets(gathered_plan_ ? *gathered_plan_ : plan_, gradients, sizes, shards,
                                     std::max<size_t>(1, setup.gradient_bucket_bytes / accumulator_bytes),
                                     layout_.shard_gradients);
    ranks_.resize(static_cast<size_t>(layout_.local_ranks));
    try {
      connect_ranks(setup, shards);
    } catch (...) {
      release_ranks();
      throw;
    }
    optimizer_name_ = to_string(config_.optimizer.algorithm);
    if ((fp8_ = fp8_state(plan_))) fp8_host_.assign(static_cast<size_t>(fp8_->shape.floats()), 0.0f);
  }

  ~CudaDataParallelDevice() override { release_ranks(); }

  std::string description() const override {
    return fmt::format("CUDA backend, bf16 weights and activations, fp32 master weights, {} gradient accumulation, "
                       "{} state; {} (GPUs {}-{}, threads of this process, NCCL)",
                       config_.precision.gradient_dtype == GradientDtype::Bf16 ? "bf16" : "fp32", optimizer_name_,
                       layout_.several_ranks() ? layout_.describe() : "a data-parallel world of one",
                       layout_.first_device, layout_.first_device + layout_.local_ranks - 1);
  }
  std::span<const WeightView> weights() const override { return host_.weights; }
  std::span<const WeightView> trainable() const override { return host_.trainable; }

  // The ranks' shards (gathered to the leader across processes), then fp8_hybrid's scaling state
  // (the same on every GPU after each step's all-reduce; its host copy is rank 0's).
  std::vector<StateTensor> optimizer_state() override {
    std::vector<StateTensor> tensors = optimizer_exchange_.gather(local_optimizer_state());
    if (fp8_) tensors.push_back(fp8_->state_tensor(fp8_host_.data()));
    return tensors;
  }

  std::vector<std::pair<std::string, double>> time_breakdown() override {
    if (!config_.logging.debug_time_breakdown) return {};
    std::vector<std::pair<std::string, double>> times;
    threads_.run([&](int r) {
      if (r == 0) times = ranks_[0].state->backend().time_breakdown();
    });
    return times;
  }

  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    std::unique_ptr<Evaluator> inner;
    threads_.run([&](int r) {
      if (r != 0) return;
      // ZeRO-3: no GPU keeps the whole weights; the evaluator gathers them from the host copies.
      inner = gathered_plan_ ? make_cuda_gathering_evaluator(setup, ranks_[0].state->backend(), host_.weights,
                                                             quantized_pieces())
                             : make_cuda_evaluator(setup, ranks_[0].state->backend());
    });
    return on_rank_zero(threads_, std::move(inner));
  }

  void store_quantized(const models::QuantizedWeight& weight, QuantizedPieces pieces) override {
    if (quantized_base_ && quantized_base_->gathered()) {
      threads_.run([&](int r) { quantized_base_->keep(r, weight, pieces); });  // ZeRO-3: shared out, or the image
      return;
    }
    threads_.run([&](int r) { write_quantized(ranks_[static_cast<size_t>(r)].state->backend(), plan_, weight, pieces); });
  }

  // Rank 0's GPU gets the host copies; every other GPU receives its bf16 weights (frozen ones
  // included) and fp32 masters. Each rank's optimizer state comes from its own host view (across
  // processes, the leader first hands back the shards a resume restored into its copies).
  // Rank 0's upload is done before any rank enqueues a broadcast: its pinned staging memory is
  // allocated and freed on the way, and a rank must not make such calls (which may wait for
  // every GPU) while a peer's collective waits for it.
  void upload() override {
    optimizer_exchange_.scatter(local_optimizer_state());
    if (gathered_plan_) {
      upload_shards();
      return;
    }
    threads_.run([&](int r) {
      if (r != 0 || layout_.first_rank != 0) return;
      ranks_[0].state->upload_weights(host_.weights);
      if (fp8_) {
        CUDA_CHECK(cudaMemcpy(fp8_device(*ranks_[0].state), fp8_host_.data(), fp8_host_.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
      }
    });
    threads_.run([&](int r) {
      CudaReplica& rank = ranks_[static_cast<size_t>(r)];
      CudaRankState& state = *rank.state;
      for (size_t i = 0; i < host_.weights.size(); ++i) {
        rank.communicator->broadcast(state.backend().device_address(trainable_layout_.ids[i]),
                                     host_.weights[i].values.size(), DType::BF16, 0);
      }
      rank.communicator->broadcast(state.masters(), static_cast<size_t>(trainable_layout_.total), DType::F32, 0);
      if (fp8_) rank.communicator->broadcast(fp8_device(state), fp8_host_.size(), DType::F32, 0);
      state.refresh_fp8_weight_copies();
      if (state.optimizer()) state.optimizer()->upload(state.stream());
      rank.communicator->synchronize();
    });
  }

  // Every GPU holds the same masters after update(); GPU 0's are the host's (ZeRO-3: each
  // trainable tensor's from its owner, download_shards). Each rank's optimizer state goes to its
  // own host view.
  // The host copies are written by download() only, except offload_optimizer's state, which lives
  // in host memory and is updated there: then a checkpoint copies it.
  bool host_views_are_live() const override { return config_.offload.offload_optimizer; }

  void download() override {
    if (gathered_plan_) download_shards();
    threads_.run([&](int r) {
      CudaRankState& state = *ranks_[static_cast<size_t>(r)].state;
      if (r == 0 && !gathered_plan_) state.download_trainable(host_.weights);
      if (state.optimizer()) state.optimizer()->download(state.stream());
      if (r == 0 && fp8_) {
        CUDA_CHECK(cudaMemcpyAsync(fp8_host_.data(), fp8_device(state), fp8_host_.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, state.stream()));
      }
      state.synchronize();
    });
  }

  // ZeRO-3: the evaluator reads the host copies.
  void before_evaluation() override {
    if (gathered_plan_) download_shards();
  }

  // The micro-batch goes to its replica's ranks, each of a sequence group keeping its slice.
  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    for (const int local : window_.next_local_ranks()) {
      const int sequence = layout_.place(layout_.first_rank + local).sequence;
      ranks_[static_cast<size_t>(local)].pending.push_back(
          copy_micro_batch(plan_, gathered_plan_ ? *gathered_plan_ : plan_, inputs, sequence, layout_.sequence_size));
    }
  }

  StepMetrics measure() override {
    // Every rank's micro-batches: the last one's backward reduces the gradient buckets on the side
    // stream (and under ZeRO-3 every micro-batch gathers its weights there). Only enqueued: the
    // host waits below, once every rank has enqueued its part.
    threads_.run([&](int r) {
      CudaReplica& rank = ranks_[static_cast<size_t>(r)];
      SUROGATE_CHECK(!rank.pending.empty(), "every rank trains gradient_accumulation_steps micro-batches a step");
      for (size_t index = 0; index < rank.pending.size(); ++index) {
        const bool last = index + 1 == rank.pending.size();
        runtime::StepObserverList& observers = last ? rank.last_batch : rank.first_batches;
        rank.state->backend().set_step_observer(observers.empty() ? nullptr : &observers);
        rank.state->accumulate(rank.pending[index].bindings(), !last && !rank.sharded);
      }
      rank.state->backend().set_step_observer(nullptr);
      rank.pending.clear();
      if (rank.sharded) rank.sharded->finish();
      else rank.reducer->finish();
    });
    const size_t tensors = trainable_layout_.entries.size();
    threads_.run([&](int r) {
      CudaReplica& rank = ranks_[static_cast<size_t>(r)];
      CudaRankState& state = *rank.state;
      if (layout_.shard_gradients) state.gradient_norm(rank.shard.first_unit, rank.shard.end_unit);
      else state.gradient_norm(0, tensors);
      rank.side_communicator->synchronize();
      rank.communicator->synchronize();
      // ZeRO-2/3: each rank counts its shard's squares; ZeRO-1: every rank holds the same summed
      // gradients (NCCL gives every rank the same bits), and the world's first rank counts them.
      const double norm = state.norm();
      const bool counts = layout_.shard_gradients || layout_.first_rank + r == 0;
      rank.measure = {state.loss_sum(), counts ? norm * norm : 0.0, 0.0};
      rank.measure.router_aux_loss = state.router_aux_loss_sum().value_or(0.0);  // after loss_sum()
    });
    std::vector<RankMeasure> measures;
    for (const CudaReplica& rank : ranks_) measures.push_back(rank.measure);
    const StepMetrics metrics = window_.measure(measures, ranks_.front().state->router_aux_loss_sum().has_value());
    // ZeRO-2/3: every rank clips by the total (ZeRO-1's clip factor came with its norm).
    if (layout_.shard_gradients) {
      threads_.run([&](int r) { ranks_[static_cast<size_t>(r)].state->set_clip_factor(metrics.grad_norm); });
    }
    return metrics;
  }

  void update(const OptimizerStep& step) override {
    // fp16 loss scaling is the CPU emulation's in this build (torch_dtype: float16 is refused on CUDA).
    SUROGATE_CHECK(step.gradient_scale == 1.0, "no gradient scale on the CUDA backend");
    threads_.run([&](int r) {
      CudaReplica& rank = ranks_[static_cast<size_t>(r)];
      CudaRankState& state = *rank.state;
      state.step(step);
      if (!gathered_plan_) {
        // ZeRO-1/2: every rank's updated masters to every rank, and the bf16 weights from them.
        // ZeRO-3: the optimizer wrote the rank's own weights, gathered where they are read.
        publish_shard(*rank.communicator, state.masters(), shard_sizes_, DType::F32, rank.shard,
                      trainable_layout_.entries.size(), cuda_shard_copies(state));
      }
      state.refresh_fp8_weight_copies();
      state.zero_accumulators();
      if (fp8_) {
        rank.communicator->all_reduce_amax(fp8_device(state), fp8_host_.size());
        cuda::fp8_roll_history(fp8_device(state), fp8_->shape.sites, fp8_->shape.history, step.step, state.stream());
      }
    });
    host_current_ = false;
  }

  void skip_update() override {
    threads_.run([&](int r) { ranks_[static_cast<size_t>(r)].state->zero_accumulators(); });
  }

  size_t gradient_accumulator_bytes() const override {
    size_t largest = 0;
    for (const CudaReplica& rank : ranks_) {
      largest = std::max(largest, rank.state->accumulator_bytes() + (rank.sharded ? rank.sharded->staging_bytes() : 0));
    }
    return largest;
  }

private:
  // Every rank's state first (no collective yet, so a rank that fails here, e.g. out of memory,
  // stops the run with its message), then the NCCL world on the ranks' streams.
  void connect_ranks(const TrainingDeviceSetup& setup, const std::vector<distributed::Shard>& shards) {
    // Sequence parallelism: each rank binds the exchange ops from a table of its own, whose slot
    // gets the rank's group communicator once the backends' streams exist (below).
    for (int r = 0; layout_.sequence_size > 1 && r < layout_.local_ranks; ++r) {
      sequence_slots_.push_back(std::make_unique<distributed::SequenceGroupSlot>());
      sequence_tables_.push_back(std::make_unique<runtime::CudaOpTable>(runtime::builtin_cuda_ops()));
      distributed::add_sequence_exchange_cuda_ops(*sequence_tables_.back(), sequence_slots_.back().get());
    }
    threads_.run([&](int r) {
      CUDA_CHECK(cudaSetDevice(layout_.first_device + r));
      CudaReplica& rank = ranks_[static_cast<size_t>(r)];
      const int global = layout_.first_rank + r;
      rank.shard = shards[static_cast<size_t>(global)];
      TrainingDeviceSetup rank_setup = setup;
      if (gathered_plan_) rank_setup.plan = &*gathered_plan_;
      if (!sequence_tables_.empty()) rank_setup.cuda_ops = sequence_tables_[static_cast<size_t>(r)].get();
      if (gathered_plan_) {
        rank.owned = cuda::DeviceBuffer<__nv_bfloat16>(gathering_.owned_elements[static_cast<size_t>(global)]);
        rank.owned.zero();
        rank.weight_shard = {&gathering_, global, rank.owned.data()};
        rank.scratch = cuda::DeviceBuffer<float>(kTransferChunkElements);
        quantized_base_->allocate(r);
      }
      rank.state = std::make_unique<CudaRankState>(rank_setup, trainable_layout_, rank.shard.first_unit,
                                                   rank.shard.end_unit, gathered_plan_ ? &rank.weight_shard : nullptr,
                                                   layout_.shard_gradients);
      rank.side.emplace();
      CUDA_CHECK(cudaDeviceSynchronize());  // the owned buffer zeroed before anything reads it
    });
    std::vector<void*> streams, sides;
    for (const CudaReplica& rank : ranks_) {
      streams.push_back(rank.state->stream());
      sides.push_back(rank.side->get());
    }
    std::unique_ptr<distributed::ProcessWorld> alone;
    distributed::ProcessWorld& world = setup.world != nullptr ? *setup.world : *(alone = distributed::ProcessWorld::single());
    std::vector<std::unique_ptr<distributed::Communicator>> communicators = distributed::connect_nccl_world(
        threads_, world, layout_.first_rank, layout_.world_size, layout_.first_device, streams);
    std::vector<std::unique_ptr<distributed::Communicator>> side_communicators = distributed::connect_nccl_world(
        threads_, world, layout_.first_rank, layout_.world_size, layout_.first_device, sides);
    threads_.run([&](int r) {
      CudaReplica& rank = ranks_[static_cast<size_t>(r)];
      rank.communicator = std::move(communicators[static_cast<size_t>(r)]);
      rank.side_communicator = std::move(side_communicators[static_cast<size_t>(r)]);
      if (gathered_plan_) {
        rank.gatherer = std::make_unique<CudaWeightGatherer>(gathering_, rank.state->backend(), rank.side->get(),
                                                             all_gather_fill(rank.weight_shard, *rank.side_communicator));
        rank.first_batches.add(rank.gatherer.get());
        rank.last_batch.add(rank.gatherer.get());
        if (quantized_base_->gathered()) {
          rank.quantized_gatherer = std::make_unique<CudaWeightGatherer>(
              quantized_base_->gathering(), rank.state->backend(), rank.side->get(),
              quantized_base_->fill(r, *rank.side_communicator));
          rank.first_batches.add(rank.quantized_gatherer.get());
          rank.last_batch.add(rank.quantized_gatherer.get());
        }
      }
      if (layout_.shard_gradients) {
        rank.sharded = std::make_unique<CudaShardedGradients>(buckets_, trainable_layout_, *rank.state, rank.shard,
                                                              rank.side->get(), *rank.side_communicator);
        rank.first_batches.add(rank.sharded.get());
        rank.last_batch.add(rank.sharded.get());
      } else {
        rank.reducer = std::make_unique<CudaGradientReducer>(buckets_, *rank.state, rank.side->get(),
                                                             *rank.side_communicator);
        rank.last_batch.add(rank.reducer.get());
      }
    });
    if (sequence_slots_.empty()) return;
    std::vector<std::unique_ptr<distributed::Communicator>> groups = distributed::connect_nccl_groups(
        threads_, world, layout_.first_rank, layout_.world_size, layout_.first_device, streams, [&](int rank) {
          const distributed::RankPlace place = layout_.place(rank);
          return distributed::RankGroup{fmt::format("sequence-{}-{}", place.stage, place.replica), place.sequence,
                                        layout_.sequence_size};
        });
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].sequence = std::move(groups[r]);
      sequence_slots_[r]->communicator = ranks_[r].sequence.get();
    }
  }

  // ZeRO-3 (cuda_weight_transfer.h): rank 0 writes fp8_hybrid's scaling state first (as upload()
  // does otherwise), then every weight reaches its owner.
  void upload_shards() {
    threads_.run([&](int r) {
      if (r != 0 || layout_.first_rank != 0 || !fp8_) return;
      CUDA_CHECK(cudaMemcpy(fp8_device(*ranks_[0].state), fp8_host_.data(), fp8_host_.size() * sizeof(float),
                            cudaMemcpyHostToDevice));
    });
    threads_.run([&](int r) {
      CudaReplica& rank = ranks_[static_cast<size_t>(r)];
      CudaRankState& state = *rank.state;
      upload_weight_shards(transfer(rank, r), trainable_layout_, host_.weights);
      if (fp8_) rank.communicator->broadcast(fp8_device(state), fp8_host_.size(), DType::F32, 0);
      state.refresh_fp8_weight_copies();
      if (state.optimizer()) state.optimizer()->upload(state.stream());
      rank.communicator->synchronize();
    });
    host_current_ = true;
  }

  // ZeRO-3: the trainable weights' masters into the host copies, only when a step changed them
  // since the last upload or download: every process makes the same calls, so they all agree, and
  // the leader's download for the outputs then finds its copies current and calls no collective alone.
  void download_shards() {
    if (host_current_) return;
    host_current_ = true;
    threads_.run([&](int r) {
      CudaReplica& rank = ranks_[static_cast<size_t>(r)];
      download_weight_shards(transfer(rank, r), trainable_layout_, host_.weights);
      rank.communicator->synchronize();
    });
  }

  // ZeRO-3 with the quantized base gathered: where the evaluator reads it from (host memory).
  QuantizedPieceSource quantized_pieces() const {
    if (!quantized_base_ || !quantized_base_->gathered()) return {};
    return [this](const std::string& name) { return quantized_base_->host_piece(name); };
  }

  CudaShardTransfer transfer(CudaReplica& rank, int r) {
    return {*rank.state, *rank.communicator, rank.weight_shard, rank.scratch.data(), r == 0};
  }

  float* fp8_device(CudaRankState& state) const {
    return static_cast<float*>(state.backend().device_address(fp8_->tensor));
  }

  // Each rank's CUDA objects are released on its own thread (its device current).
  void release_ranks() noexcept {
    try {
      threads_.run([&](int r) {
        CudaReplica& rank = ranks_[static_cast<size_t>(r)];
        if (rank.side) rank.side->synchronize();
        rank.gatherer.reset();
        rank.quantized_gatherer.reset();
        if (quantized_base_) quantized_base_->release(r);
        rank.reducer.reset();
        rank.sharded.reset();
        rank.side_communicator.reset();
        rank.sequence.reset();
        rank.communicator.reset();
        rank.state.reset();
        rank.side.reset();
        rank.owned = {};
        rank.scratch = {};
      });
    } catch (...) {
      // Shutting down after a failure: nothing more to report.
    }
  }

  // This process's ranks' optimizer state, in rank order (host views: download() first).
  std::vector<StateTensor> local_optimizer_state() {
    return ranks_optimizer_state(ranks_, [](CudaReplica& rank) { return rank.state->optimizer(); });
  }

  const compiler::ExecutionPlan& plan_;
  const Config& config_;
  ProcessOptimizerState optimizer_exchange_;
  CudaTrainableLayout trainable_layout_;
  CudaHostWeights host_;
  std::vector<CudaReplica> ranks_;
  // Sequence parallelism: each rank's kernel table and the slot its exchange ops read the group from.
  std::vector<std::unique_ptr<distributed::SequenceGroupSlot>> sequence_slots_;
  std::vector<std::unique_ptr<runtime::CudaOpTable>> sequence_tables_;
  std::vector<size_t> shard_sizes_;  // the collectives' pieces (elements of the flat buffers), one per rank
  GradientBuckets buckets_;
  std::optional<compiler::ExecutionPlan> gathered_plan_;  // ZeRO-3: the ranks' plan (weights in gather buffers)
  compiler::WeightGathering gathering_;
  std::optional<CudaQuantizedBase> quantized_base_;  // ZeRO-3: where the quantized base stays (persistent_quants)
  bool host_current_ = true;         // ZeRO-3: no step since the host copies were uploaded or downloaded
  std::string optimizer_name_;
  std::optional<Fp8State> fp8_;      // fp8_hybrid's scaling state (in each GPU's plan)
  std::vector<float> fp8_host_;      // rank 0's host copy: zeros at the start, what checkpoints read and restore
};

}  // namespace

std::unique_ptr<TrainingDevice> make_cuda_data_parallel_training_device(const TrainingDeviceSetup& setup,
                                                                        const distributed::ParallelLayout& layout) {
  return std::make_unique<CudaDataParallelDevice>(setup, layout);
}

}  // namespace surogate::train
