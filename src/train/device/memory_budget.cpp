// Device memory estimate of a training plan; see memory_budget.h.
#include "train/device/memory_budget.h"

#include <algorithm>
#include <set>
#include <utility>

#include "compiler/memory_plan.h"
#include "distributed/shard_placement.h"
#include "runtime/attention_settings.h"
#include "train/device/host_offload_plan.h"
#include "train/device/quantized_base_shards.h"
#include "train/device/sharded_gradients.h"
#include "train/device/weight_shards.h"
#include "train/optim/quantization_map.h"

namespace surogate::train {

namespace {

size_t master_bytes_per_element(const config::Precision& precision) {
  return precision.master_dtype == MasterDtype::Bf16 ? 0 : sizeof(float);
}
size_t accumulator_bytes_per_element(const config::Precision& precision) {
  return precision.gradient_dtype == GradientDtype::Bf16 ? 2 : sizeof(float);
}
// The optimizer state of `trainable` elements, as the device optimizers lay it out
// (train/device/device_optimizer.cpp, up to per-tensor rounding to 16 bytes).
size_t optimizer_bytes(const config::Optimizer& optimizer, size_t trainable) {
  switch (optimizer.algorithm) {
    case surogate::Optimizer::AdamW: return trainable * 2 * sizeof(float);
    case surogate::Optimizer::AdamW8bit:  // two 8-bit moments and their fp32 absmax per block
      return trainable * 2 + 2 * sizeof(float) * static_cast<size_t>(quantization_blocks(static_cast<int64_t>(trainable)));
    case surogate::Optimizer::NorMuon: return trainable * 2 * sizeof(float);  // momentum + at most one second moment each
  }
  return trainable * 2 * sizeof(float);
}

}  // namespace

PlanMemory plan_memory(const compiler::ExecutionPlan& plan, const TrainingStateOptions& options, int optimizer_shards,
                       int weight_shards, const GradientSharding& gradient_sharding) {
  const compiler::MemoryPlan& memory = plan.memory;
  const size_t alignment = memory.alignment;
  size_t trainable = 0;
  std::vector<size_t> sizes;
  std::vector<graph::TensorId> trainable_ids;
  // The trainable tensors as the CUDA device lays them out (parameter order, starts rounded up to
  // 4 elements), for the offload staging slots.
  std::vector<TrainableExtent> extents;
  int64_t flat = 0;
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    trainable_ids.push_back(parameter);
    sizes.push_back(static_cast<size_t>(plan.graph.tensor(parameter).type.numel()));
    trainable += sizes.back();
    const auto count = static_cast<int64_t>(sizes.back()), padded = (count + 3) / 4 * 4;
    extents.push_back({flat, padded, count});
    flat += padded;
  }
  PlanMemory result;
  result.activations = compiler::align_up(memory.arena_bytes, alignment);
  result.weights = compiler::align_up(memory.parameter_bytes, alignment);
  result.gradients = compiler::align_up(memory.gradient_bytes, alignment);
  result.inputs = compiler::align_up(memory.input_bytes, alignment);
  result.host_residuals = memory.host_bytes;
  result.masters = trainable * master_bytes_per_element(options.precision);
  result.accumulators = trainable * accumulator_bytes_per_element(options.precision);
  if (gradient_sharding.ranks > 1) {
    const size_t element_bytes = accumulator_bytes_per_element(options.precision);
    result.accumulators = element_bytes * sharded_accumulator_elements(sizes, gradient_sharding.ranks,
                                                                       std::max<size_t>(1, gradient_sharding.bucket_bytes / element_bytes),
                                                                       gradient_sharding.staging_slots);
  }
  result.optimizer = optimizer_bytes(options.optimizer, trainable);
  if (optimizer_shards > 1) {
    result.optimizer = 0;
    for (const distributed::Shard& shard : distributed::place_shards(sizes, optimizer_shards)) {
      size_t elements = 0;
      for (size_t unit = shard.first_unit; unit < shard.end_unit; ++unit) elements += sizes[unit];
      result.optimizer = std::max(result.optimizer, optimizer_bytes(options.optimizer, elements));
    }
  }
  if (weight_shards > 1) {
    // ZeRO-3: the rank keeps its shard of the weights, and the masters of its trainable ones.
    const std::vector<distributed::Shard> shards = distributed::place_shards(sizes, weight_shards);
    const compiler::WeightGathering gathering = zero3_gathering(plan, trainable_ids, shards, weight_shards);
    std::set<graph::TensorId> sharded;
    for (const compiler::GatherGroup& group : gathering.groups) sharded.insert(group.tensors.begin(), group.tensors.end());
    size_t kept = 0;  // the parameter region's bytes that stay: what is not sharded
    for (size_t id = 0; id < memory.placements.size(); ++id) {
      const compiler::TensorPlacement& placement = memory.placements[id];
      if (placement.storage != compiler::Storage::Parameters || sharded.contains(static_cast<graph::TensorId>(id))) continue;
      kept += compiler::align_up(std::max<size_t>(placement.size_bytes, 1), alignment);
    }
    result.weights = kept + gathering.largest_owned_bytes();
    result.gathered = gathering.region_bytes;
    size_t largest_shard = 0;
    for (const distributed::Shard& shard : shards) largest_shard = std::max(largest_shard, shard.size());
    result.masters = largest_shard * master_bytes_per_element(options.precision);
  }
  if (weight_shards > 1 || options.offload.offload_quants) {
    // The quantized base leaves `weights` (which counts it whole, in the parameter region) for its
    // own category, as the devices keep it (quantized_base_shards.h).
    const QuantizedBaseMemory whole = quantized_base_memory(plan, QuantizedBaseKeeping::Whole, 1);
    const QuantizedBaseMemory kept =
        quantized_base_memory(plan, quantized_base_keeping(options.offload), weight_shards);
    result.weights -= std::min(result.weights, whole.device);
    result.quantized_base = kept.device;
    result.gathered += kept.gathered;
    result.host_quantized = kept.host;
  }
  const HostOffloadPlan offload = plan_host_offload(options.offload, options.optimizer.algorithm, extents);
  result.staging = offload.staging_bytes();
  if (offload.masters) result.host_masters = std::exchange(result.masters, 0);
  if (offload.gradients) result.host_accumulators = std::exchange(result.accumulators, 0);
  if (offload.optimizer) result.host_optimizer = std::exchange(result.optimizer, 0);
  return result;
}

size_t lm_head_workspace_bytes(const compiler::ExecutionPlan& plan) {
  for (const graph::Node& node : plan.graph.nodes) {
    if (!node.op.starts_with("lm_head_loss") || node.op.ends_with("backward")) continue;
    const graph::TensorType& hidden = plan.graph.tensor(node.inputs[0]).type;
    const graph::TensorType& weight = plan.graph.tensor(node.inputs[1]).type;
    const int64_t rows = hidden.numel() / hidden.shape.back();
    const int64_t chunks = std::max<int64_t>(1, node.attrs.value("chunks", int64_t{1}));
    const int64_t chunk_rows = (rows + chunks - 1) / chunks;
    const bool trainable_head = plan.parameter_gradients.contains(node.inputs[1]);
    // Rows in one chunk: the weight-gradient GEMM writes the 16-bit d_weight (an arena tensor)
    // itself; only several chunks sum into a fp32 accumulator here.
    const bool accumulator = trainable_head && chunk_rows < rows;
    return static_cast<size_t>(chunk_rows * weight.shape[0] * 2 + rows * 4 + 16) +
           (accumulator ? static_cast<size_t>(weight.numel()) * sizeof(float) : 0);
  }
  return 0;
}

size_t attention_workspace_bytes(const compiler::ExecutionPlan& plan) {
  size_t largest = 0;
  for (const graph::Node& node : plan.graph.nodes) {
    if (node.op != "attention_backward") continue;
    const graph::TensorType& q = plan.graph.tensor(node.inputs[0]).type;
    const int64_t tokens = q.shape[0] * q.shape[1];
    const int64_t width = q.numel() / tokens;  // Hq · D
    const int64_t heads = q.shape.size() == 4 ? q.shape[2] : node.attrs.value("query_heads", int64_t{1});
    largest = std::max(largest, runtime::planned_attention_scratch_bytes(tokens, heads, width / heads));
  }
  return largest;
}

size_t device_margin_bytes(size_t total_bytes) {
  return std::max<size_t>(size_t{1} << 30, total_bytes / 100 * 2);
}

}  // namespace surogate::train
