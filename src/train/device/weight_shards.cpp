// Which weights ZeRO-3 shards and who keeps them; see weight_shards.h.
#include "train/device/weight_shards.h"

#include <algorithm>
#include <set>
#include <string>

#include "core/error.h"
#include "models/fp8_recipe.h"
#include "models/quantized_weight.h"

namespace surogate::train {

std::vector<graph::TensorId> shardable_weights(const compiler::ExecutionPlan& plan) {
  std::set<std::string> written_by_device;
  for (const models::QuantizedWeight& weight : models::quantized_weights(plan.graph)) {
    written_by_device.insert(weight.pieces.begin(), weight.pieces.end());
  }
  for (const models::Fp8TrainedWeight& weight : models::fp8_trained_weights(plan.graph)) {
    written_by_device.insert({weight.codes, weight.transposed, weight.scale_inv});
  }
  if (const auto state = models::fp8_scaling_state(plan.graph)) written_by_device.insert(state->name);
  std::vector<graph::TensorId> weights;
  for (graph::TensorId id : plan.graph.parameters) {
    const graph::TensorInfo& info = plan.graph.tensor(id);
    if (info.role == graph::TensorRole::Parameter && !written_by_device.contains(info.name)) weights.push_back(id);
  }
  return weights;
}

std::vector<compiler::ShardedWeight> weight_owners(const compiler::ExecutionPlan& plan,
                                                   std::span<const graph::TensorId> trainable,
                                                   std::span<const distributed::Shard> trainable_shards, int world_size) {
  SUROGATE_CHECK(trainable_shards.size() == static_cast<size_t>(world_size), "one optimizer shard per rank");
  std::vector<compiler::ShardedWeight> owners;
  std::set<graph::TensorId> trained(trainable.begin(), trainable.end());
  for (int rank = 0; rank < world_size; ++rank) {
    const distributed::Shard& shard = trainable_shards[static_cast<size_t>(rank)];
    for (size_t unit = shard.first_unit; unit < shard.end_unit; ++unit) owners.push_back({trainable[unit], rank});
  }
  std::vector<graph::TensorId> frozen;
  std::vector<size_t> sizes;
  for (graph::TensorId id : shardable_weights(plan)) {
    if (trained.contains(id)) continue;
    frozen.push_back(id);
    sizes.push_back(static_cast<size_t>(plan.graph.tensor(id).type.numel()));
  }
  const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    const distributed::Shard& shard = shards[static_cast<size_t>(rank)];
    for (size_t unit = shard.first_unit; unit < shard.end_unit; ++unit) owners.push_back({frozen[unit], rank});
  }
  // Tensor order (the order the graph declared them), so a group's buffer lists its weights as the
  // model does.
  std::stable_sort(owners.begin(), owners.end(), [](const compiler::ShardedWeight& a, const compiler::ShardedWeight& b) {
    return a.tensor < b.tensor;
  });
  return owners;
}

compiler::WeightGathering zero3_gathering(const compiler::ExecutionPlan& plan, std::span<const graph::TensorId> trainable,
                                          std::span<const distributed::Shard> trainable_shards, int world_size) {
  const std::vector<compiler::ShardedWeight> owners = weight_owners(plan, trainable, trainable_shards, world_size);
  return compiler::schedule_weight_gathering(plan, owners, world_size);
}

compiler::WeightGathering evaluation_gathering(const compiler::ExecutionPlan& plan) {
  std::vector<compiler::ShardedWeight> weights;
  for (graph::TensorId id : shardable_weights(plan)) weights.push_back({id, 0});
  return compiler::schedule_weight_gathering(plan, weights, 1);
}

}  // namespace surogate::train
