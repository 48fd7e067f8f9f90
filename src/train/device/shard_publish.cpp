// ZeRO-1's weight exchange; see shard_publish.h.
#include "train/device/shard_publish.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace surogate::train {

void publish_shard(distributed::Communicator& group, void* flat, std::span<const size_t> pieces, DType dtype,
                   const distributed::Shard& shard, size_t units, const ShardCopies& copies) {
  if (group.world_size() == 1) return;
  if (copies.into_flat) copies.into_flat(shard.first_unit, shard.end_unit);
  group.all_gather(flat, pieces, dtype);
  copies.from_flat(0, shard.first_unit);
  copies.from_flat(shard.end_unit, units);
}

void publish_shard_in_buckets(distributed::Communicator& group, void* flat, std::span<const GradientBucket> buckets,
                              DType dtype, const distributed::Shard& shard, const ShardCopies& copies,
                              const std::function<void(size_t bucket)>& published) {
  if (group.world_size() == 1) return;
  const size_t element = dtype_size_bytes(dtype);
  for (size_t b = 0; b < buckets.size(); ++b) {
    const GradientBucket& bucket = buckets[b];
    SUROGATE_CHECK(bucket.piece_counts.size() == static_cast<size_t>(group.world_size()),
                   "a publish bucket has a piece per rank");
    SUROGATE_CHECK(b == 0 || buckets[b - 1].end_unit <= bucket.first_unit, "publish buckets hold whole units");
    // The bucket's units the rank steps, [own_first, own_end) (empty when it steps none of them).
    const size_t own_first = std::clamp(shard.first_unit, bucket.first_unit, bucket.end_unit);
    const size_t own_end = std::clamp(shard.end_unit, own_first, bucket.end_unit);
    if (copies.into_flat && own_first < own_end) copies.into_flat(own_first, own_end);
    group.all_gather(static_cast<std::byte*>(flat) + bucket.begin * element, bucket.piece_counts, dtype);
    if (bucket.first_unit < own_first) copies.from_flat(bucket.first_unit, own_first);
    if (own_end < bucket.end_unit) copies.from_flat(own_end, bucket.end_unit);
    if (published) published(b);
  }
}

ShardCopies cpu_shard_copies(std::span<const WeightView> weights, std::span<const size_t> offsets, float* flat) {
  return {[=](size_t first, size_t end) {
            for (size_t unit = first; unit < end; ++unit) {
              std::memcpy(flat + offsets[unit], weights[unit].values.data(), weights[unit].values.size_bytes());
            }
          },
          [=](size_t first, size_t end) {
            for (size_t unit = first; unit < end; ++unit) {
              std::memcpy(weights[unit].values.data(), flat + offsets[unit], weights[unit].values.size_bytes());
            }
          }};
}

}  // namespace surogate::train
