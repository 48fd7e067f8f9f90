// Which rank owns which part of a flat buffer: the one shard-placement function (as llm.c's
// multi_gpu_get_shard_offset). The flat buffer is the concatenation of "units" — today the
// trainable tensors in the plan's order, since every optimizer (NorMuon orthogonalises whole
// matrices, adamw_8bit quantises per-tensor blocks) updates a tensor as one piece; their state
// tensors are per parameter, so a checkpoint of sharded state is the single-rank checkpoint.
//
// Rank r owns a contiguous run of units, [first_unit, end_unit), which is the contiguous element
// range [begin, end) of the flat buffer: unit u goes to the rank whose even share of the flat
// buffer, [r·T/N, (r+1)·T/N), holds the unit's midpoint. Units stay whole, so a rank may own
// nothing when one unit is larger than a share (an embedding on many ranks).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace surogate::distributed {

struct Shard {
  size_t first_unit = 0, end_unit = 0;  // units [first_unit, end_unit)
  size_t begin = 0, end = 0;            // elements [begin, end) of the flat buffer
  size_t size() const { return end - begin; }
};

// One Shard per rank, in rank order; together they cover every unit exactly once.
std::vector<Shard> place_shards(std::span<const size_t> unit_sizes, int world_size);

// The shards' element counts, as the collectives take them (Communicator::all_gather).
std::vector<size_t> shard_sizes(std::span<const Shard> shards);

}  // namespace surogate::distributed
