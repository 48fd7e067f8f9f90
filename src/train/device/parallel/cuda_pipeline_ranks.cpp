// Pipeline parallelism on GPUs, composed with data parallelism: the GPUs' ranks of the parallel
// device (parallel_device.cpp) when pipeline_parallel_size > 1 trains on the CUDA backend
// (docs/architecture.md, "Pipeline parallel"); the CPU ranks' stages (cpu_pipeline_ranks.cpp) on
// GPUs. The ranks are threads of this process (distributed/rank_threads.h); rank r runs stage s of
// replica d (distributed/parallel_layout.h) on GPU first_device + r (cuda_pipeline_stage.h), joined
// by NCCL communicators that all enqueue on the rank's training stream, in one order on every rank
// (the pipeline's transfers, then the tied pair, then the stage's gradient group), so no two NCCL
// kernels of different communicators wait for each other: the world for the stages' transfers,
// and the stage's gradient group and tied pair, placed and used as on CPU ranks
// (pipeline_stage_groups.h; ZeRO-1's weights come back through shard_publish.h).
//
// A stage rank's part of the device's step (the CPU stages' steps, on the device):
//   run_micro_batches(): its micro-batches enqueued in the rounds of distributed/pipeline_rounds.h
//     (1F1B), each backward adding the stage's bf16 parameter gradients into its accumulators.
//     A tied parameter belongs to the first stage: the last stage's accumulated gradient of it is
//     added to the first's (all-reduce over their pair). Then each stage's gradient group sums the
//     accumulators of the tensors it steps (all-reduce, or reduce-scatter under ZeRO-2), and each
//     rank takes the norm of its sums (replica 0's, or its shard's); the device adds the squares
//     and sets every rank's clip factor from the total; the loss is the last stages'.
//   step_shard() / publish_shard(): each rank steps the optimizer for its shard of its stage's
//     tensors (ZeRO-1 over the gradient group), an all-gather of the fp32 masters within the group
//     gives every replica the stage's masters (the bf16 weights rewritten from them;
//     shard_publish.h), and the first stage broadcasts the tied masters to the last, which rewrites
//     its bf16 copies from them; then the accumulators are zeroed.
//
// The host holds an fp32 copy of every parameter (weights(), trainable(); the trainable ones
// pinned): upload() writes each stage's weights and masters from them, download() reads each
// trainable tensor back from replica 0's stage that steps it. optimizer_state() is the ranks'
// shards, whose tensors carry their parameter's name, so a checkpoint holds exactly the tensors of
// a single-GPU run. The evaluator runs on GPU 0 and gathers the weights layer by layer from the
// host copies (make_cuda_gathering_evaluator, as under ZeRO-3), since no GPU holds them all.
// Refused up front by the feature-support table (config/feature_support.cpp): ranks spread over
// processes (as on CPU ranks), master_dtype: bf16 (the masters are what the stages exchange),
// recipe fp8_hybrid, offload_residual and ZeRO-3 with pipeline parallelism, offload_master /
// offload_grads with several GPUs. Its GPU test passed on 2 × H200 (2026-11-27).
#include "train/device/parallel/rank_engine.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "distributed/nccl_communicator.h"
#include "distributed/shard_placement.h"
#include "train/device/cuda_evaluator.h"
#include "train/device/cuda_pipeline_stage.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/pipeline_parameters.h"
#include "train/device/pipeline_stage_groups.h"
#include "train/device/shard_publish.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

class CudaStageEngine final : public RankEngine {
public:
  CudaStageEngine(const compiler::ExecutionPlan& source, const PipelinePlan& pipeline,
                  const distributed::ParallelLayout& layout)
      : source_(source), pipeline_(pipeline), layout_(layout) {}

  void take(std::span<const runtime::InputBinding> inputs, int sequence_index, int sequence_ranks) override {
    pending.push_back(take_stage_micro_batch(pipeline_.stages[static_cast<size_t>(stage)], source_, inputs,
                                             sequence_index, sequence_ranks));
  }
  void run_micro_batches() override {
    SUROGATE_CHECK(!pending.empty(), "every stage trains gradient_accumulation_steps micro-batches a step");
    runner->run(pending, *world, [&](int other) { return layout_.rank_at({other, replica, sequence}); });
    reduce_gradients();
  }
  RankMeasure measure() override {
    world->synchronize();  // every communicator enqueues on this stream
    pending.clear();
    CudaRankState& state = runner->state();
    const double loss = state.loss_sum();  // every stage: it also starts the next step's count
    const double norm = state.clip().norm();
    return {runner->last() ? loss : 0.0, layout_.shard_gradients || group_index == 0 ? norm * norm : 0.0};
  }
  bool has_router_aux_loss() const override { return false; }
  void set_grad_norm(double norm) override { runner->state().clip().set_from_norm(norm); }

  void step_shard(const OptimizerStep& step) override {
    SUROGATE_CHECK(step.gradient_scale == 1.0, "no gradient scale on the CUDA backend");
    runner->state().step(step);
  }
  void publish_shard() override {
    CudaRankState& state = runner->state();
    if (layout_.gradient_group_size() > 1) {
      // The replicas' stepped shards to every replica, and the bf16 weights from them.
      train::publish_shard(*group, state.masters().data() + owned_offset(), shard_sizes, DType::F32, shard,
                           layout.entries.size() - owned_first, cuda_shard_copies(state, owned_first));
    }
    // The first stage owns the tied tensors: the last takes their masters, then its bf16 copies.
    share_tied_weights(*tied_pair, tied_regions(state.masters().data(), sizeof(float)), DType::F32);
    if (stage != 0) state.masters().refresh_weights(0, owned_first, state.stream());
  }
  void finish_update(const OptimizerStep&) override { zero_gradients(); }
  void zero_gradients() override { runner->state().accumulators().zero(); }

  std::vector<StateTensor> optimizer_state() override {
    DeviceOptimizer* optimizer = runner->state().optimizer();
    return optimizer ? optimizer->state_tensors() : std::vector<StateTensor>{};
  }
  size_t gradient_accumulator_bytes() const override { return runner->state().accumulators().bytes(); }

  int stage = 0, replica = 0, sequence = 0;
  int group_index = 0;                       // in its stage's gradient group (pipeline_stage_groups.h)
  std::vector<models::ParameterSpec> specs;  // the stage's parameters (the last stage: tied ones first)
  std::vector<WeightView> weights;           // their host copies, in specs order
  std::vector<WeightView> downloads;         // the same, but the last stage's tied ones into `scratch`
  std::vector<std::vector<float>> scratch;
  CudaTrainableLayout layout;
  std::vector<size_t> tied;                  // entries shared with the other end of the pipeline
  size_t owned_first = 0;                    // the first entry the stage steps (after the last stage's tied ones)
  distributed::Shard shard;                  // over the owned entries (units relative to owned_first)
  std::vector<size_t> shard_sizes;           // the gradient group's pieces of the owned region
  std::unique_ptr<CudaPipelineStage> runner;
  std::unique_ptr<distributed::Communicator> world, group, tied_pair;
  std::vector<StageMicroBatch> pending;

private:
  // The tied entries in a flat buffer of the rank's entries (`base`, `element` bytes each).
  std::vector<CollectiveRegion> tied_regions(void* base, size_t element) const {
    std::vector<CollectiveRegion> regions;
    for (size_t index : tied) {
      const CudaTrainable& entry = layout.entries[index];
      regions.push_back({static_cast<std::byte*>(base) + static_cast<size_t>(entry.offset) * element,
                         static_cast<size_t>(entry.count)});
    }
    return regions;
  }

  // The owned tensors' start in the flat buffers (elements).
  int64_t owned_offset() const {
    return owned_first < layout.entries.size() ? layout.entries[owned_first].offset : layout.total;
  }

  // After the schedule, on the rank's stream: tied gradients summed into the first stage's, then
  // the stage's gradient group sums (ZeRO-2: reduce-scatters) the owned accumulators, and the norm
  // of what the rank counts.
  void reduce_gradients() {
    CudaRankState& state = runner->state();
    const DType dtype = state.accumulators().dtype();
    const size_t element = dtype_size_bytes(dtype);
    auto* accumulators = static_cast<std::byte*>(state.accumulators().data());
    sum_tied_gradients(*tied_pair, tied_regions(accumulators, element), dtype);
    const CollectiveRegion owned{accumulators + static_cast<size_t>(owned_offset()) * element,
                                 static_cast<size_t>(layout.total - owned_offset())};
    sum_stage_gradients(*group, owned, shard_sizes, dtype, layout_.shard_gradients);
    // ZeRO-2: the rank's shard (the whole owned run in a group of one); else every owned tensor.
    if (layout_.shard_gradients) {
      state.gradient_norm(owned_first + shard.first_unit, owned_first + shard.end_unit);
    } else {
      state.gradient_norm(owned_first, layout.entries.size());
    }
  }

  const compiler::ExecutionPlan& source_;
  const PipelinePlan& pipeline_;
  const distributed::ParallelLayout& layout_;
};

class CudaPipelineRanks final : public BackendRanks {
public:
  explicit CudaPipelineRanks(const RanksSetup& made)
      : layout_(made.layout), threads_(made.threads), source_(*made.device.plan), pipeline_(*made.device.pipeline) {
    const Config& config = *made.device.config;  // read here only
    // Refused up front by the feature-support table (config/feature_support.cpp: the pipeline over
    // processes), before any process loads.
    SUROGATE_CHECK(!layout_.spans_processes(), "a pipeline device over several processes");
    SUROGATE_CHECK(config.precision.master_dtype != MasterDtype::Bf16, "bf16 masters on a pipeline device");
    check_visible_gpus(layout_.first_device, layout_.local_ranks, config.sources.of("gpus"));
    bf16_gradients_ = config.precision.gradient_dtype == GradientDtype::Bf16;
    offload_optimizer_ = config.offload.offload_optimizer;
    optimizer_name_ = to_string(config.optimizer.algorithm);
    SUROGATE_CHECK(static_cast<int>(pipeline_.stages.size()) == layout_.pipeline_size, "one plan per stage");
    for (const PipelineStagePlan& stage : pipeline_.stages) graphs_.push_back(&stage.graph);
    const std::set<std::string> tied = tied_pipeline_parameters(pipeline_, made.device.specs);
    for (int r = 0; r < layout_.local_ranks; ++r) {
      ranks_.push_back(std::make_unique<CudaStageEngine>(source_, pipeline_, layout_));
      plan_rank(*ranks_.back(), r, made.device.specs, tied);
    }
    make_host_copies(made.device.specs);
    try {
      connect_ranks(made.device);
    } catch (...) {
      release_ranks();
      throw;
    }
  }

  ~CudaPipelineRanks() override { release_ranks(); }

  RankEngine& engine(int local_rank) override { return *ranks_[static_cast<size_t>(local_rank)]; }

  std::string description() const override {
    return fmt::format("CUDA backend, bf16 weights and activations, fp32 master weights, {} gradient accumulation, "
                       "{} state; {}: {} (GPUs {}-{}, threads of this process, NCCL)",
                       bf16_gradients_ ? "bf16" : "fp32", optimizer_name_, layout_.describe(), pipeline_.describe(),
                       layout_.first_device, layout_.first_device + layout_.local_ranks - 1);
  }
  std::span<const WeightView> weights() const override { return host_.weights; }
  std::span<const WeightView> trainable() const override { return host_.trainable; }
  bool host_views_are_live() const override { return offload_optimizer_; }
  std::optional<StateTensor> fp8_state_tensor() override { return std::nullopt; }

  // On GPU 0, from the host copies (before_evaluation brings them up to date).
  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    std::unique_ptr<Evaluator> inner;
    QuantizedPieceSource quantized;
    if (!quantized_.empty()) {
      quantized = [this](const std::string& piece) -> std::span<const std::byte> { return quantized_pieces_.at(piece); };
    }
    threads_.run([&](int r) {
      if (r == 0) inner = make_cuda_gathering_evaluator(setup, ranks_[0]->runner->state().backend(), host_.weights, quantized);
    });
    return on_rank_zero(threads_, std::move(inner));
  }
  void before_evaluation() override { download(); }

  // Written into every stage that holds the pieces (its forward plan reads them in place); kept
  // for the evaluator, which gathers them.
  void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override {
    quantized_.push_back({weight, pieces});  // kept: a copy (the caller reuses its buffers)
    const StoredQuantizedWeight& stored = quantized_.back();
    for (size_t i = 0; i < weight.pieces.size(); ++i) quantized_pieces_[weight.pieces[i]] = stored.pieces.bytes[i];
    threads_.run([&](int r) {
      CudaStageEngine& rank = *ranks_[static_cast<size_t>(r)];
      const compiler::ExecutionPlan& plan = pipeline_.stages[static_cast<size_t>(rank.stage)].training;
      if (!weight.pieces.empty() && plan.graph.find_tensor(weight.pieces.front())) {
        write_quantized(rank.runner->state().backend(), plan, weight, stored.pieces);
      }
    });
  }

  void upload() override {
    threads_.run([&](int r) {
      CudaStageEngine& rank = *ranks_[static_cast<size_t>(r)];
      CudaRankState& state = rank.runner->state();
      state.upload_weights(rank.weights);
      if (state.optimizer()) state.optimizer()->upload(state.stream());
      state.synchronize();
    });
  }
  // Pipeline stages keep whole weights (ZeRO-3 is refused with them).
  void download_weight_shards() override {}
  void download() override {
    threads_.run([&](int r) {
      CudaStageEngine& rank = *ranks_[static_cast<size_t>(r)];
      CudaRankState& state = rank.runner->state();
      if (rank.group_index == 0) state.download_trainable(rank.downloads);
      if (state.optimizer()) state.optimizer()->download(state.stream());
      state.synchronize();
    });
  }

private:
  // What a rank holds and steps, from the plans alone: its stage's parameters (the last stage's
  // tied ones first, so that the tensors it steps are one run), their layout, and its shard of the
  // stage's owned tensors over the replicas.
  void plan_rank(CudaStageEngine& rank, int r, std::span<const models::ParameterSpec> specs,
                 const std::set<std::string>& tied) {
    const distributed::RankPlace place = layout_.place(layout_.first_rank + r);
    rank.stage = place.stage;
    rank.replica = place.replica;
    rank.sequence = place.sequence;
    rank.group_index = stage_group_index(layout_, place);
    const PipelineStagePlan& plan = pipeline_.stages[static_cast<size_t>(rank.stage)];
    rank.specs = stage_parameter_specs(plan, specs, rank.stage == 0 ? std::set<std::string>{} : tied);
    rank.layout = cuda_trainable_layout(plan.training, rank.specs);
    for (size_t i = 0; i < rank.layout.entries.size(); ++i) {
      if (tied.contains(rank.specs[rank.layout.entries[i].weight].name)) rank.tied.push_back(i);
    }
    rank.owned_first = rank.stage == 0 ? 0 : rank.tied.size();
    const std::vector<size_t> units = rank.layout.unit_sizes();
    const std::vector<distributed::Shard> shards = distributed::place_shards(
        std::span<const size_t>(units).subspan(rank.owned_first), layout_.gradient_group_size());
    rank.shard = shards[static_cast<size_t>(rank.group_index)];
    rank.shard_sizes = distributed::shard_sizes(shards);
  }

  // Host copies of every parameter; each rank's views of its stage's, in its specs' order.
  void make_host_copies(std::span<const models::ParameterSpec> specs) {
    std::set<std::string> trainable;
    for (const auto& rank : ranks_) {
      for (const CudaTrainable& entry : rank->layout.entries) trainable.insert(rank->specs[entry.weight].name);
    }
    CudaTrainableLayout whole;  // only which specs are trainable matters to cuda_host_weights
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < specs.size(); ++i) {
      index[specs[i].name] = i;
      if (trainable.contains(specs[i].name)) whole.entries.push_back({i, graph::kNoTensor, graph::kNoTensor, 0, 0});
    }
    host_ = cuda_host_weights(specs, whole);
    for (auto& rank : ranks_) {
      for (size_t i = 0; i < rank->specs.size(); ++i) {
        const WeightView& host = host_.weights[index.at(rank->specs[i].name)];
        rank->weights.push_back(host);
        rank->downloads.push_back(host);
      }
      for (size_t entry : rank->stage == 0 ? std::vector<size_t>{} : rank->tied) {
        // The first stage's copy is the one the host reads.
        const size_t weight = rank->layout.entries[entry].weight;
        rank->scratch.emplace_back(rank->downloads[weight].values.size());
        rank->downloads[weight].values = rank->scratch.back();
      }
    }
  }

  // Every rank's stage first (no collective yet, so a rank that fails here, e.g. out of memory,
  // stops the run with its message), then the NCCL communicators on the ranks' training streams.
  void connect_ranks(const TrainingDeviceSetup& setup) {
    threads_.run([&](int r) {
      CUDA_CHECK(cudaSetDevice(layout_.first_device + r));
      CudaStageEngine& rank = *ranks_[static_cast<size_t>(r)];
      const PipelineStagePlan& plan = pipeline_.stages[static_cast<size_t>(rank.stage)];
      TrainingDeviceSetup stage_setup = setup;
      stage_setup.plan = &plan.training;
      stage_setup.specs = rank.specs;
      stage_setup.pipeline = nullptr;
      rank.runner = std::make_unique<CudaPipelineStage>(stage_setup, plan, rank.layout,
                                                        rank.owned_first + rank.shard.first_unit,
                                                        rank.owned_first + rank.shard.end_unit, graphs_);
      rank.runner->prepare(pipeline_.micro_batches);
      CUDA_CHECK(cudaDeviceSynchronize());
    });
    std::vector<void*> streams;
    for (const auto& rank : ranks_) streams.push_back(rank->runner->state().stream());
    std::unique_ptr<distributed::ProcessWorld> alone = distributed::ProcessWorld::single();
    auto world = distributed::connect_nccl_world(threads_, *alone, 0, layout_.world_size, layout_.first_device, streams);
    auto groups = distributed::connect_nccl_groups(threads_, *alone, 0, layout_.world_size, layout_.first_device, streams,
                                                   [&](int rank) { return stage_gradient_group(layout_, rank); });
    const bool tied = std::any_of(ranks_.begin(), ranks_.end(), [](const auto& rank) { return !rank->tied.empty(); });
    auto pairs = distributed::connect_nccl_groups(threads_, *alone, 0, layout_.world_size, layout_.first_device, streams,
                                                  [&](int rank) { return tied_pair_group(layout_, rank, tied); });
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r]->world = std::move(world[r]);
      ranks_[r]->group = std::move(groups[r]);
      ranks_[r]->tied_pair = std::move(pairs[r]);
    }
  }

  // Each rank's CUDA objects are released on its own thread (its device current).
  void release_ranks() noexcept {
    try {
      threads_.run([&](int r) {
        CudaStageEngine& rank = *ranks_[static_cast<size_t>(r)];
        rank.tied_pair.reset();
        rank.group.reset();
        rank.world.reset();
        rank.runner.reset();
      });
    } catch (...) {
      // Shutting down after a failure: nothing more to report.
    }
  }

  distributed::ParallelLayout layout_;
  distributed::RankThreads& threads_;
  const compiler::ExecutionPlan& source_;
  const PipelinePlan& pipeline_;
  std::vector<const distributed::StageGraph*> graphs_;
  std::vector<std::unique_ptr<CudaStageEngine>> ranks_;
  CudaHostWeights host_;
  std::vector<StoredQuantizedWeight> quantized_;
  std::map<std::string, std::span<const std::byte>> quantized_pieces_;
  bool bf16_gradients_ = false, offload_optimizer_ = false;
  std::string optimizer_name_;
};

}  // namespace

std::unique_ptr<BackendRanks> make_cuda_pipeline_ranks(const RanksSetup& setup) { return std::make_unique<CudaPipelineRanks>(setup); }

}  // namespace surogate::train
