// Data parallelism with ZeRO-1/2 on GPUs: the TrainingDevice the trainer drives when `gpus: N`
// (N > 1, or 0 with several GPUs visible) trains on the CUDA backend, or when the ranks are spread
// over several processes (a launcher or Ray: distributed/process_world.h). The shape is the CPU
// ranks' (cpu_data_parallel_device.cpp); what differs is where the state lives. This process's
// ranks are threads (distributed/rank_threads.h); local rank l calls cudaSetDevice(first_device + l)
// on its thread and holds a CudaRankState on that GPU (cuda_rank_state.h: its CudaBackend, the flat
// fp32 masters and gradient accumulators, its optimizer), joined to every rank of the world by NCCL
// (distributed/nccl_communicator.h; across processes the unique id travels over the control
// channel) with every collective enqueued on the rank's backend stream, so compute and
// communication stay in order without host waits; the host waits through the communicator
// (synchronize), which fails with a message instead of hanging when another rank stopped. A rank makes no call that may wait for the device (allocation, pinned
// memory) between entering a task and enqueuing that task's collectives, so no rank blocks while
// a peer's collective waits for it (NCCL's rule for several GPUs driven from one process).
//
// One optimizer step, as the trainer sees one device:
//   accumulate() × (gradient_accumulation_steps × local ranks): micro-batch i of the window belongs
//     to rank i mod N (distributed::owner_of_micro_batch); the trainer hands this process only its
//     own ranks' micro-batches (takes_micro_batch), each copied to its rank; nothing runs yet.
//   measure(): every rank enqueues its micro-batches (execute, bf16 gradients added into its flat
//     accumulators), then sums the flat accumulators over the ranks in place: one NCCL all-reduce
//     (in their dtype: fp32, or bf16 with gradient_dtype bf16). The trainer scaled every
//     micro-batch's loss by 1 / (loss tokens of the whole window), so the sum is the window's mean
//     gradient, as one GPU computes it with accumulation N × A, up to the order of the additions.
//     The norm and clip factor come from the summed buffer (global_grad_norm on the device); the
//     loss is the ranks' losses summed in rank order (process_window.h).
//   ZeRO-2 (layout.shard_gradients): a reduce-scatter instead of the all-reduce, so rank r holds
//     the summed gradients of its shard only; each rank takes its shard's norm, the host adds the
//     squares and every rank's device clip factor is set from the total.
//   update(): rank r steps its optimizer for its shard only (distributed::place_shards over the
//     flat buffer's tensors; ZeRO-1: its optimizer holds state for those tensors alone), which
//     updates its fp32 masters and bf16 weights of the shard; an NCCL all-gather of the flat fp32
//     masters gives every rank every shard's masters, and each rank rewrites the bf16 weights of
//     the other shards from them (round to nearest even, as the optimizer kernels do, so every
//     rank holds the same bits); then the accumulators are zeroed.
//
// Sequence parallelism (layout.sequence_size > 1): the plan is a sequence slice's
// (distributed/sequence_parallel_graph.h); each rank binds its backend from a kernel table of its own
// whose exchange ops run the group's NCCL all-to-all (distributed/sequence_exchange_cuda.h, the
// group joined by connect_nccl_groups on the backend's stream), and accumulate() gives every rank
// of a replica its slice of the micro-batch (micro_batch.h). The rest is the same: the gradients
// are summed, and ZeRO shards, over every rank of the world.
//
// fp8_hybrid: each GPU's plan holds the scaling state. In update(), before the roll, an NCCL
// all-reduce takes the max of every rank's state (only this step's amaxes differ), so every GPU
// rolls the same delayed amaxes and quantizes as one GPU running the whole window would; the
// trained weights' FP8 copies are rewritten on every GPU after the all-gather. The state's host
// copy is rank 0's (checkpoints); upload() writes it to rank 0's GPU and broadcasts it.
//
// The host side is rank 0's: weights() and trainable() are host copies, uploaded to rank 0's GPU and
// broadcast to the others by upload() (bf16 weights and fp32 masters through NCCL); download()
// reads the first local GPU's masters. optimizer_state() is the ranks' shards in rank order, which
// is the single-GPU optimizer's list of tensors, so checkpoints have the single-GPU format and a
// run resumes on any number of GPUs; across processes the leader gathers the others' shards and
// scatters them back after a resume (process_optimizer_state.h). The evaluator (rank 0's process
// only) reads its first GPU's weights and runs on that rank's thread.
// master_dtype bf16 is rejected with several GPUs (backend_selection.cpp): its masters are the
// bf16 weights themselves, scattered in each plan, and its stochastic-rounding keys are per
// position in the single-GPU optimizer's list.
#include "train/device/cuda_data_parallel_device.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "distributed/nccl_communicator.h"
#include "distributed/sequence_exchange_cuda.h"
#include "distributed/rank_threads.h"
#include "cuda/kernels/fp8_quantize.h"
#include "distributed/shard_placement.h"
#include "train/device/cuda_evaluator.h"
#include "train/device/fp8_state.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/micro_batch.h"
#include "train/device/process_optimizer_state.h"
#include "train/device/process_window.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

struct Rank {
  std::unique_ptr<CudaRankState> state;
  std::unique_ptr<distributed::Communicator> communicator;
  std::unique_ptr<distributed::Communicator> sequence;  // sequence parallelism: the rank's group
  distributed::Shard shard;
  std::vector<MicroBatch> pending;
  double loss_sum = 0.0;
  std::optional<double> aux_sum;
};

// The evaluator of GPU 0's weights, run on rank 0's thread (its CUDA device and the thread its
// backend was made on).
class RankZeroEvaluator final : public Evaluator {
public:
  RankZeroEvaluator(distributed::RankThreads& threads, std::unique_ptr<Evaluator> inner)
      : threads_(threads), inner_(std::move(inner)) {}
  ~RankZeroEvaluator() override {
    try {
      threads_.run([&](int r) {
        if (r == 0) inner_.reset();
      });
    } catch (...) {
      // Shutting down after a failure: nothing more to report.
    }
  }
  EvalResult run() override {
    EvalResult result;
    threads_.run([&](int r) {
      if (r == 0) result = inner_->run();
    });
    return result;
  }

private:
  distributed::RankThreads& threads_;
  std::unique_ptr<Evaluator> inner_;
};

class CudaDataParallelDevice final : public TrainingDevice {
public:
  CudaDataParallelDevice(const TrainingDeviceSetup& setup, const distributed::ParallelLayout& layout)
      : plan_(*setup.plan), config_(*setup.config), layout_(layout), threads_(layout.local_ranks),
        window_(layout, setup.world), optimizer_exchange_(setup.world),
        trainable_layout_(cuda_trainable_layout(plan_, setup.specs)) {
    if (config_.master_dtype == MasterDtype::Bf16) {
      // backend_selection.cpp refuses it with several GPUs; a world of one (tests) too.
      fail_user("{}: master_dtype: bf16 is implemented on one GPU only, not on the data-parallel device",
                config_.source_of("master_dtype"));
    }
    for (const auto& [key, set] : {std::pair{"offload_master", config_.offload_master},
                                   std::pair{"offload_grads", config_.offload_grads}}) {
      // backend_selection.cpp refuses them with several GPUs; a world of one (tests) too: the
      // collectives run on the masters and accumulators in GPU memory.
      if (set) fail_user("{}: {} is implemented on one GPU only, not on the data-parallel device", config_.source_of(key), key);
    }
    int visible = 0;
    CUDA_CHECK(cudaGetDeviceCount(&visible));
    if (visible < layout_.first_device + layout_.local_ranks) {
      fail_user("{}: GPUs {}-{} asked for, {} visible", config_.source_of("gpus"), layout_.first_device,
                layout_.first_device + layout_.local_ranks - 1, visible);
    }
    host_ = cuda_host_weights(setup.specs, trainable_layout_);  // rank 0's host copies
    const std::vector<size_t> sizes = trainable_layout_.unit_sizes();
    const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, layout_.world_size);
    shard_sizes_ = distributed::shard_sizes(shards);
    ranks_.resize(static_cast<size_t>(layout_.local_ranks));
    try {
      connect_ranks(setup, shards);
    } catch (...) {
      release_ranks();
      throw;
    }
    optimizer_name_ = to_string(config_.optimizer);
    if ((fp8_ = fp8_state(plan_))) fp8_host_.assign(static_cast<size_t>(fp8_->shape.floats()), 0.0f);
  }

  ~CudaDataParallelDevice() override { release_ranks(); }

  std::string description() const override {
    return fmt::format("CUDA backend, bf16 weights and activations, fp32 master weights, {} gradient accumulation, "
                       "{} state; {} (GPUs {}-{}, threads of this process, NCCL)",
                       config_.gradient_dtype == GradientDtype::Bf16 ? "bf16" : "fp32", optimizer_name_,
                       layout_.several_ranks() ? layout_.describe() : "a data-parallel world of one",
                       layout_.first_device, layout_.first_device + layout_.local_ranks - 1);
  }
  int data_parallel_ranks() const override { return layout_.data_size; }
  bool takes_micro_batch(int64_t index) const override { return window_.takes(index); }
  MicroBatchTotals window_totals(std::span<const MicroBatchTotals> taken) override { return window_.totals(taken); }
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
    if (!config_.debug_time_breakdown) return {};
    std::vector<std::pair<std::string, double>> times;
    threads_.run([&](int r) {
      if (r == 0) times = ranks_[0].state->backend().time_breakdown();
    });
    return times;
  }

  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    std::unique_ptr<Evaluator> inner;
    threads_.run([&](int r) {
      if (r == 0) inner = make_cuda_evaluator(setup, ranks_[0].state->backend());
    });
    return std::make_unique<RankZeroEvaluator>(threads_, std::move(inner));
  }

  void store_quantized(const models::QuantizedWeight& weight, QuantizedPieces pieces) override {
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
    threads_.run([&](int r) {
      if (r != 0 || layout_.first_rank != 0) return;
      ranks_[0].state->upload_weights(host_.weights);
      if (fp8_) {
        CUDA_CHECK(cudaMemcpy(fp8_device(*ranks_[0].state), fp8_host_.data(), fp8_host_.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
      }
    });
    threads_.run([&](int r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
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

  // Every GPU holds the same masters after update(); GPU 0's are the host's. Each rank's
  // optimizer state goes to its own host view.
  // The host copies are written by download() only, except offload_optimizer's state, which lives
  // in host memory and is updated there: then a checkpoint copies it.
  bool host_views_are_live() const override { return config_.offload_optimizer; }

  void download() override {
    threads_.run([&](int r) {
      CudaRankState& state = *ranks_[static_cast<size_t>(r)].state;
      if (r == 0) state.download_trainable(host_.weights);
      if (state.optimizer()) state.optimizer()->download(state.stream());
      if (r == 0 && fp8_) {
        CUDA_CHECK(cudaMemcpyAsync(fp8_host_.data(), fp8_device(state), fp8_host_.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, state.stream()));
      }
      state.synchronize();
    });
  }

  // The micro-batch goes to its replica's ranks, each of a sequence group keeping its slice.
  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    for (const int local : window_.next_local_ranks()) {
      const int sequence = layout_.place(layout_.first_rank + local).sequence;
      ranks_[static_cast<size_t>(local)].pending.push_back(
          copy_micro_batch(plan_, plan_, inputs, sequence, layout_.sequence_size));
    }
  }

  StepMetrics measure() override {
    // Every rank's micro-batches first, collectives after: a rank that fails to enqueue stops the
    // run before any rank waits in a collective for it.
    threads_.run([&](int r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
      for (const MicroBatch& batch : rank.pending) {
        rank.state->accumulate(batch.bindings());
      }
      rank.pending.clear();
    });
    const size_t tensors = trainable_layout_.entries.size();
    threads_.run([&](int r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
      CudaRankState& state = *rank.state;
      if (layout_.shard_gradients) {
        rank.communicator->reduce_scatter_sum(state.accumulators(), shard_sizes_, state.accumulator_dtype());
        state.gradient_norm(rank.shard.first_unit, rank.shard.end_unit);
      } else {
        rank.communicator->all_reduce_sum(state.accumulators(), static_cast<size_t>(trainable_layout_.total),
                                          state.accumulator_dtype());
        state.gradient_norm(0, tensors);
      }
      rank.communicator->synchronize();
      rank.loss_sum = state.loss_sum();
      rank.aux_sum = state.router_aux_loss_sum();
    });
    window_.restart();
    StepMetrics metrics;
    std::vector<double> losses, squares, aux_losses;
    for (const Rank& rank : ranks_) {
      losses.push_back(rank.loss_sum);
      squares.push_back(static_cast<double>(rank.state->norm()) * rank.state->norm());
      aux_losses.push_back(rank.aux_sum.value_or(0.0));
    }
    metrics.loss = window_.sum_over_ranks(losses);
    if (!ranks_.empty() && ranks_.front().aux_sum) metrics.router_aux_loss = window_.sum_over_ranks(aux_losses);
    if (layout_.shard_gradients) {
      // Each rank holds its shard's sums: the norm adds every rank's squares (exactly the shard's
      // norm with one rank: a float's square is exact in double), and every rank clips by it.
      metrics.grad_norm = std::sqrt(window_.sum_over_ranks(squares));
      threads_.run([&](int r) { ranks_[static_cast<size_t>(r)].state->set_clip_factor(metrics.grad_norm); });
    } else {
      // Every rank holds the same summed gradients (NCCL gives every rank the same bits).
      metrics.grad_norm = ranks_[0].state->norm();
    }
    return metrics;
  }

  void update(const OptimizerStep& step) override {
    // fp16 loss scaling is the CPU emulation's in this build (torch_dtype: float16 is refused on CUDA).
    SUROGATE_CHECK(step.gradient_scale == 1.0, "no gradient scale on the CUDA backend");
    threads_.run([&](int r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
      CudaRankState& state = *rank.state;
      state.step(step);
      rank.communicator->all_gather(state.masters(), shard_sizes_, DType::F32);
      state.refresh_weights_from_masters(0, rank.shard.first_unit);
      state.refresh_weights_from_masters(rank.shard.end_unit, trainable_layout_.entries.size());
      state.refresh_fp8_weight_copies();
      state.zero_accumulators();
      if (fp8_) {
        rank.communicator->all_reduce_amax(fp8_device(state), fp8_host_.size());
        cuda::fp8_roll_history(fp8_device(state), fp8_->shape.sites, fp8_->shape.history, step.step, state.stream());
      }
    });
  }

  void skip_update() override {
    threads_.run([&](int r) { ranks_[static_cast<size_t>(r)].state->zero_accumulators(); });
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
      Rank& rank = ranks_[static_cast<size_t>(r)];
      rank.shard = shards[static_cast<size_t>(layout_.first_rank + r)];
      TrainingDeviceSetup rank_setup = setup;
      if (!sequence_tables_.empty()) rank_setup.cuda_ops = sequence_tables_[static_cast<size_t>(r)].get();
      rank.state = std::make_unique<CudaRankState>(rank_setup, trainable_layout_, rank.shard.first_unit, rank.shard.end_unit);
    });
    std::vector<void*> streams;
    for (const Rank& rank : ranks_) streams.push_back(rank.state->stream());
    std::unique_ptr<distributed::ProcessWorld> alone;
    distributed::ProcessWorld& world = setup.world != nullptr ? *setup.world : *(alone = distributed::ProcessWorld::single());
    std::vector<std::unique_ptr<distributed::Communicator>> communicators = distributed::connect_nccl_world(
        threads_, world, layout_.first_rank, layout_.world_size, layout_.first_device, streams);
    for (size_t r = 0; r < ranks_.size(); ++r) ranks_[r].communicator = std::move(communicators[r]);
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

  float* fp8_device(CudaRankState& state) const {
    return static_cast<float*>(state.backend().device_address(fp8_->tensor));
  }

  // Each rank's CUDA objects are released on its own thread (its device current).
  void release_ranks() noexcept {
    try {
      threads_.run([&](int r) {
        Rank& rank = ranks_[static_cast<size_t>(r)];
        rank.sequence.reset();
        rank.communicator.reset();
        rank.state.reset();
      });
    } catch (...) {
      // Shutting down after a failure: nothing more to report.
    }
  }

  // This process's ranks' optimizer state, in rank order (host views: download() first).
  std::vector<StateTensor> local_optimizer_state() {
    std::vector<StateTensor> tensors;
    for (Rank& rank : ranks_) {
      if (rank.state->optimizer() == nullptr) continue;
      for (StateTensor& tensor : rank.state->optimizer()->state_tensors()) tensors.push_back(std::move(tensor));
    }
    return tensors;
  }

  const compiler::ExecutionPlan& plan_;
  const Config& config_;
  distributed::ParallelLayout layout_;
  distributed::RankThreads threads_;
  ProcessWindow window_;
  ProcessOptimizerState optimizer_exchange_;
  CudaTrainableLayout trainable_layout_;
  CudaHostWeights host_;
  std::vector<Rank> ranks_;
  // Sequence parallelism: each rank's kernel table and the slot its exchange ops read the group from.
  std::vector<std::unique_ptr<distributed::SequenceGroupSlot>> sequence_slots_;
  std::vector<std::unique_ptr<runtime::CudaOpTable>> sequence_tables_;
  std::vector<size_t> shard_sizes_;  // the collectives' pieces (elements of the flat buffers), one per rank
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
