// One CPU rank of the parallel device; see cpu_rank.h.
#include "train/device/parallel/cpu_rank.h"

#include <cstring>

#include "ops/gradient_norm.h"

namespace surogate::train {

void CpuRank::set_units(std::vector<size_t> trainable, bool flat_buffer) {
  units_ = std::move(trainable);
  size_t total = 0;
  for (const size_t index : units_) {
    unit_weights_.push_back(parameters.trainable[index]);
    offsets_.push_back(total);
    total += parameters.trainable[index].values.size();
  }
  if (flat_buffer) flat.assign(total, 0.0f);
}

void CpuRank::make_optimizer(const distributed::Shard& shard, const config::Optimizer& optimizer,
                             const std::function<float*(size_t unit)>& master) {
  for (size_t unit = shard.first_unit; unit < shard.end_unit; ++unit) {
    ParameterSlot slot = parameters.slots[units_[unit]];
    slot.gradient = sharded ? sharded->accumulator(unit) : flat.data() + offsets_[unit];
    if (master) slot.master = master(unit);
    shard_slots.push_back(slot);
  }
  if (!shard_slots.empty()) this->optimizer = make_cpu_optimizer(optimizer, shard_slots);
}

CollectiveRegion CpuRank::flat_gradients() {
  for (size_t unit = 0; unit < units_.size(); ++unit) {
    const std::span<const float> gradient = parameters.gradients[units_[unit]];
    std::memcpy(flat.data() + offsets_[unit], gradient.data(), gradient.size_bytes());
  }
  return {flat.data(), flat.size()};
}

// ZeRO-2/3: the accumulators are the shard's units exactly; otherwise the flat buffer's run of them.
void CpuRank::count_squares(size_t first, size_t end) {
  if (sharded) {
    const std::span<const float> shard_sums = sharded->accumulators();
    squares_ = ops::sum_of_squares(shard_sums.data(), static_cast<int64_t>(shard_sums.size()));
    return;
  }
  const size_t begin = first < offsets_.size() ? offsets_[first] : flat.size();
  const size_t stop = end < offsets_.size() ? offsets_[end] : flat.size();
  squares_ = ops::sum_of_squares(flat.data() + begin, static_cast<int64_t>(stop - begin));
}

void CpuRank::step(const OptimizerStep& step) {
  if (!optimizer) return;
  // fp16: the gradients come scaled by the loss scale; the step unscales them, as on one rank.
  clip_slot_gradients(shard_slots, grad_norm_, max_grad_norm_, step.gradient_scale);
  optimizer->step(shard_slots, step);
}

// The flat buffer is overwritten by the next step's reduction.
void CpuRank::zero_gradients() {
  training_.zero_gradients();
  if (sharded) sharded->zero();
}

// The flat buffer accumulates only where the buckets reduce into it (ZeRO-1); a pipeline stage's
// gradients accumulate in its plan and are only copied there.
size_t CpuRank::gradient_accumulator_bytes() const {
  if (sharded) return sharded->bytes();
  return reducer ? flat.size() * sizeof(float) : 0;
}

}  // namespace surogate::train
