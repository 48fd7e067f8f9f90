// ZeRO-1's weight exchange; see shard_publish.h.
#include "train/device/shard_publish.h"

#include <cstring>

namespace surogate::train {

void publish_shard(distributed::Communicator& group, void* flat, std::span<const size_t> pieces, DType dtype,
                   const distributed::Shard& shard, size_t units, const ShardCopies& copies) {
  if (group.world_size() == 1) return;
  if (copies.into_flat) copies.into_flat(shard.first_unit, shard.end_unit);
  group.all_gather(flat, pieces, dtype);
  copies.from_flat(0, shard.first_unit);
  copies.from_flat(shard.end_unit, units);
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
