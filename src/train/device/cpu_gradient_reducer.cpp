// ZeRO-1's gradient buckets on a CPU rank; see cpu_gradient_reducer.h.
#include "train/device/cpu_gradient_reducer.h"

#include <cstring>

namespace surogate::train {

CpuGradientReducer::CpuGradientReducer(const GradientBuckets& buckets,
                                       std::span<const std::span<const float>> gradients,
                                       std::span<const size_t> offsets, float* flat, const distributed::Shard& shard,
                                       distributed::Communicator& communicator)
    : gradients_(gradients), offsets_(offsets), flat_(flat), reduction_(buckets, *this, DType::F32, communicator, shard) {}

std::byte* CpuGradientReducer::fill(size_t, const GradientBucket& bucket) {
  for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) {
    std::memcpy(flat_ + offsets_[unit], gradients_[unit].data(), gradients_[unit].size_bytes());
  }
  return reinterpret_cast<std::byte*>(flat_ + bucket.begin);
}

}  // namespace surogate::train
