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
// A stage rank's part of the device's step:
//   run_micro_batches(): its micro-batches through its stage in 1F1B order; the trainer scaled each
//     micro-batch's loss by 1 / (loss tokens of the window), so the gradients add up to the
//     window's mean as on one rank. A parameter two stages read (the tied embedding) belongs to
//     the first: the last stage's gradient of it is added to the first's over their tied pair.
//     Then each stage's gradient group (data × sequence ranks) sums its owned gradients (all-reduce,
//     or reduce-scatter under ZeRO-2) through one flat fp32 buffer, the trainable tensors of the
//     stage in plan order. The norm adds the stages' sums of squares (each tensor counted once);
//     the loss is the last stage's.
//   step_shard() / publish_shard(): each rank clips and steps the optimizer for its shard of its
//     stage's tensors (ZeRO-1 over the gradient group: place_shards), an all-gather within the group
//     gives every rank of the stage its weights (shard_publish.h), the first stage sends the tied
//     weights to the last, and every stage refreshes its forward plan's copies.
//
// The host side holds an fp32 copy of every parameter (weights(), trainable()): upload() writes it
// into every stage that holds each weight, download() reads each weight back from the first stage
// of replica 0 that holds it. optimizer_state() is the ranks' shards, whose tensors carry their
// parameter's name, so a checkpoint holds exactly the tensors of a single-rank run and resumes on
// any layout. Stages are rank threads of one process: a pipeline over the processes of a launcher
// or Ray is refused with a message (not built yet).
#include "train/device/parallel/rank_engine.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "distributed/shard_placement.h"
#include "ops/gradient_norm.h"
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

class CpuStageEngine final : public RankEngine {
public:
  CpuStageEngine(const compiler::ExecutionPlan& source, const distributed::ParallelLayout& layout, double max_grad_norm)
      : source_(source), layout_(layout), max_grad_norm_(max_grad_norm) {}

  void take(std::span<const runtime::InputBinding> inputs, int sequence_index, int sequence_ranks) override {
    pending.push_back(runner->take(source_, inputs, sequence_index, sequence_ranks));
  }
  void run_micro_batches() override {
    measure_.loss = runner->run(pending, *world, [&](int other) { return layout_.rank_at({other, replica, sequence}); });
    pending.clear();
    reduce_gradients();
  }
  RankMeasure measure() override { return measure_; }
  bool has_router_aux_loss() const override { return false; }
  void set_grad_norm(double norm) override { grad_norm_ = norm; }

  void step_shard(const OptimizerStep& step) override {
    if (!optimizer) return;
    clip_slot_gradients(shard_slots, grad_norm_, max_grad_norm_);
    optimizer->step(shard_slots, step);
  }
  void publish_shard() override {
    train::publish_shard(*group, flat.data(), shard_sizes, DType::F32, shard, owned.size(),
                         cpu_shard_copies(owned_weights, offsets, flat.data()));
    share_tied_weights(*tied_pair, tied_weights, DType::F32);
    runner->refresh_forward_weights(true);
  }
  void finish_update(const OptimizerStep&) override { zero_gradients(); }
  // The flat buffers are overwritten by the next step's reduce_gradients.
  void zero_gradients() override { runner->training().zero_gradients(); }

  std::vector<StateTensor> optimizer_state() override {
    return optimizer ? optimizer->state_tensors() : std::vector<StateTensor>{};
  }
  size_t gradient_accumulator_bytes() const override { return 0; }

  int stage = 0, replica = 0, sequence = 0;
  int group_index = 0;                      // in its stage's gradient group: replica · N + sequence
  std::unique_ptr<CpuPipelineStage> runner;
  CpuParameters parameters;                 // the stage's weights (spec order) on its training backend
  std::vector<size_t> owned;                // indices into parameters.trainable this stage steps
  std::vector<WeightView> owned_weights;    // those tensors
  // The parameters shared with the other end of the pipeline: their gradients and weights.
  std::vector<CollectiveRegion> tied_gradients, tied_weights;
  std::vector<size_t> offsets;              // each owned tensor's offset in `flat`
  std::vector<size_t> shard_sizes;          // the gradient group's pieces of `flat`
  distributed::Shard shard;
  std::vector<ParameterSlot> shard_slots;   // gradients read from `flat`
  std::unique_ptr<Optimizer> optimizer;
  std::vector<float> flat;
  std::unique_ptr<distributed::Communicator> world, group, tied_pair;
  std::vector<StageMicroBatch> pending;

private:
  // After the schedule: tied gradients summed into the first stage's, then the stage's gradient
  // group sums (ZeRO-2: reduce-scatters) the owned gradients, and the rank's share of the squares.
  void reduce_gradients() {
    sum_tied_gradients(*tied_pair, tied_gradients, DType::F32);
    for (size_t unit = 0; unit < owned.size(); ++unit) {
      const std::span<const float> gradient = parameters.gradients[owned[unit]];
      std::memcpy(flat.data() + offsets[unit], gradient.data(), gradient.size_bytes());
    }
    sum_stage_gradients(*group, {flat.data(), flat.size()}, shard_sizes, DType::F32, layout_.shard_gradients);
    if (layout_.shard_gradients) {
      measure_.squares = ops::sum_of_squares(flat.data() + shard.begin, static_cast<int64_t>(shard.size()));
    } else {
      // Every rank of the group holds the same sums: its first counts them.
      measure_.squares = group_index == 0 ? ops::sum_of_squares(flat.data(), static_cast<int64_t>(flat.size())) : 0.0;
    }
  }

  const compiler::ExecutionPlan& source_;
  const distributed::ParallelLayout& layout_;
  double max_grad_norm_;
  RankMeasure measure_;  // the last stage's loss, the rank's share of the squares
  double grad_norm_ = 0.0;
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
      auto rank = std::make_unique<CpuStageEngine>(source_, layout_, config.optimizer.max_grad_norm);
      const distributed::RankPlace place = layout_.place(r);
      rank->stage = place.stage;
      rank->replica = place.replica;
      rank->sequence = place.sequence;
      rank->group_index = stage_group_index(layout_, place);
      rank->world = std::move(world[static_cast<size_t>(r)]);
      rank->group = std::move(groups[static_cast<size_t>(r)]);
      rank->tied_pair = std::move(pairs[static_cast<size_t>(r)]);
      set_up_rank(*rank, sequence_groups_.registry(r, *setup.registry), setup.specs, tied, config.optimizer);
      ranks_.push_back(std::move(rank));
    }
    std::set<std::string> trainable;
    for (const auto& rank : ranks_) {
      for (const WeightView& weight : rank->parameters.trainable) trainable.insert(weight.name);
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
    for (auto& rank : ranks_) {
      for (size_t i = 0; i < weight.pieces.size(); ++i) rank->runner->write_weight(weight.pieces[i], stored.bytes[i]);
    }
  }

  void upload() override {
    for (auto& rank : ranks_) {
      for (const WeightView& weight : rank->parameters.weights) {
        const WeightView& host = host_weights_[host_index_.at(weight.name)];
        std::ranges::copy(host.values, weight.values.begin());
      }
      rank->runner->refresh_forward_weights(false);
    }
  }
  // Pipeline stages keep whole weights (ZeRO-3 is refused with them).
  void download_weight_shards() override {}
  void download() override {
    std::set<std::string> done;
    for (auto& rank : ranks_) {
      if (rank->group_index != 0) continue;
      for (const WeightView& weight : rank->parameters.weights) {
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

  void set_up_rank(CpuStageEngine& rank, const graph::OpRegistry& registry, std::span<const models::ParameterSpec> specs,
                   const std::set<std::string>& tied, const config::Optimizer& optimizer) {
    const PipelineStagePlan& plan = pipeline_.stages[static_cast<size_t>(rank.stage)];
    rank.runner = std::make_unique<CpuPipelineStage>(plan, registry, layout_.pipeline_size, boundary_tags_);
    rank.parameters = bind_cpu_parameters(rank.runner->training(), plan.training, stage_parameter_specs(plan, specs));
    std::vector<size_t> sizes;
    size_t total = 0;
    for (size_t i = 0; i < rank.parameters.trainable.size(); ++i) {
      const WeightView& weight = rank.parameters.trainable[i];
      if (tied.contains(weight.name)) {
        const std::span<const float> gradient = rank.parameters.gradients[i];
        rank.tied_gradients.push_back({const_cast<float*>(gradient.data()), gradient.size()});
        rank.tied_weights.push_back({weight.values.data(), weight.values.size()});
      }
      if (tied.contains(weight.name) && rank.stage != 0) continue;  // the first stage steps it
      rank.owned.push_back(i);
      rank.owned_weights.push_back(weight);
      rank.offsets.push_back(total);
      sizes.push_back(weight.values.size());
      total += weight.values.size();
    }
    const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, layout_.gradient_group_size());
    rank.shard_sizes = distributed::shard_sizes(shards);
    rank.shard = shards[static_cast<size_t>(rank.group_index)];
    rank.flat.assign(total, 0.0f);
    for (size_t unit = rank.shard.first_unit; unit < rank.shard.end_unit; ++unit) {
      ParameterSlot slot = rank.parameters.slots[rank.owned[unit]];
      slot.gradient = rank.flat.data() + rank.offsets[unit];
      rank.shard_slots.push_back(slot);
    }
    if (!rank.shard_slots.empty()) rank.optimizer = make_cpu_optimizer(optimizer, rank.shard_slots);
  }

  distributed::ParallelLayout layout_;
  distributed::RankThreads& threads_;
  const compiler::ExecutionPlan& source_;
  const PipelinePlan& pipeline_;
  std::map<std::string, uint32_t> boundary_tags_;
  SequenceGroups sequence_groups_;  // sequence parallelism: each rank's group and exchange ops
  std::vector<std::unique_ptr<CpuStageEngine>> ranks_;
  std::vector<std::vector<float>> host_values_;
  std::vector<WeightView> host_weights_, host_trainable_;
  std::map<std::string, size_t> host_index_;
  std::vector<StoredQuantizedWeight> quantized_;
  std::string optimizer_name_;
};

}  // namespace

std::unique_ptr<BackendRanks> make_cpu_pipeline_ranks(const RanksSetup& setup) { return std::make_unique<CpuPipelineRanks>(setup); }

}  // namespace surogate::train
