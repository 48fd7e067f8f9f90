// The GPUs' ranks of the parallel device for data parallelism (parallel_device.cpp says the step's algorithm):
// the device for `gpus: N` on the CUDA backend, or ranks spread over processes. This process's ranks
// are threads (rank_threads.h), local rank l on GPU first_device + l with a CudaRankState (its
// backend, flat fp32 masters and gradient accumulators, optimizer) under a CudaRank and a
// CudaReplicaRunner (cuda_rank.h; this file is their host side), joined by NCCL with every
// collective on the rank's backend stream, so compute and communication stay in order without host
// waits; the host waits through the communicator, which fails with a message instead of hanging
// when another rank stopped. A rank makes no call that may wait for the device (allocation, pinned
// memory) between entering a task and enqueuing its collectives (NCCL's rule for several GPUs
// driven from one process).
//
// Replica reduction on a GPU rank:
//   ZeRO-1: every micro-batch's bf16 gradients are added into the flat accumulators, and the
//     accumulators are summed over the ranks in place, in their dtype (fp32, or bf16 with
//     gradient_dtype bf16), bucket by bucket during the last micro-batch's backward
//     (cuda_gradient_reducer.h: each bucket's gradients added and all-reduced on the rank's side
//     stream as soon as the backward has written them). The norm and clip factor come from the
//     summed buffer (global_grad_norm on the device). After the step an NCCL all-gather of the flat
//     fp32 masters gives every rank every shard's masters, and each rank rewrites the bf16 weights
//     of the other shards from them (round to nearest even, as the optimizer kernels do, so every
//     rank holds the same bits; shard_publish.h).
//   ZeRO-2 (layout.shard_gradients): every micro-batch's buckets are reduce-scattered on the side
//     stream as the backward completes them, and each rank adds its piece into accumulators of its
//     shard only (cuda_sharded_gradients.h: two bucket-sized staging slots instead of full-size
//     accumulators); each rank takes its shard's norm, the host adds the squares and every rank's
//     device clip factor is set from the total.
//   ZeRO-3 (layout.shard_weights): the plan runs with the weights in gather buffers
//     (compiler/weight_gathering.h, weight_shards.h); the rank keeps its bf16 pieces (CudaWeightShard)
//     and its shard's fp32 masters, and its gatherer (cuda_weight_gatherer.h) fills the buffers on
//     the side stream one use ahead; a quantized base likewise (cuda_quantized_base.h). Gradients
//     as in ZeRO-2; no weights move after the step; upload() / download_weight_shards() broadcast
//     tensor by tensor between the owners and rank 0's host copies, which the (gathering) evaluator
//     reads. With an observer the backend runs eagerly: ZeRO-2 and ZeRO-3 give up CUDA graphs, and
//     ZeRO-1 keeps them for all but each step's last micro-batch.
//
// Sequence parallelism (layout.sequence_size > 1): each rank runs a sequence slice's plan whose
// exchange ops are the group's NCCL all-to-all (distributed/sequence_exchange_cuda.h) on the
// compute stream; ZeRO shards over every rank of the world, and ZeRO-3's gathers and the bucket
// reductions stay on the side stream's world communicator, each communicator's collectives
// enqueued in plan order on every rank (docs/architecture.md, "ZeRO-3"). fp8_hybrid: the ranks'
// scaling states are max-reduced before each roll, so every GPU quantizes as one GPU would. The
// host side is rank 0's (weights(), trainable(), the evaluator). master_dtype bf16 is rejected with
// several GPUs (config/feature_support.cpp).
#include "train/device/parallel/cuda_rank.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/replica_rank_engine.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/fp8_quantize.h"
#include "distributed/nccl_communicator.h"
#include "distributed/shard_placement.h"
#include "train/device/cuda_evaluator.h"
#include "train/device/cuda_gradient_reducer.h"
#include "train/device/cuda_quantized_base.h"
#include "train/device/cuda_rank/output_readback.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/cuda_sequence_groups.h"
#include "train/device/cuda_sharded_gradients.h"
#include "train/device/cuda_weight_gatherer.h"
#include "train/device/cuda_weight_transfer.h"
#include "train/device/fp8_state.h"
#include "train/device/shard_publish.h"
#include "train/device/weight_shards.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

float* fp8_device(const Fp8State& fp8, CudaRankState& state) {
  return static_cast<float*>(state.backend().device_address(fp8.tensor));
}

// One replica rank: its runner (which owns its CudaRankState) and its CudaRank (owned by its engine).
struct CudaReplica {
  CudaReplicaRunner* runner = nullptr;
  CudaRank* rank = nullptr;
  CudaRankState& state() const { return *runner->state; }
};

class CudaDataParallelRanks final : public BackendRanks {
public:
  explicit CudaDataParallelRanks(const RanksSetup& made)
      : layout_(made.layout), threads_(made.threads), plan_(*made.device.plan),
        trainable_layout_(cuda_trainable_layout(plan_, made.device.specs)), sequence_groups_(layout_) {
    const TrainingDeviceSetup& setup = made.device;
    const Config& config = *setup.config;  // read here only
    // Refused up front by the feature-support table (config/feature_support.cpp: the data-parallel
    // device with bf16 masters, offload_master or offload_grads), before anything loads.
    SUROGATE_CHECK(config.precision.master_dtype != MasterDtype::Bf16 && !config.offload.offload_master && !config.offload.offload_grads,
                   "an option the feature-support table refuses on the data-parallel device");
    check_visible_gpus(layout_.first_device, layout_.local_ranks, config.sources.of("gpus"));
    bf16_gradients_ = config.precision.gradient_dtype == GradientDtype::Bf16;
    optimizer_name_ = to_string(config.optimizer.algorithm);
    time_breakdown_ = config.logging.debug_time_breakdown;
    offload_optimizer_ = config.offload.offload_optimizer;
    replica_.plan = &plan_;
    replica_.shard_gradients = layout_.shard_gradients;
    replica_.units = trainable_layout_.entries.size();
    max_micro_batches_ = std::max<int64_t>(1, config.schedule.gradient_accumulation_steps);
    host_ = cuda_host_weights(setup.specs, trainable_layout_);  // rank 0's host copies
    const std::vector<size_t> sizes = trainable_layout_.unit_sizes();
    const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, layout_.world_size);
    replica_.shard_sizes = distributed::shard_sizes(shards);
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
      quantized_base_.emplace(*gathered_plan_, quantized_base_keeping(config.offload), layout_.world_size,
                              layout_.first_rank, layout_.local_ranks);
    }
    replica_.rank_plan = gathered_plan_ ? &*gathered_plan_ : &plan_;
    const size_t accumulator_bytes = bf16_gradients_ ? 2 : sizeof(float);
    buckets_ = plan_gradient_buckets(*replica_.rank_plan, gradients, sizes, shards,
                                     std::max<size_t>(1, setup.gradient_bucket_bytes / accumulator_bytes),
                                     layout_.shard_gradients);
    for (int r = 0; r < layout_.local_ranks; ++r) {
      auto engine = std::make_unique<ReplicaRankEngine>(replica_, layout_.first_rank + r);
      auto runner = std::make_unique<CudaReplicaRunner>(*replica_.rank_plan, max_micro_batches_, layout_.shard_gradients);
      auto rank = std::make_unique<CudaRank>(trainable_layout_, 0, !layout_.shard_gradients);
      replicas_.push_back({runner.get(), rank.get()});
      engine->runner = std::move(runner);
      engine->rank = std::move(rank);
      ranks_.push_back(std::move(engine));
    }
    try {
      connect_ranks(setup, shards);
    } catch (...) {
      release_ranks();
      throw;
    }
    if ((replica_.fp8 = fp8_state(plan_))) fp8_host_.assign(static_cast<size_t>(replica_.fp8->shape.floats()), 0.0f);
  }

  ~CudaDataParallelRanks() override { release_ranks(); }

  RankEngine& engine(int local_rank) override { return *ranks_[static_cast<size_t>(local_rank)]; }

  std::string description() const override {
    return fmt::format("CUDA backend, bf16 weights and activations, fp32 master weights, {} gradient accumulation, "
                       "{} state; {} (GPUs {}-{}, threads of this process, NCCL)",
                       bf16_gradients_ ? "bf16" : "fp32", optimizer_name_,
                       layout_.several_ranks() ? layout_.describe() : "a data-parallel world of one",
                       layout_.first_device, layout_.first_device + layout_.local_ranks - 1);
  }
  std::span<const WeightView> weights() const override { return host_.weights; }
  std::span<const WeightView> trainable() const override { return host_.trainable; }
  // The host copies are written by download() only, except offload_optimizer's state, which lives
  // in host memory and is updated there: then a checkpoint copies it.
  bool host_views_are_live() const override { return offload_optimizer_; }
  // The same on every GPU after each step's all-reduce; its host copy is rank 0's.
  std::optional<StateTensor> fp8_state_tensor() override {
    if (!replica_.fp8) return std::nullopt;
    return replica_.fp8->state_tensor(fp8_host_.data());
  }

  std::vector<std::pair<std::string, double>> time_breakdown() override {
    if (!time_breakdown_) return {};
    std::vector<std::pair<std::string, double>> times;
    threads_.run([&](int r) {
      if (r == 0) times = replicas_[0].state().backend().time_breakdown();
    });
    return times;
  }

  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    std::unique_ptr<Evaluator> inner;
    threads_.run([&](int r) {
      if (r != 0) return;
      // ZeRO-3: no GPU keeps the whole weights; the evaluator gathers them from the host copies.
      inner = gathered_plan_ ? make_cuda_gathering_evaluator(setup, replicas_[0].state().backend(), host_.weights,
                                                             quantized_pieces())
                             : make_cuda_evaluator(setup, replicas_[0].state().backend());
    });
    return on_rank_zero(threads_, std::move(inner));
  }

  void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override {
    if (quantized_base_ && quantized_base_->gathered()) {
      threads_.run([&](int r) { quantized_base_->keep(r, weight, pieces); });  // ZeRO-3: shared out, or the image
      return;
    }
    threads_.run([&](int r) { write_quantized(replicas_[static_cast<size_t>(r)].state().backend(), plan_, weight, pieces); });
  }

  // Rank 0's GPU gets the host copies; every other GPU receives its bf16 weights (frozen ones
  // included) and fp32 masters. Each rank's optimizer state comes from its own host view.
  // Rank 0's upload is done before any rank enqueues a broadcast: its pinned staging memory is
  // allocated and freed on the way, and a rank must not make such calls (which may wait for
  // every GPU) while a peer's collective waits for it.
  void upload() override {
    if (gathered_plan_) {
      upload_shards();
      return;
    }
    threads_.run([&](int r) {
      if (r != 0 || layout_.first_rank != 0) return;
      replicas_[0].state().upload_weights(host_.weights);
      upload_fp8_state();
    });
    threads_.run([&](int r) {
      CudaRankState& state = replicas_[static_cast<size_t>(r)].state();
      distributed::Communicator& world = *ranks_[static_cast<size_t>(r)]->world;
      for (size_t i = 0; i < host_.weights.size(); ++i) {
        world.broadcast(state.backend().device_address(trainable_layout_.ids[i]),
                                     host_.weights[i].values.size(), DType::BF16, 0);
      }
      world.broadcast(state.masters().data(), static_cast<size_t>(trainable_layout_.total), DType::F32, 0);
      finish_upload(r);
    });
  }

  // ZeRO-3: the trainable weights' masters into the host copies, each from its owner.
  void download_weight_shards() override {
    threads_.run([&](int r) {
      train::download_weight_shards(transfer(r), trainable_layout_, host_.weights);
      ranks_[static_cast<size_t>(r)]->world->synchronize();
    });
  }

  // Every GPU holds the same masters after a step; GPU 0's are the host's (ZeRO-3: each trainable
  // tensor's from its owner, download_weight_shards). Each rank's optimizer state goes to its own
  // host view.
  void download() override {
    threads_.run([&](int r) {
      CudaRankState& state = replicas_[static_cast<size_t>(r)].state();
      if (r == 0 && !gathered_plan_) state.download_trainable(host_.weights);
      if (state.optimizer()) state.optimizer()->download(state.stream());
      if (r == 0 && replica_.fp8) {
        CUDA_CHECK(cudaMemcpyAsync(fp8_host_.data(), fp8_device(*replica_.fp8, state), fp8_host_.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, state.stream()));
      }
      state.synchronize();
    });
  }
  bool replicas_hold_weights() const override { return !gathered_plan_ && layout_.sequence_size == 1; }
  // The publish and the FP8 copies were only enqueued on the rank's streams.
  const runtime::Backend& replica_weights(int local_rank) override {
    const CudaReplica& replica = replicas_[static_cast<size_t>(local_rank)];
    if (replica.rank->side) replica.rank->side->synchronize();
    replica.state().synchronize();
    return replica.state().backend();
  }

private:
  // Every rank's state first (no collective yet, so a rank that fails here, e.g. out of memory,
  // stops the run with its message), then the NCCL world on the ranks' streams.
  void connect_ranks(const TrainingDeviceSetup& setup, const std::vector<distributed::Shard>& shards) {
    threads_.run([&](int r) {
      CUDA_CHECK(cudaSetDevice(layout_.first_device + r));
      CudaRank& rank = *replicas_[static_cast<size_t>(r)].rank;
      const int global = layout_.first_rank + r;
      const distributed::Shard& shard = ranks_[static_cast<size_t>(r)]->shard = shards[static_cast<size_t>(global)];
      TrainingDeviceSetup rank_setup = setup;
      if (gathered_plan_) rank_setup.plan = &*gathered_plan_;
      if (const runtime::CudaOpTable* table = sequence_groups_.table(r)) rank_setup.cuda_ops = table;
      if (gathered_plan_) {
        rank.owned = cuda::DeviceBuffer<__nv_bfloat16>(gathering_.owned_elements[static_cast<size_t>(global)]);
        rank.owned.zero();
        rank.weight_shard = {&gathering_, global, rank.owned.data()};
        rank.scratch = cuda::DeviceBuffer<float>(kTransferChunkElements);
        quantized_base_->allocate(r);
      }
      std::unique_ptr<CudaRankState>& state = replicas_[static_cast<size_t>(r)].runner->state;
      state = std::make_unique<CudaRankState>(rank_setup, trainable_layout_, shard.first_unit, shard.end_unit,
                                              gathered_plan_ ? &rank.weight_shard : nullptr, layout_.shard_gradients);
      rank.attach(*state);
      rank.side.emplace();
      CUDA_CHECK(cudaDeviceSynchronize());  // the owned buffer zeroed before anything reads it
    });
    std::vector<void*> streams, sides;
    for (const CudaReplica& replica : replicas_) {
      streams.push_back(replica.state().stream());
      sides.push_back(replica.rank->side->get());
    }
    std::unique_ptr<distributed::ProcessWorld> alone;
    distributed::ProcessWorld& world = setup.world != nullptr ? *setup.world : *(alone = distributed::ProcessWorld::single());
    std::vector<std::unique_ptr<distributed::Communicator>> communicators = distributed::connect_nccl_world(
        threads_, world, layout_.first_rank, layout_.world_size, layout_.first_device, streams);
    std::vector<std::unique_ptr<distributed::Communicator>> side_communicators = distributed::connect_nccl_world(
        threads_, world, layout_.first_rank, layout_.world_size, layout_.first_device, sides);
    threads_.run([&](int r) {
      ranks_[static_cast<size_t>(r)]->world = std::move(communicators[static_cast<size_t>(r)]);
      replicas_[static_cast<size_t>(r)].rank->side_communicator = std::move(side_communicators[static_cast<size_t>(r)]);
      set_up_reduction(*ranks_[static_cast<size_t>(r)], replicas_[static_cast<size_t>(r)], r);
    });
    sequence_groups_.connect(threads_, world, layout_, streams, "sequence");
  }

  // ZeRO-3's gatherers, and the replica reduction (the step observers of each micro-batch).
  void set_up_reduction(ReplicaRankEngine& engine, const CudaReplica& replica, int r) {
    CudaRank& rank = *replica.rank;
    if (gathered_plan_) {
      rank.gatherer = std::make_unique<CudaWeightGatherer>(gathering_, replica.state().backend(), rank.side->get(),
                                                           all_gather_fill(rank.weight_shard, *rank.side_communicator));
      engine.first_batches.add(rank.gatherer.get());
      engine.last_batch.add(rank.gatherer.get());
      if (quantized_base_->gathered()) {
        rank.quantized_gatherer = std::make_unique<CudaWeightGatherer>(
            quantized_base_->gathering(), replica.state().backend(), rank.side->get(),
            quantized_base_->fill(r, *rank.side_communicator));
        engine.first_batches.add(rank.quantized_gatherer.get());
        engine.last_batch.add(rank.quantized_gatherer.get());
      }
    }
    if (layout_.shard_gradients) {
      rank.sharded = std::make_unique<CudaShardedGradients>(buckets_, trainable_layout_, replica.state(), engine.shard,
                                                            rank.side->get(), *rank.side_communicator);
      engine.first_batches.add(rank.sharded.get());
      engine.last_batch.add(rank.sharded.get());
    } else {
      rank.reducer = std::make_unique<CudaGradientReducer>(buckets_, replica.state(), rank.side->get(),
                                                           *rank.side_communicator);
      engine.last_batch.add(rank.reducer.get());
    }
  }

  // Rank 0 (of the world): fp8_hybrid's scaling state from its host copy.
  void upload_fp8_state() {
    if (!replica_.fp8) return;
    CUDA_CHECK(cudaMemcpy(fp8_device(*replica_.fp8, replicas_[0].state()), fp8_host_.data(),
                          fp8_host_.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  // Every rank, after its weights: the scaling state from rank 0, the FP8 copies, the optimizer state.
  void finish_upload(int r) {
    CudaRankState& state = replicas_[static_cast<size_t>(r)].state();
    distributed::Communicator& world = *ranks_[static_cast<size_t>(r)]->world;
    if (replica_.fp8) world.broadcast(fp8_device(*replica_.fp8, state), fp8_host_.size(), DType::F32, 0);
    state.refresh_fp8_weight_copies();
    if (state.optimizer()) state.optimizer()->upload(state.stream());
    world.synchronize();
  }

  // ZeRO-3 (cuda_weight_transfer.h): rank 0 writes fp8_hybrid's scaling state first (as upload()
  // does otherwise), then every weight reaches its owner.
  void upload_shards() {
    threads_.run([&](int r) {
      if (r == 0 && layout_.first_rank == 0) upload_fp8_state();
    });
    threads_.run([&](int r) {
      upload_weight_shards(transfer(r), trainable_layout_, host_.weights);
      finish_upload(r);
    });
  }

  // ZeRO-3 with the quantized base gathered: where the evaluator reads it from (host memory).
  QuantizedPieceSource quantized_pieces() const {
    if (!quantized_base_ || !quantized_base_->gathered()) return {};
    return [this](const std::string& name) { return quantized_base_->host_piece(name); };
  }

  CudaShardTransfer transfer(int r) {
    const CudaReplica& replica = replicas_[static_cast<size_t>(r)];
    return {replica.state(), *ranks_[static_cast<size_t>(r)]->world, replica.rank->weight_shard,
            replica.rank->scratch.data(), r == 0};
  }

  // Each rank's CUDA objects are released on its own thread (its device current).
  void release_ranks() noexcept {
    try {
      threads_.run([&](int r) {
        CudaRank& rank = *replicas_[static_cast<size_t>(r)].rank;
        if (rank.side) rank.side->synchronize();
        rank.gatherer.reset();
        rank.quantized_gatherer.reset();
        if (quantized_base_) quantized_base_->release(r);
        rank.reducer.reset();
        rank.sharded.reset();
        rank.side_communicator.reset();
        sequence_groups_.release(r);
        ranks_[static_cast<size_t>(r)]->world.reset();
        replicas_[static_cast<size_t>(r)].runner->state.reset();
        rank.side.reset();
        rank.owned = {};
        rank.scratch = {};
      });
    } catch (...) {
      // Shutting down after a failure: nothing more to report.
    }
  }

  distributed::ParallelLayout layout_;
  distributed::RankThreads& threads_;
  const compiler::ExecutionPlan& plan_;
  CudaTrainableLayout trainable_layout_;
  ReplicaShared replica_;
  CudaHostWeights host_;
  std::vector<std::unique_ptr<ReplicaRankEngine>> ranks_;
  std::vector<CudaReplica> replicas_;  // each rank's runner and rank (owned by its engine)
  CudaSequenceGroups sequence_groups_;  // sequence parallelism: each rank's kernel table and group
  GradientBuckets buckets_;
  std::optional<compiler::ExecutionPlan> gathered_plan_;  // ZeRO-3: the ranks' plan (weights in gather buffers)
  compiler::WeightGathering gathering_;
  std::optional<CudaQuantizedBase> quantized_base_;  // ZeRO-3: where the quantized base stays (persistent_quants)
  std::vector<float> fp8_host_;  // rank 0's host copy of the fp8 state: zeros at the start, what checkpoints read
  int64_t max_micro_batches_ = 1;  // a rank's in one step: gradient_accumulation_steps
  bool bf16_gradients_ = false, time_breakdown_ = false, offload_optimizer_ = false;
  std::string optimizer_name_;
};

}  // namespace

std::unique_ptr<BackendRanks> make_cuda_data_parallel_ranks(const RanksSetup& setup) { return std::make_unique<CudaDataParallelRanks>(setup); }

}  // namespace surogate::train
