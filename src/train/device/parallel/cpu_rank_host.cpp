// The CPU backend's host side of the parallel device's ranks: the common part and the replicas;
// see cpu_rank_host.h.
#include "train/device/parallel/cpu_rank_host.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "models/decoder_graph.h"
#include "train/device/backend_selection.h"
#include "train/device/cpu_gradient_reducer.h"
#include "train/device/cpu_parameters.h"
#include "train/device/cpu_weight_gatherer.h"
#include "train/device/quantized_base_shards.h"
#include "train/device/scratch_transfer.h"
#include "train/device/sharded_gradients.h"

namespace surogate::train {

CpuRankHost::CpuRankHost(const RanksSetup& setup)
    : layout_(setup.layout), threads_(setup.threads), plan_(*setup.device.plan), specs_(setup.device.specs),
      optimizer_(setup.device.config->optimizer), offload_(setup.device.config->offload) {
  check_cpu_backend_options(*setup.device.config);
}

std::string CpuRankHost::description(const std::string& parallelism) const {
  return fmt::format("CPU backend, fp32 weights, gradients and {} state; {} ({}, gloo)",
                     to_string(optimizer_.algorithm), parallelism,
                     layout_.spans_processes() ? "rank threads in each process" : "threads of this process");
}

HostWeights CpuRankHost::make_host_copies(std::span<const models::ParameterSpec> specs,
                                          const std::set<std::string>& trainable) const {
  auto values = std::make_shared<std::vector<std::vector<float>>>();
  values->reserve(specs.size());
  HostWeights host;
  for (const models::ParameterSpec& spec : specs) {
    values->emplace_back(static_cast<size_t>(graph::shape_numel(spec.shape)), 0.0f);
    host.weights.push_back({spec.name, spec.shape, std::span<float>(values->back())});
    if (trainable.contains(spec.name)) host.trainable.push_back(host.weights.back());
  }
  host.memory = std::move(values);
  return host;
}

// Every trainable tensor of the trainer's plan, in spec order.
ReplicaUnits CpuRankHost::replica_units() {
  ReplicaUnits units;
  for (const models::ParameterSpec& spec : specs_) {
    units.weights.push_back(plan_.tensor(spec.name));
    auto gradient = plan_.parameter_gradients.find(units.weights.back());
    if (gradient == plan_.parameter_gradients.end()) continue;
    units.trainable.push_back(units.weights.back());
    units.gradients.push_back(gradient->second);
    units.sizes.push_back(static_cast<size_t>(graph::shape_numel(spec.shape)));
  }
  weight_ids_ = units.weights;
  trainable_ids_ = units.trainable;
  return units;
}

void CpuRankHost::shard_quantized_base(compiler::ExecutionPlan& gathered) {
  quantized_base_.emplace(gathered, quantized_base_keeping(offload_), layout_.world_size, layout_.first_rank,
                          layout_.local_ranks);
}

// Each rank's CpuBackend loads the ranks' plan (its sequence group's exchange ops bound), joined to
// the world by gloo.
void CpuRankHost::make_replicas(const RanksSetup& setup, const ReplicaPlan& plan,
                                std::span<const std::unique_ptr<ReplicaRankEngine>> engines) {
  std::unique_ptr<distributed::ProcessWorld> alone;
  distributed::ProcessWorld& world = setup.device.world != nullptr ? *setup.device.world
                                                                   : *(alone = distributed::ProcessWorld::single());
  std::vector<std::unique_ptr<distributed::Communicator>> communicators =
      distributed::connect_gloo(threads_, world, layout_.first_rank, layout_.world_size);
  sequence_groups_ = connect_cpu_sequence_groups(threads_, world, layout_);
  router_aux_loss_ = plan_.graph.find_tensor(models::kRouterAuxLoss);
  gathering_ = plan.gathering;
  fp8_ = plan.shared.fp8;
  if (gathering_) {
    for (const models::ParameterSpec& spec : specs_) {
      scratch_elements_ = std::max(scratch_elements_, static_cast<size_t>(graph::shape_numel(spec.shape)));
    }
  }
  const compiler::ExecutionPlan& rank_plan = *plan.shared.rank_plan;
  for (int r = 0; r < layout_.local_ranks; ++r) {
    ReplicaRankEngine& engine = *engines[static_cast<size_t>(r)];
    auto runner = std::make_unique<CpuRankPlans>(plan_, router_aux_loss_, fp8_copies_);
    runner->training().load(rank_plan, sequence_groups_.registry(r, *setup.device.registry));
    auto rank = std::make_unique<CpuRank>(runner->training(), optimizer_.max_grad_norm);
    rank->parameters = bind_cpu_parameters(runner->training(), rank_plan, specs_);
    engine.world = std::move(communicators[static_cast<size_t>(r)]);
    replicas_.push_back(runner.get());
    ranks_.push_back(rank.get());
    worlds_.push_back(engine.world.get());
    engine.runner = std::move(runner);
    engine.rank = std::move(rank);
  }
  if (fp8_) {
    for (CpuRankPlans* replica : replicas_) std::ranges::fill(replica->training().view<float>(fp8_->tensor), 0.0f);
  }
  fp8_copies_ = fp8_weight_copies(plan_);
  for (int r = 0; r < layout_.local_ranks; ++r) set_up_replica(*engines[static_cast<size_t>(r)], r, plan);
}

void CpuRankHost::set_up_replica(ReplicaRankEngine& engine, int r, const ReplicaPlan& plan) {
  CpuRank& rank = *ranks_[static_cast<size_t>(r)];
  runtime::CpuBackend& backend = replicas_[static_cast<size_t>(r)]->training();
  distributed::Communicator& world = *engine.world;
  std::vector<size_t> units(trainable_ids_.size());
  std::iota(units.begin(), units.end(), size_t{0});
  rank.set_units(std::move(units), !layout_.shard_gradients);
  if (gathering_) {
    rank.gatherer = std::make_unique<CpuWeightGatherer>(*gathering_, layout_.first_rank + r, backend, world);
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
    for (graph::TensorId id : plan.units.gradients) views.push_back(backend.view<float>(id));
    rank.sharded = std::make_unique<CpuShardedGradients>(plan.buckets, std::move(views), engine.shard, world);
    engine.first_batches.add(rank.sharded.get());
    engine.last_batch.add(rank.sharded.get());
  } else {
    rank.reducer = std::make_unique<CpuGradientReducer>(plan.buckets, rank.parameters.gradients, rank.offsets(),
                                                        rank.flat.data(), engine.shard, world);
    engine.last_batch.add(rank.reducer.get());
  }
  // ZeRO-3: the master is the rank's own copy, which the gathers read.
  std::function<float*(size_t)> master;
  if (rank.gatherer) master = [&rank, this](size_t unit) { return rank.gatherer->owned(trainable_ids_[unit]).data(); };
  rank.make_optimizer(engine.shard, optimizer_, master);
}

std::unique_ptr<Evaluator> CpuRankHost::make_replica_evaluator(const EvaluatorSetup& setup,
                                                               std::span<const WeightView> weights) {
  return make_cpu_evaluator(setup, weights, quantized_);
}

void CpuRankHost::store_replica_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) {
  quantized_.push_back({weight, pieces});  // kept: a copy (the caller reuses its buffers)
  if (quantized_base_ && quantized_base_->gathered()) {
    quantized_base_->keep(plan_, weight, quantized_.back().pieces);  // ZeRO-3: shared out, or the host image
    return;
  }
  for (CpuRankPlans* replica : replicas_) {
    write_quantized(replica->training(), plan_, weight, quantized_.back().pieces);
  }
}

void CpuRankHost::broadcast_weights(int r) {
  for (const WeightView& weight : ranks_[static_cast<size_t>(r)]->parameters.weights) {
    worlds_[static_cast<size_t>(r)]->broadcast(weight.values.data(), weight.values.size(), DType::F32, 0);
  }
}

// Each weight broadcast from the world's first rank's host copy; its owner keeps it. A chunk is the
// largest weight: one broadcast per weight.
void CpuRankHost::upload_owned(int r, const HostWeights& host) {
  CpuRank& rank = *ranks_[static_cast<size_t>(r)];
  std::vector<size_t> counts;
  for (const WeightView& weight : host.weights) counts.push_back(weight.values.size());
  upload_through_scratch(
      {*worlds_[static_cast<size_t>(r)], rank.scratch.data(), scratch_elements_}, counts,
      [&](size_t i, size_t first, size_t count) {
        std::copy_n(host.weights[i].values.begin() + static_cast<std::ptrdiff_t>(first), count, rank.scratch.begin());
      },
      [&](size_t i, size_t first, size_t count) {
        const std::span<float> owned = rank.gatherer->owned(weight_ids_[i]);
        if (owned.empty()) return;
        std::copy_n(rank.scratch.begin(), count, owned.begin() + static_cast<std::ptrdiff_t>(first));
      });
}

// The optimizer state needs nothing: each rank's own shard is what optimizer_state() views.
void CpuRankHost::finish_upload(int r) {
  runtime::CpuBackend& backend = replicas_[static_cast<size_t>(r)]->training();
  if (fp8_) {
    std::span<float> state = backend.view<float>(fp8_->tensor);
    worlds_[static_cast<size_t>(r)]->broadcast(state.data(), state.size(), DType::F32, 0);
  }
  refresh_fp8_weight_copies(backend, fp8_copies_);
}

// Each trainable weight broadcast from its owner; the first local rank writes the host copy.
void CpuRankHost::download_owned(int r, const HostWeights& host) {
  CpuRank& rank = *ranks_[static_cast<size_t>(r)];
  std::vector<size_t> counts;
  std::vector<int> owners;
  for (size_t unit = 0; unit < trainable_ids_.size(); ++unit) {
    counts.push_back(host.trainable[unit].values.size());
    owners.push_back(rank.gatherer->owner(trainable_ids_[unit]));
  }
  download_through_scratch(
      {*worlds_[static_cast<size_t>(r)], rank.scratch.data(), scratch_elements_, r == 0}, counts, owners,
      [&](size_t unit, size_t first, size_t count) {
        std::copy_n(rank.gatherer->owned(trainable_ids_[unit]).begin() + static_cast<std::ptrdiff_t>(first), count,
                    rank.scratch.begin());
      },
      [&](size_t unit, size_t first, size_t count) {
        const std::span<float> values = host.trainable[unit].values;
        std::copy_n(rank.scratch.begin(), count, values.begin() + static_cast<std::ptrdiff_t>(first));
      });
}

std::unique_ptr<RankHost> make_cpu_rank_host(const RanksSetup& setup) { return std::make_unique<CpuRankHost>(setup); }

}  // namespace surogate::train
