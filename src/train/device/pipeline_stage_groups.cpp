// A pipeline rank's gradient group and tied pair; see pipeline_stage_groups.h.
#include "train/device/pipeline_stage_groups.h"

#include <fmt/format.h>

namespace surogate::train {

int stage_group_index(const distributed::ParallelLayout& layout, const distributed::RankPlace& place) {
  return place.replica * layout.sequence_size + place.sequence;
}

distributed::RankGroup stage_gradient_group(const distributed::ParallelLayout& layout, int rank) {
  const distributed::RankPlace place = layout.place(rank);
  return {fmt::format("stage-{}", place.stage), stage_group_index(layout, place), layout.gradient_group_size()};
}

distributed::RankGroup tied_pair_group(const distributed::ParallelLayout& layout, int rank, bool tied) {
  const distributed::RankPlace place = layout.place(rank);
  if (!tied || (place.stage != 0 && place.stage != layout.pipeline_size - 1)) {
    return {fmt::format("alone-{}", rank), 0, 1};
  }
  return {fmt::format("tied-{}-{}", place.replica, place.sequence), place.stage == 0 ? 0 : 1, 2};
}

void sum_tied_gradients(distributed::Communicator& pair, std::span<const CollectiveRegion> tied, DType dtype) {
  for (const CollectiveRegion& region : tied) pair.all_reduce_sum(region.data, region.count, dtype);
}

void sum_stage_gradients(distributed::Communicator& group, CollectiveRegion owned, std::span<const size_t> pieces,
                         DType dtype) {
  if (group.world_size() == 1) return;
  group.reduce_scatter_sum(owned.data, pieces, dtype);
}

void share_tied_weights(distributed::Communicator& pair, std::span<const CollectiveRegion> tied, DType dtype) {
  for (const CollectiveRegion& region : tied) pair.broadcast(region.data, region.count, dtype, 0);
}

}  // namespace surogate::train
