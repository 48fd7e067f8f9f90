// Pipeline parallelism on GPUs, composed with data and sequence parallelism: the GPUs' ranks of the
// parallel device (parallel_device.cpp) when pipeline_parallel_size > 1 trains on the CUDA backend
// (docs/architecture.md, "Pipeline parallel"); the CPU ranks' stages (cpu_pipeline_ranks.cpp) on
// GPUs. The ranks are threads of this process (distributed/rank_threads.h); rank r runs stage s of
// replica d at sequence index q (distributed/parallel_layout.h) on GPU first_device + r
// (cuda_pipeline_stage.h; with sequence parallelism its training and forward plans exchange over
// two sequence groups, one per stream: cuda_sequence_groups.h), joined
// by NCCL communicators that all enqueue on the rank's training stream, in one order on every rank
// (the pipeline's transfers, then the tied pair, then the stage's gradient group), so no two NCCL
// kernels of different communicators wait for each other: the world for the stages' transfers,
// and the stage's gradient group and tied pair, placed and used as on CPU ranks
// (pipeline_stage_groups.h; ZeRO-1's weights come back through shard_publish.h).
//
// A stage rank's part of the device's step is the stage strategy's (stage_ranks.h), written once
// for CPU and GPU ranks; it drives here a CudaRank (cuda_rank.h) and a CudaStageRunner: its
// micro-batches enqueued in the
// rounds of distributed/pipeline_rounds.h (1F1B), each backward adding the stage's bf16 parameter
// gradients into the flat accumulators, which the tied pair and the gradient group sum in place
// (in their dtype); the norm is taken on the device; ZeRO-1's all-gather carries the fp32 masters
// (the bf16 weights rewritten from them, shard_publish.h), and the last stage rewrites its bf16
// copies of the tied tensors from the masters the first stage sends.
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
#include "train/device/parallel/cuda_rank.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/stage_ranks.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
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
#include "train/device/cuda_sequence_groups.h"
#include "train/device/pipeline_parameters.h"
#include "train/device/pipeline_stage_groups.h"
#include "train/device/shard_publish.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

// What the host side keeps of one stage rank: its parameters and their host copies, the layout of
// its CudaRankState (the last stage's tied tensors first, so that the owned ones are one run), its
// runner and its CudaRank (both owned by its engine).
struct CudaStage {
  std::vector<models::ParameterSpec> specs;  // the stage's parameters (the last stage: tied ones first)
  std::vector<WeightView> weights;           // their host copies, in specs order
  std::vector<WeightView> downloads;         // the same, but the last stage's tied ones into `scratch`
  std::vector<std::vector<float>> scratch;
  CudaTrainableLayout layout;
  size_t owned_first = 0;  // the first entry the stage steps (after the last stage's tied ones)
  CudaStageRunner* runner = nullptr;
  CudaRank* rank = nullptr;
};

class CudaPipelineRanks final : public BackendRanks {
public:
  explicit CudaPipelineRanks(const RanksSetup& made)
      : layout_(made.layout), threads_(made.threads), source_(*made.device.plan), pipeline_(*made.device.pipeline),
        training_sequence_(layout_), forward_sequence_(layout_) {
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
      ranks_.push_back(std::make_unique<StageRankEngine>(layout_, r));
      stages_.push_back(plan_rank(*ranks_.back(), made.device.specs, tied));
      stages_.back()->rank = static_cast<CudaRank*>(ranks_.back()->rank.get());
      stages_.back()->runner = static_cast<CudaStageRunner*>(ranks_.back()->runner.get());
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
      if (r == 0) inner = make_cuda_gathering_evaluator(setup, stages_[0]->rank->state().backend(), host_.weights, quantized);
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
      CudaStage& stage = *stages_[static_cast<size_t>(r)];
      const compiler::ExecutionPlan& plan = pipeline_.stages[static_cast<size_t>(ranks_[static_cast<size_t>(r)]->place.stage)].training;
      if (!weight.pieces.empty() && plan.graph.find_tensor(weight.pieces.front())) {
        write_quantized(stage.rank->state().backend(), plan, weight, stored.pieces);
      }
    });
  }

  void upload() override {
    threads_.run([&](int r) {
      CudaStage& stage = *stages_[static_cast<size_t>(r)];
      CudaRankState& state = stage.rank->state();
      state.upload_weights(stage.weights);
      if (state.optimizer()) state.optimizer()->upload(state.stream());
      state.synchronize();
    });
  }
  // Pipeline stages keep whole weights (ZeRO-3 is refused with them).
  void download_weight_shards() override {}
  void download() override {
    threads_.run([&](int r) {
      CudaStage& stage = *stages_[static_cast<size_t>(r)];
      CudaRankState& state = stage.rank->state();
      if (ranks_[static_cast<size_t>(r)]->group_index == 0) state.download_trainable(stage.downloads);
      if (state.optimizer()) state.optimizer()->download(state.stream());
      state.synchronize();
    });
  }

private:
  // What a rank holds and steps, from the plans alone: its stage's parameters (the last stage's
  // tied ones first, so that the tensors it steps are one run), their layout, and its shard of the
  // stage's owned tensors over the replicas.
  std::unique_ptr<CudaStage> plan_rank(StageRankEngine& engine, std::span<const models::ParameterSpec> specs,
                                       const std::set<std::string>& tied) {
    const int stage_index = engine.place.stage;
    const PipelineStagePlan& plan = pipeline_.stages[static_cast<size_t>(stage_index)];
    auto stage = std::make_unique<CudaStage>();
    stage->specs = stage_parameter_specs(plan, specs, stage_index == 0 ? std::set<std::string>{} : tied);
    stage->layout = cuda_trainable_layout(plan.training, stage->specs);
    std::vector<size_t> tied_entries;
    for (size_t i = 0; i < stage->layout.entries.size(); ++i) {
      if (tied.contains(stage->specs[stage->layout.entries[i].weight].name)) tied_entries.push_back(i);
    }
    stage->owned_first = stage_index == 0 ? 0 : tied_entries.size();
    const std::vector<size_t> units = stage->layout.unit_sizes();
    engine.place_shard(std::span<const size_t>(units).subspan(stage->owned_first));
    engine.runner = std::make_unique<CudaStageRunner>(source_, plan, stage_index, stage->owned_first);
    auto rank = std::make_unique<CudaRank>(stage->layout, stage->owned_first, false);
    rank->tied = std::move(tied_entries);
    engine.rank = std::move(rank);
    return stage;
  }

  // Host copies of every parameter; each rank's views of its stage's, in its specs' order.
  void make_host_copies(std::span<const models::ParameterSpec> specs) {
    std::set<std::string> trainable;
    for (const std::unique_ptr<CudaStage>& stage : stages_) {
      for (const CudaTrainable& entry : stage->layout.entries) trainable.insert(stage->specs[entry.weight].name);
    }
    CudaTrainableLayout whole;  // only which specs are trainable matters to cuda_host_weights
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < specs.size(); ++i) {
      index[specs[i].name] = i;
      if (trainable.contains(specs[i].name)) whole.entries.push_back({i, graph::kNoTensor, graph::kNoTensor, 0, 0});
    }
    host_ = cuda_host_weights(specs, whole);
    for (size_t r = 0; r < stages_.size(); ++r) {
      CudaStage& stage = *stages_[r];
      for (size_t i = 0; i < stage.specs.size(); ++i) {
        const WeightView& host = host_.weights[index.at(stage.specs[i].name)];
        stage.weights.push_back(host);
        stage.downloads.push_back(host);
      }
      for (size_t entry : ranks_[r]->place.stage == 0 ? std::vector<size_t>{} : stage.rank->tied) {
        // The first stage's copy is the one the host reads.
        const size_t weight = stage.layout.entries[entry].weight;
        stage.scratch.emplace_back(stage.downloads[weight].values.size());
        stage.downloads[weight].values = stage.scratch.back();
      }
    }
  }

  // Every rank's stage first (no collective yet, so a rank that fails here, e.g. out of memory,
  // stops the run with its message), then the NCCL communicators on the ranks' training streams.
  void connect_ranks(const TrainingDeviceSetup& setup) {
    threads_.run([&](int r) {
      CUDA_CHECK(cudaSetDevice(layout_.first_device + r));
      const StageRankEngine& rank = *ranks_[static_cast<size_t>(r)];
      CudaStage& stage = *stages_[static_cast<size_t>(r)];
      const PipelineStagePlan& plan = pipeline_.stages[static_cast<size_t>(rank.place.stage)];
      TrainingDeviceSetup stage_setup = setup;
      stage_setup.plan = &plan.training;
      stage_setup.specs = stage.specs;
      stage_setup.pipeline = nullptr;
      if (const runtime::CudaOpTable* table = training_sequence_.table(r)) stage_setup.cuda_ops = table;
      stage.runner->stage = std::make_unique<CudaPipelineStage>(stage_setup, plan, stage.layout,
                                                                stage.owned_first + rank.shard.first_unit,
                                                                stage.owned_first + rank.shard.end_unit, graphs_,
                                                                forward_sequence_.table(r));
      stage.rank->attach(stage.runner->stage->state());
      stage.runner->stage->prepare(pipeline_.micro_batches);
      CUDA_CHECK(cudaDeviceSynchronize());
    });
    std::vector<void*> streams;
    for (const std::unique_ptr<CudaStage>& stage : stages_) streams.push_back(stage->rank->state().stream());
    std::unique_ptr<distributed::ProcessWorld> alone = distributed::ProcessWorld::single();
    auto world = distributed::connect_nccl_world(threads_, *alone, 0, layout_.world_size, layout_.first_device, streams);
    auto groups = distributed::connect_nccl_groups(threads_, *alone, 0, layout_.world_size, layout_.first_device, streams,
                                                   [&](int rank) { return stage_gradient_group(layout_, rank); });
    const bool tied = std::any_of(stages_.begin(), stages_.end(),
                                  [](const std::unique_ptr<CudaStage>& stage) { return !stage->rank->tied.empty(); });
    auto pairs = distributed::connect_nccl_groups(threads_, *alone, 0, layout_.world_size, layout_.first_device, streams,
                                                  [&](int rank) { return tied_pair_group(layout_, rank, tied); });
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r]->world = std::move(world[r]);
      ranks_[r]->group = std::move(groups[r]);
      ranks_[r]->tied_pair = std::move(pairs[r]);
    }
    // Sequence parallelism: each stage's plans exchange over their group on their own stream (the
    // last stage has no forward plan: its forward group, on the training stream, stays idle).
    training_sequence_.connect(threads_, *alone, layout_, streams, "sequence");
    std::vector<void*> forward_streams;
    for (size_t r = 0; r < stages_.size(); ++r) {
      cudaStream_t forward = stages_[r]->runner->stage->forward_stream();
      forward_streams.push_back(forward != nullptr ? forward : streams[r]);
    }
    forward_sequence_.connect(threads_, *alone, layout_, forward_streams, "sequence-forward");
  }

  // Each rank's CUDA objects are released on its own thread (its device current).
  void release_ranks() noexcept {
    try {
      threads_.run([&](int r) {
        StageRankEngine& rank = *ranks_[static_cast<size_t>(r)];
        forward_sequence_.release(r);
        training_sequence_.release(r);
        rank.tied_pair.reset();
        rank.group.reset();
        rank.world.reset();
        rank.rank.reset();
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
  std::vector<std::unique_ptr<StageRankEngine>> ranks_;
  std::vector<std::unique_ptr<CudaStage>> stages_;  // each rank's (its layout outlives its CudaRank)
  // Sequence parallelism: each rank's kernel tables and groups, its training and its forward plan's.
  CudaSequenceGroups training_sequence_, forward_sequence_;
  CudaHostWeights host_;
  std::vector<StoredQuantizedWeight> quantized_;
  std::map<std::string, std::span<const std::byte>> quantized_pieces_;
  bool bf16_gradients_ = false, offload_optimizer_ = false;
  std::string optimizer_name_;
};

}  // namespace

std::unique_ptr<BackendRanks> make_cuda_pipeline_ranks(const RanksSetup& setup) { return std::make_unique<CudaPipelineRanks>(setup); }

}  // namespace surogate::train
