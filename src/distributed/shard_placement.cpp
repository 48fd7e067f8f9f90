// Shard placement; see shard_placement.h.
#include "distributed/shard_placement.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::distributed {

std::vector<Shard> place_shards(std::span<const size_t> unit_sizes, int world_size) {
  SUROGATE_CHECK(world_size >= 1, "a world has at least one rank");
  const size_t ranks = static_cast<size_t>(world_size);
  size_t total = 0;
  for (size_t size : unit_sizes) total += size;
  std::vector<Shard> shards(ranks);
  size_t offset = 0;
  size_t rank = 0;
  for (size_t unit = 0; unit < unit_sizes.size(); ++unit) {
    // Twice the midpoint, so the comparison stays in integers: 2·start + size < 2·(r+1)·T/N.
    const size_t midpoint_twice = 2 * offset + unit_sizes[unit];
    size_t owner = total == 0 ? 0 : std::min(ranks - 1, midpoint_twice * ranks / (2 * total));
    owner = std::max(owner, rank);  // midpoints only grow: owners never go back
    for (; rank < owner; ++rank) {
      shards[rank + 1].first_unit = shards[rank + 1].end_unit = shards[rank].end_unit;
      shards[rank + 1].begin = shards[rank + 1].end = shards[rank].end;
    }
    shards[rank].end_unit = unit + 1;
    offset += unit_sizes[unit];
    shards[rank].end = offset;
  }
  for (; rank + 1 < ranks; ++rank) {
    shards[rank + 1].first_unit = shards[rank + 1].end_unit = shards[rank].end_unit;
    shards[rank + 1].begin = shards[rank + 1].end = shards[rank].end;
  }
  return shards;
}

std::vector<size_t> shard_sizes(std::span<const Shard> shards) {
  std::vector<size_t> sizes;
  for (const Shard& shard : shards) sizes.push_back(shard.size());
  return sizes;
}

}  // namespace surogate::distributed
