// The GPUs' host side of the parallel device's ranks: the common part and the replicas; see
// cuda_rank_host.h.
#include "train/device/parallel/cuda_rank_host.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "distributed/nccl_communicator.h"
#include "train/device/backend_selection.h"
#include "train/device/cuda_evaluator.h"
#include "train/device/cuda_gradient_reducer.h"
#include "train/device/cuda_sharded_gradients.h"
#include "train/device/cuda_weight_gatherer.h"
#include "train/device/quantized_base_shards.h"

namespace surogate::train {
namespace {

float* fp8_device(const Fp8State& fp8, CudaRankState& state) {
  return static_cast<float*>(state.backend().device_address(fp8.tensor));
}

}  // namespace

CudaRankHost::CudaRankHost(const RanksSetup& setup)
    : layout_(setup.layout), threads_(setup.threads), plan_(*setup.device.plan), specs_(setup.device.specs),
      offload_(setup.device.config->offload), sequence_groups_(layout_), forward_sequence_(layout_) {
  const Config& config = *setup.device.config;  // read here only
  // Refused up front by the feature-support table (config/feature_support.cpp: several GPUs with
  // bf16 masters, which the ranks exchange, offload_master or offload_grads), before anything loads.
  SUROGATE_CHECK(config.precision.master_dtype != MasterDtype::Bf16 && !config.offload.offload_master &&
                     !config.offload.offload_grads,
                 "an option the feature-support table refuses on the parallel device");
  check_visible_gpus(layout_.first_device, layout_.local_ranks, config.sources.of("gpus"));
  bf16_gradients_ = config.precision.gradient_dtype == GradientDtype::Bf16;
  optimizer_name_ = to_string(config.optimizer.algorithm);
  time_breakdown_ = config.logging.debug_time_breakdown;
  offload_optimizer_ = config.offload.offload_optimizer;
  max_micro_batches_ = std::max<int64_t>(1, config.schedule.gradient_accumulation_steps);
}

std::string CudaRankHost::description(const std::string& parallelism) const {
  return fmt::format("CUDA backend, bf16 weights and activations, fp32 master weights, {} gradient accumulation, "
                     "{} state; {} (GPUs {}-{}, threads of this process, NCCL)",
                     bf16_gradients_ ? "bf16" : "fp32", optimizer_name_,
                     layout_.several_ranks() ? parallelism : "a data-parallel world of one", layout_.first_device,
                     layout_.first_device + layout_.local_ranks - 1);
}

// Only which specs are trainable matters to cuda_host_weights.
HostWeights CudaRankHost::make_host_copies(std::span<const models::ParameterSpec> specs,
                                           const std::set<std::string>& trainable) const {
  CudaTrainableLayout whole;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (trainable.contains(specs[i].name)) whole.entries.push_back({i, graph::kNoTensor, graph::kNoTensor, 0, 0});
  }
  auto copies = std::make_shared<CudaHostWeights>(cuda_host_weights(specs, whole));
  return {copies->weights, copies->trainable, copies};
}

std::vector<std::pair<std::string, double>> CudaRankHost::time_breakdown() {
  if (!time_breakdown_ || engines_.empty()) return {};  // the replicas' first rank
  std::vector<std::pair<std::string, double>> times;
  threads_.run([&](int r) {
    if (r == 0) times = state(0).backend().time_breakdown();
  });
  return times;
}

std::vector<std::pair<std::string, double>> CudaRankHost::step_phases() {
  if (ranks_.empty() || !ranks_[0]->step_phases) return {};
  std::vector<std::pair<std::string, double>> phases;
  threads_.run([&](int r) {
    if (r == 0) phases = ranks_[0]->step_phases->previous();
  });
  return phases;
}

ReplicaUnits CudaRankHost::replica_units() {
  trainable_layout_ = cuda_trainable_layout(plan_, specs_);
  ReplicaUnits units{trainable_layout_->ids, {}, {}, trainable_layout_->unit_sizes(),
                     bf16_gradients_ ? size_t{2} : sizeof(float)};
  for (const CudaTrainable& entry : trainable_layout_->entries) {
    units.trainable.push_back(entry.parameter);
    units.gradients.push_back(entry.gradient);
  }
  return units;
}

void CudaRankHost::shard_quantized_base(compiler::ExecutionPlan& gathered) {
  quantized_base_.emplace(gathered, quantized_base_keeping(offload_), layout_.world_size, layout_.first_rank,
                          layout_.local_ranks);
}

// Every rank's state first, then the NCCL world on the ranks' streams and on their side streams.
void CudaRankHost::make_replicas(const RanksSetup& setup, const ReplicaPlan& plan,
                                 std::span<const std::unique_ptr<ReplicaRankEngine>> engines) {
  gathering_ = plan.gathering;
  fp8_ = plan.shared.fp8;
  if (fp8_) fp8_host_.assign(static_cast<size_t>(fp8_->shape.floats()), 0.0f);
  for (const std::unique_ptr<ReplicaRankEngine>& engine : engines) {
    auto rank = std::make_unique<CudaRank>(*trainable_layout_, 0);
    ranks_.push_back(rank.get());
    engines_.push_back(engine.get());
    engine->rank = std::move(rank);
  }
  replicas_.assign(engines.size(), nullptr);  // made on the ranks' threads
  threads_.run([&](int r) {
    make_replica_state(setup.device, *plan.shared.rank_plan, *engines[static_cast<size_t>(r)], r);
  });
  std::vector<void*> streams, sides;
  for (int r = 0; r < layout_.local_ranks; ++r) {
    streams.push_back(state(r).stream());
    sides.push_back(ranks_[static_cast<size_t>(r)]->side->get());
  }
  std::unique_ptr<distributed::ProcessWorld> alone;
  distributed::ProcessWorld& world = setup.device.world != nullptr ? *setup.device.world
                                                                   : *(alone = distributed::ProcessWorld::single());
  std::vector<std::unique_ptr<distributed::Communicator>> communicators = distributed::connect_nccl_world(
      threads_, world, layout_.first_rank, layout_.world_size, layout_.first_device, streams);
  std::vector<std::unique_ptr<distributed::Communicator>> side_communicators = distributed::connect_nccl_world(
      threads_, world, layout_.first_rank, layout_.world_size, layout_.first_device, sides);
  threads_.run([&](int r) {
    engines[static_cast<size_t>(r)]->world = std::move(communicators[static_cast<size_t>(r)]);
    ranks_[static_cast<size_t>(r)]->side_communicator = std::move(side_communicators[static_cast<size_t>(r)]);
    set_up_reduction(*engines[static_cast<size_t>(r)], r, plan);
  });
  sequence_groups_.connect(threads_, world, layout_, streams, "sequence");
}

void CudaRankHost::make_replica_state(const TrainingDeviceSetup& setup, const compiler::ExecutionPlan& rank_plan,
                                      ReplicaRankEngine& engine, int r) {
  CUDA_CHECK(cudaSetDevice(layout_.first_device + r));
  CudaRank& rank = *ranks_[static_cast<size_t>(r)];
  const int global = layout_.first_rank + r;
  TrainingDeviceSetup rank_setup = setup;
  rank_setup.plan = &rank_plan;
  if (const runtime::CudaOpTable* table = sequence_groups_.table(r)) rank_setup.cuda_ops = table;
  if (gathering_) {
    rank.owned = cuda::DeviceBuffer<__nv_bfloat16>(gathering_->owned_elements[static_cast<size_t>(global)]);
    rank.owned.zero();
    rank.weight_shard = {gathering_, global, rank.owned.data()};
    rank.scratch = cuda::DeviceBuffer<float>(kTransferChunkElements);
    quantized_base_->allocate(r);
  }
  auto plans = std::make_unique<CudaRankPlans>(
      std::make_unique<CudaRankState>(rank_setup, *trainable_layout_, engine.shard.first_unit, engine.shard.end_unit,
                                      gathering_ ? &rank.weight_shard : nullptr, layout_.shard_gradients),
      rank_plan, max_micro_batches_, layout_.shard_gradients);
  rank.attach(plans->state());
  replicas_[static_cast<size_t>(r)] = plans.get();
  engine.runner = std::move(plans);
  rank.side.emplace();
  if (time_breakdown_ && r == 0) rank.step_phases.emplace(rank.state().stream());  // the first rank's, reported
  CUDA_CHECK(cudaDeviceSynchronize());  // the owned buffer zeroed before anything reads it
}

void CudaRankHost::set_up_reduction(ReplicaRankEngine& engine, int r, const ReplicaPlan& plan) {
  CudaRank& rank = *ranks_[static_cast<size_t>(r)];
  CudaRankState& rank_state = state(r);
  if (gathering_) {
    rank.gatherer = std::make_unique<CudaWeightGatherer>(*gathering_, rank_state.backend(), rank.side->get(),
                                                         all_gather_fill(rank.weight_shard, *rank.side_communicator));
    engine.first_batches.add(rank.gatherer.get());
    engine.last_batch.add(rank.gatherer.get());
    if (quantized_base_->gathered()) {
      rank.quantized_gatherer =
          std::make_unique<CudaWeightGatherer>(quantized_base_->gathering(), rank_state.backend(), rank.side->get(),
                                               quantized_base_->fill(r, *rank.side_communicator));
      engine.first_batches.add(rank.quantized_gatherer.get());
      engine.last_batch.add(rank.quantized_gatherer.get());
    }
  }
  if (layout_.shard_gradients) {
    rank.sharded = std::make_unique<CudaShardedGradients>(plan.buckets, *trainable_layout_, rank_state, engine.shard,
                                                          rank.side->get(), *rank.side_communicator);
    engine.first_batches.add(rank.sharded.get());
    engine.last_batch.add(rank.sharded.get());
  } else {
    rank.reducer =
        std::make_unique<CudaGradientReducer>(plan.buckets, rank_state, engine.shard, rank.side->get(),
                                              *rank.side_communicator);
    engine.last_batch.add(rank.reducer.get());
    rank.publish_bf16();
    // The accumulators are the publish's buffer until the next micro-batch's forward is over: no
    // memset after the step, the next first add overwrites them.
    rank_state.accumulators().defer_zeroing();
    if (layout_.world_size > 1 && !plan.shared.publish_buckets.empty()) {
      rank.publish_overlap = std::make_unique<CudaPublishOverlap>(
          *plan.shared.rank_plan, plan.shared.publish_buckets, plan.units.trainable, rank_state.stream(),
          rank.side->get());
    }
  }
}

// On GPU 0. ZeRO-3: no GPU keeps the whole weights; the evaluator gathers them from the host
// copies (and a gathered quantized base from its host pieces).
std::unique_ptr<Evaluator> CudaRankHost::make_replica_evaluator(const EvaluatorSetup& setup,
                                                                std::span<const WeightView> weights) {
  QuantizedPieceSource quantized;
  if (quantized_base_ && quantized_base_->gathered()) {
    quantized = [this](const std::string& name) { return quantized_base_->host_piece(name); };
  }
  std::unique_ptr<Evaluator> inner;
  threads_.run([&](int r) {
    if (r != 0) return;
    inner = gathering_ ? make_cuda_gathering_evaluator(setup, state(0).backend(), weights, quantized)
                       : make_cuda_evaluator(setup, state(0).backend());
  });
  return on_rank_zero(threads_, std::move(inner));
}

void CudaRankHost::store_replica_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) {
  if (quantized_base_ && quantized_base_->gathered()) {
    threads_.run([&](int r) { quantized_base_->keep(r, weight, pieces); });  // ZeRO-3: shared out, or the image
    return;
  }
  threads_.run([&](int r) { write_quantized(state(r).backend(), plan_, weight, pieces); });
}

// The first rank's GPU gets the host copies (ZeRO-3: upload_owned gives every weight to its owner)
// and fp8_hybrid's scaling state.
void CudaRankHost::load_first_rank(int r, const HostWeights& host, bool whole) {
  if (whole) state(r).upload_weights(host.weights);
  if (fp8_) {
    CUDA_CHECK(cudaMemcpy(fp8_device(*fp8_, state(r)), fp8_host_.data(), fp8_host_.size() * sizeof(float),
                          cudaMemcpyHostToDevice));
  }
}

// Every other GPU receives its bf16 weights (frozen ones included) and fp32 masters.
void CudaRankHost::broadcast_weights(int r) {
  CudaRankState& rank_state = state(r);
  distributed::Communicator& world = *engines_[static_cast<size_t>(r)]->world;
  for (size_t i = 0; i < specs_.size(); ++i) {
    world.broadcast(rank_state.backend().device_address(trainable_layout_->ids[i]),
                    static_cast<size_t>(graph::shape_numel(specs_[i].shape)), DType::BF16, 0);
  }
  world.broadcast(rank_state.masters().data(), static_cast<size_t>(trainable_layout_->total), DType::F32, 0);
}

void CudaRankHost::upload_owned(int r, const HostWeights& host) {
  upload_weight_shards(transfer(r), *trainable_layout_, host.weights);
}

void CudaRankHost::finish_upload(int r) {
  CudaRankState& rank_state = state(r);
  distributed::Communicator& world = *engines_[static_cast<size_t>(r)]->world;
  if (fp8_) world.broadcast(fp8_device(*fp8_, rank_state), fp8_host_.size(), DType::F32, 0);
  rank_state.refresh_fp8_weight_copies();
  if (rank_state.optimizer()) rank_state.optimizer()->upload(rank_state.stream());
  world.synchronize();
}

void CudaRankHost::download_owned(int r, const HostWeights& host) {
  train::download_weight_shards(transfer(r), *trainable_layout_, host.weights);
  engines_[static_cast<size_t>(r)]->world->synchronize();
}

// Every GPU holds the same masters after a step (their stale units gathered first,
// DataParallelRanks::download); GPU 0's are the host's. Each rank's optimizer state goes to its own
// host view.
void CudaRankHost::download_replica(int r, const HostWeights& host, bool whole) {
  CudaRankState& rank_state = state(r);
  if (r == 0 && whole) rank_state.download_trainable(host.weights);
  if (rank_state.optimizer()) rank_state.optimizer()->download(rank_state.stream());
  if (r == 0 && fp8_) {
    CUDA_CHECK(cudaMemcpyAsync(fp8_host_.data(), fp8_device(*fp8_, rank_state), fp8_host_.size() * sizeof(float),
                               cudaMemcpyDeviceToHost, rank_state.stream()));
  }
  rank_state.synchronize();
}

// The publish and the FP8 copies were only enqueued on the rank's streams.
const runtime::Backend& CudaRankHost::replica_backend(int r) {
  CudaRank& rank = *ranks_[static_cast<size_t>(r)];
  if (rank.side) rank.side->synchronize();
  state(r).synchronize();
  return state(r).backend();
}

// Each rank's CUDA objects on its own thread (its device current).
void CudaRankHost::release() noexcept {
  try {
    threads_.run([&](int r) {
      if (static_cast<size_t>(r) < engines_.size()) release_replica(r);
      if (static_cast<size_t>(r) < stage_engines_.size()) release_stage(r);
    });
  } catch (...) {
    // Shutting down after a failure: nothing more to report.
  }
}

void CudaRankHost::release_replica(int r) {
  CudaRank& rank = *ranks_[static_cast<size_t>(r)];
  if (rank.side) rank.side->synchronize();
  rank.gatherer.reset();
  rank.quantized_gatherer.reset();
  if (quantized_base_) quantized_base_->release(r);
  rank.reducer.reset();
  rank.publish_overlap.reset();
  rank.sharded.reset();
  rank.side_communicator.reset();
  sequence_groups_.release(r);
  engines_[static_cast<size_t>(r)]->world.reset();
  if (replicas_[static_cast<size_t>(r)] != nullptr) replicas_[static_cast<size_t>(r)]->release_state();
  rank.side.reset();
  rank.owned = {};
  rank.scratch = {};
}

CudaShardTransfer CudaRankHost::transfer(int r) {
  CudaRank& rank = *ranks_[static_cast<size_t>(r)];
  return {state(r), *engines_[static_cast<size_t>(r)]->world, rank.weight_shard, rank.scratch.data(), r == 0};
}

std::unique_ptr<RankHost> make_cuda_rank_host(const RanksSetup& setup) { return std::make_unique<CudaRankHost>(setup); }

}  // namespace surogate::train
