// Where ZeRO-3 keeps the quantized base; see quantized_base_shards.h.
#include "train/device/quantized_base_shards.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.h"
#include "distributed/shard_placement.h"

namespace surogate::train {

QuantizedBaseKeeping quantized_base_keeping(const config::Offload& offload) {
  if (!offload.persistent_quants) return QuantizedBaseKeeping::Sharded;
  return offload.offload_quants ? QuantizedBaseKeeping::Offloaded : QuantizedBaseKeeping::Whole;
}

std::vector<graph::TensorId> quantized_base_pieces(const compiler::ExecutionPlan& plan) {
  std::set<graph::TensorId> pieces;
  for (const models::QuantizedWeight& weight : models::quantized_weights(plan.graph)) {
    for (const std::string& piece : weight.pieces) pieces.insert(plan.tensor(piece));
  }
  return {pieces.begin(), pieces.end()};
}

compiler::WeightGathering quantized_base_gathering(const compiler::ExecutionPlan& plan, QuantizedBaseKeeping keeping,
                                                   int world_size) {
  std::vector<compiler::ShardedWeight> weights;
  const std::vector<graph::TensorId> pieces = quantized_base_pieces(plan);
  if (keeping == QuantizedBaseKeeping::Whole || pieces.empty()) {
    return compiler::schedule_weight_gathering(plan, weights, 1, true);
  }
  if (keeping == QuantizedBaseKeeping::Offloaded) {
    for (graph::TensorId id : pieces) weights.push_back({id, 0});
    return compiler::schedule_weight_gathering(plan, weights, 1, true);
  }
  std::vector<size_t> sizes;
  for (graph::TensorId id : pieces) sizes.push_back(plan.graph.tensor(id).type.size_bytes());
  const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    const distributed::Shard& shard = shards[static_cast<size_t>(rank)];
    for (size_t unit = shard.first_unit; unit < shard.end_unit; ++unit) weights.push_back({pieces[unit], rank});
  }
  std::stable_sort(weights.begin(), weights.end(),
                   [](const compiler::ShardedWeight& a, const compiler::ShardedWeight& b) { return a.tensor < b.tensor; });
  return compiler::schedule_weight_gathering(plan, weights, world_size, true);
}

std::byte* QuantizedBaseShard::piece(size_t g) const {
  return owned + gathering->groups[g].owned_offsets[static_cast<size_t>(keeper)];
}

size_t QuantizedBaseShard::piece_bytes(size_t g) const {
  const compiler::GatherGroup& group = gathering->groups[g];
  const auto r = static_cast<size_t>(keeper);
  return group.piece_offsets[r + 1] - group.piece_offsets[r];
}

std::optional<size_t> QuantizedBaseShard::offset_of(graph::TensorId tensor) const {
  const auto [g, index] = gathering->locate(tensor);
  const compiler::GatherGroup& group = gathering->groups[g];
  if (group.owners[index] != keeper) return std::nullopt;
  const auto r = static_cast<size_t>(keeper);
  return group.owned_offsets[r] + group.tensor_offsets[index] - group.piece_offsets[r];
}

void QuantizedBaseShard::keep(const compiler::ExecutionPlan& plan, const models::QuantizedWeight& weight,
                              const QuantizedPieces& pieces,
                              const std::function<void(size_t offset, std::span<const std::byte> bytes)>& write) const {
  SUROGATE_CHECK(pieces.bytes.size() == weight.pieces.size(), "'{}': {} pieces for {}", weight.name, pieces.bytes.size(),
                 weight.pieces.size());
  for (size_t i = 0; i < weight.pieces.size(); ++i) {
    const graph::TensorId id = plan.tensor(weight.pieces[i]);
    SUROGATE_CHECK(pieces.bytes[i].size() == plan.graph.tensor(id).type.size_bytes(), "'{}': {} bytes for {}",
                   weight.pieces[i], pieces.bytes[i].size(), plan.graph.tensor(id).type.size_bytes());
    if (const std::optional<size_t> offset = offset_of(id)) write(*offset, pieces.bytes[i]);
  }
}

std::vector<size_t> byte_group_piece_counts(const compiler::GatherGroup& group) {
  SUROGATE_CHECK(group.dtype == DType::U8, "group '{}' is not a byte group", group.name);
  std::vector<size_t> counts = group.piece_counts();
  for (size_t& count : counts) {
    SUROGATE_CHECK(count % 2 == 0, "group '{}' has a piece of an odd byte count", group.name);
    count /= 2;
  }
  return counts;
}

QuantizedBaseMemory quantized_base_memory(const compiler::ExecutionPlan& plan, QuantizedBaseKeeping keeping,
                                          int world_size) {
  QuantizedBaseMemory memory;
  if (keeping == QuantizedBaseKeeping::Whole) {
    for (graph::TensorId id : quantized_base_pieces(plan)) {
      memory.device += compiler::align_up(std::max<size_t>(plan.graph.tensor(id).type.size_bytes(), 1),
                                          plan.memory.alignment);
    }
    return memory;
  }
  const compiler::WeightGathering gathering = quantized_base_gathering(plan, keeping, world_size);
  memory.gathered = gathering.region_bytes;
  if (keeping == QuantizedBaseKeeping::Offloaded) memory.host = gathering.largest_owned_bytes();
  else memory.device = gathering.largest_owned_bytes();
  return memory;
}

}  // namespace surogate::train
