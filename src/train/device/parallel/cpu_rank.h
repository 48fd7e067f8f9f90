// One CPU rank of the parallel device, for both strategies (rank_backend.h): CpuRank, the rank's
// fp32 parameters on its training CpuBackend, its units (the trainable tensors it steps) packed in
// one flat fp32 buffer, its shard's optimizer, and the replica reduction's pieces where the host
// side (cpu_rank_host.cpp) sets them up:
//   ZeRO-1: the gradient buckets reduce-scattered in the flat buffer during the last micro-batch's
//     backward (cpu_gradient_reducer.h: the shard's run of it holds the world's sums, which its
//     optimizer steps); after the step the flat buffer carries the weights
//     through the all-gather (shard_publish.h);
//   ZeRO-2/3: the shard's accumulators, reduce-scattered every micro-batch (sharded_gradients.h:
//     no flat buffer), ZeRO-2's weights published bucket by bucket through their staging;
//   ZeRO-3: the rank's pieces of the weights and their gathers (cpu_weight_gatherer.h).
// A pipeline stage (cpu_rank_host_stages.cpp) copies its owned gradients into the flat buffer for its
// gradient group's sum, and shares its tied tensors' regions with the other end of the pipeline.
// The rank's plans, which its training backend belongs to, are cpu_rank_plans.h's.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "compiler/execution_plan.h"
#include "runtime/cpu_backend.h"
#include "train/device/cpu_gradient_reducer.h"
#include "train/device/cpu_parameters.h"
#include "train/device/cpu_weight_gatherer.h"
#include "train/device/parallel/rank_backend.h"
#include "train/device/sharded_gradients.h"
#include "train/fp8_weight_copies.h"

namespace surogate::train {

class CpuRank final : public RankBackend {
public:
  // `training`: the backend whose plan holds the rank's parameters and gradients (must outlive it).
  CpuRank(runtime::CpuBackend& training, double max_grad_norm) : training_(training), max_grad_norm_(max_grad_norm) {}

  // The rank's units: parameters.trainable[i] for each i of `trainable`, in flat order, each at its
  // offset of the flat buffer (allocated when `flat_buffer`: ZeRO-2/3 accumulate without one).
  void set_units(std::vector<size_t> trainable, bool flat_buffer);
  // The optimizer over the units [shard.first_unit, shard.end_unit): their slots read the summed
  // gradients from the sharded accumulators or the flat buffer, and (`master`, ZeRO-3) update the
  // master it gives for a unit instead of the backend's weight.
  void make_optimizer(const distributed::Shard& shard, const config::Optimizer& optimizer,
                      const std::function<float*(size_t unit)>& master = {});

  DType gradient_dtype() const override { return DType::F32; }
  CollectiveRegion flat_gradients() override;
  std::vector<CollectiveRegion> tied_gradients() override { return tied_gradient_regions; }
  std::vector<CollectiveRegion> tied_weights() override { return tied_weight_regions; }
  void count_squares(size_t first, size_t end) override;
  double squares(distributed::Communicator&) override { return std::exchange(squares_, 0.0); }
  void set_grad_norm(double norm) override { grad_norm_ = norm; }
  void step(const OptimizerStep& step) override;
  // ZeRO-2 has no flat buffer: its bucket staging carries the weights.
  PublishedWeights published_weights() override { return {sharded ? nullptr : flat.data(), DType::F32}; }
  ShardCopies shard_copies() override { return cpu_shard_copies(unit_weights_, offsets_, flat.data()); }
  void publish_in_buckets() override { sharded->all_gather(unit_weights_); }
  void zero_gradients() override;
  std::vector<StateTensor> optimizer_state() override {
    return optimizer ? optimizer->state_tensors() : std::vector<StateTensor>{};
  }
  size_t gradient_accumulator_bytes() const override;

  std::span<const size_t> offsets() const { return offsets_; }

  CpuParameters parameters;  // every parameter of the rank's plan (spec order) on its training backend
  std::vector<float> flat;   // the units' summed gradients, then (ZeRO-1) their weights
  std::vector<ParameterSlot> shard_slots;  // the shard's slots
  std::unique_ptr<Optimizer> optimizer;    // state for the shard's tensors only (none if empty)
  // A pipeline's tensors shared with its other end: their gradients and weights.
  std::vector<CollectiveRegion> tied_gradient_regions, tied_weight_regions;
  // The replica reduction's pieces (cpu_rank_host.cpp).
  std::unique_ptr<CpuGradientReducer> reducer;   // ZeRO-1: the buckets, during the last micro-batch
  std::unique_ptr<CpuShardedGradients> sharded;  // ZeRO-2/3: the shard's accumulators
  std::unique_ptr<CpuWeightGatherer> gatherer;   // ZeRO-3: the rank's pieces and their gathers
  std::unique_ptr<runtime::StepObserver> quantized_gatherer;  // ZeRO-3: the quantized base's gathers
  std::vector<float> scratch;                    // ZeRO-3: one weight on its way to or from the host

private:
  runtime::CpuBackend& training_;
  double max_grad_norm_;
  std::vector<size_t> units_;           // each unit's index in parameters.trainable
  std::vector<WeightView> unit_weights_;
  std::vector<size_t> offsets_;         // each unit's offset in `flat`
  double squares_ = 0.0;                // of count_squares' units
  double grad_norm_ = 0.0;
};

}  // namespace surogate::train
