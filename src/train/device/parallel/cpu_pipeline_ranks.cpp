// Pipeline parallelism on CPU ranks, composed with data and sequence parallelism: the CPU
// backend's ranks of the parallel device (parallel_device.cpp) when pipeline_parallel_size > 1
// trains on the CPU backend (docs/architecture.md, "Pipeline parallel"). The ranks are threads of
// this process (distributed/rank_threads.h); rank r runs stage s of replica d at sequence index q
// (distributed/parallel_layout.h) on its own CpuBackends (cpu_pipeline_stage.h), joined by gloo: the
// world for the stages' transfers, one gradient group per stage (its data × sequence ranks), one
// sequence group per stage and replica (sequence_groups.h: the exchange ops of the stage's plans
// bind to it) and, when a parameter is read by the first and the last stage (tied embeddings), one
// tied pair per replica and sequence index (pipeline_stage_groups.h, which both backends share).
//
// With sequence_parallel_size N > 1 the stages' graphs are split from the sequence slice's graph
// (train/training_plan.cpp applies distributed/sequence_parallel_graph.h before the pipeline pass),
// so every boundary tensor is a slice's [B, T/N, …]: rank q of a stage sends its slice to rank q
// of the next stage of its replica and receives its gradient from it, and the ranks of one stage's
// sequence group run the same 1F1B schedule, so their exchanges come in the same order.
//
// A stage rank's part of the device's step is the stage strategy's (stage_ranks.h), written once
// for CPU and GPU ranks; it drives here a CpuRank (cpu_rank.h) over the stage's training CpuBackend,
// whose fp32 owned gradients are copied into one flat buffer (the trainable tensors the stage
// steps, in plan order) for the gradient group's sum, and whose weights travel through it for
// ZeRO-1, and a CpuStageRunner (the stage's plans, cpu_pipeline_stage.h).
//
// The host side holds an fp32 copy of every parameter (weights(), trainable()): upload() writes it
// into every stage that holds each weight, download() reads each weight back from the first stage
// of replica 0 that holds it. optimizer_state() is the ranks' shards, whose tensors carry their
// parameter's name, so a checkpoint holds exactly the tensors of a single-rank run and resumes on
// any layout. Stages are rank threads of one process: a pipeline over the processes of a launcher
// or Ray is refused with a message (not built yet).
#include "train/device/parallel/cpu_rank.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/stage_ranks.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "distributed/shard_placement.h"
#include "train/device/backend_selection.h"
#include "train/device/cpu_parameters.h"
#include "train/device/cpu_pipeline_stage.h"
#include "train/device/pipeline_parameters.h"
#include "train/device/pipeline_stage_groups.h"
#include "train/device/sequence_groups.h"
#include "train/device/shard_publish.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

// One stage rank: its runner (the stage's CpuBackends) and its CpuRank (owned by its engine).
struct CpuStage {
  CpuStageRunner* runner = nullptr;
  CpuRank* rank = nullptr;
};

class CpuPipelineRanks final : public BackendRanks {
public:
  explicit CpuPipelineRanks(const RanksSetup& made)
      : layout_(made.layout), threads_(made.threads), source_(*made.device.plan), pipeline_(*made.device.pipeline) {
    const TrainingDeviceSetup& setup = made.device;
    const Config& config = *setup.config;  // read here only
    check_cpu_backend_options(config);
    optimizer_name_ = to_string(config.optimizer.algorithm);
    // Refused up front by the feature-support table (config/feature_support.cpp: the pipeline over
    // processes), before any process loads.
    SUROGATE_CHECK(!layout_.spans_processes(), "a pipeline device over several processes");
    SUROGATE_CHECK(static_cast<int>(pipeline_.stages.size()) == layout_.pipeline_size, "one plan per stage");
    make_host_copies(setup.specs);
    for (const PipelineStagePlan& stage : pipeline_.stages) {
      for (const distributed::BoundaryTensor& tensor : stage.graph.sent) {
        boundary_tags_.try_emplace(tensor.name, static_cast<uint32_t>(boundary_tags_.size()));
      }
    }
    const std::set<std::string> tied = tied_pipeline_parameters(pipeline_, setup.specs);
    std::unique_ptr<distributed::ProcessWorld> alone = distributed::ProcessWorld::single();
    auto world = distributed::connect_gloo(threads_, *alone, 0, layout_.world_size);
    auto groups = distributed::connect_gloo_groups(threads_, *alone, 0,
                                                   [&](int rank) { return stage_gradient_group(layout_, rank); });
    auto pairs = distributed::connect_gloo_groups(threads_, *alone, 0,
                                                  [&](int rank) { return tied_pair_group(layout_, rank, !tied.empty()); });
    sequence_groups_ = connect_cpu_sequence_groups(threads_, *alone, layout_);
    for (int r = 0; r < layout_.local_ranks; ++r) {
      auto rank = std::make_unique<StageRankEngine>(layout_, r);
      rank->world = std::move(world[static_cast<size_t>(r)]);
      rank->group = std::move(groups[static_cast<size_t>(r)]);
      rank->tied_pair = std::move(pairs[static_cast<size_t>(r)]);
      stages_.push_back(set_up_rank(*rank, sequence_groups_.registry(r, *setup.registry), setup.specs, tied,
                                    config.optimizer));
      ranks_.push_back(std::move(rank));
    }
    std::set<std::string> trainable;
    for (const CpuStage& stage : stages_) {
      for (const WeightView& weight : stage.rank->parameters.trainable) trainable.insert(weight.name);
    }
    for (const WeightView& weight : host_weights_) {
      if (trainable.contains(weight.name)) host_trainable_.push_back(weight);
    }
  }

  RankEngine& engine(int local_rank) override { return *ranks_[static_cast<size_t>(local_rank)]; }

  std::string description() const override {
    return fmt::format("CPU backend, fp32 weights, gradients and {} state; {}: {} (threads of this process, gloo)",
                       optimizer_name_, layout_.describe(), pipeline_.describe());
  }
  std::span<const WeightView> weights() const override { return host_weights_; }
  std::span<const WeightView> trainable() const override { return host_trainable_; }
  bool host_views_are_live() const override { return true; }
  std::optional<StateTensor> fp8_state_tensor() override { return std::nullopt; }

  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return make_cpu_evaluator(setup, host_weights_, quantized_);
  }
  // The evaluator reads the host copies (as on GPUs).
  void before_evaluation() override { download(); }

  void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override {
    quantized_.push_back({weight, pieces});  // kept: a copy (the caller reuses its buffers)
    const QuantizedPieces& stored = quantized_.back().pieces;
    for (const CpuStage& stage : stages_) {
      for (size_t i = 0; i < weight.pieces.size(); ++i) stage.runner->stage->write_weight(weight.pieces[i], stored.bytes[i]);
    }
  }

  void upload() override {
    for (const CpuStage& stage : stages_) {
      for (const WeightView& weight : stage.rank->parameters.weights) {
        const WeightView& host = host_weights_[host_index_.at(weight.name)];
        std::ranges::copy(host.values, weight.values.begin());
      }
      stage.runner->stage->refresh_forward_weights(false);
    }
  }
  // Pipeline stages keep whole weights (ZeRO-3 is refused with them).
  void download_weight_shards() override {}
  void download() override {
    std::set<std::string> done;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r]->group_index != 0) continue;
      for (const WeightView& weight : stages_[r].rank->parameters.weights) {
        if (!done.insert(weight.name).second) continue;  // the first stage holding it
        std::ranges::copy(weight.values, host_weights_[host_index_.at(weight.name)].values.begin());
      }
    }
  }

private:
  void make_host_copies(std::span<const models::ParameterSpec> specs) {
    host_values_.reserve(specs.size());
    for (const models::ParameterSpec& spec : specs) {
      host_values_.emplace_back(static_cast<size_t>(graph::shape_numel(spec.shape)), 0.0f);
      host_index_[spec.name] = host_weights_.size();
      host_weights_.push_back({spec.name, spec.shape, host_values_.back()});
    }
  }

  // The rank's stage on CPU backends: its owned units (the first stage steps the tied ones), its
  // shard of them and the optimizer over it.
  CpuStage set_up_rank(StageRankEngine& engine, const graph::OpRegistry& registry,
                       std::span<const models::ParameterSpec> specs, const std::set<std::string>& tied,
                       const config::Optimizer& optimizer) {
    const int stage_index = engine.place.stage;
    const PipelineStagePlan& plan = pipeline_.stages[static_cast<size_t>(stage_index)];
    auto runner = std::make_unique<CpuStageRunner>(
        source_, std::make_unique<CpuPipelineStage>(plan, registry, layout_.pipeline_size, boundary_tags_));
    auto rank = std::make_unique<CpuRank>(runner->stage->training(), optimizer.max_grad_norm);
    rank->parameters = bind_cpu_parameters(runner->stage->training(), plan.training, stage_parameter_specs(plan, specs));
    std::vector<size_t> owned, sizes;
    for (size_t i = 0; i < rank->parameters.trainable.size(); ++i) {
      const WeightView& weight = rank->parameters.trainable[i];
      if (tied.contains(weight.name)) {
        const std::span<const float> gradient = rank->parameters.gradients[i];
        rank->tied_gradient_regions.push_back({const_cast<float*>(gradient.data()), gradient.size()});
        rank->tied_weight_regions.push_back({weight.values.data(), weight.values.size()});
      }
      if (tied.contains(weight.name) && stage_index != 0) continue;  // the first stage steps it
      owned.push_back(i);
      sizes.push_back(weight.values.size());
    }
    engine.place_shard(sizes);
    rank->set_units(std::move(owned), true);
    rank->make_optimizer(engine.shard, optimizer);
    const CpuStage stage{runner.get(), rank.get()};
    engine.runner = std::move(runner);
    engine.rank = std::move(rank);
    return stage;
  }

  distributed::ParallelLayout layout_;
  distributed::RankThreads& threads_;
  const compiler::ExecutionPlan& source_;
  const PipelinePlan& pipeline_;
  std::map<std::string, uint32_t> boundary_tags_;
  SequenceGroups sequence_groups_;  // sequence parallelism: each rank's group and exchange ops
  std::vector<std::unique_ptr<StageRankEngine>> ranks_;
  std::vector<CpuStage> stages_;  // each rank's runner and rank (owned by its engine)
  std::vector<std::vector<float>> host_values_;
  std::vector<WeightView> host_weights_, host_trainable_;
  std::map<std::string, size_t> host_index_;
  std::vector<StoredQuantizedWeight> quantized_;
  std::string optimizer_name_;
};

}  // namespace

std::unique_ptr<BackendRanks> make_cpu_pipeline_ranks(const RanksSetup& setup) { return std::make_unique<CpuPipelineRanks>(setup); }

}  // namespace surogate::train
