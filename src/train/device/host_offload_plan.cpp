// The host-offload plan; see host_offload_plan.h.
#include "train/device/host_offload_plan.h"

#include <algorithm>

#include "core/error.h"
#include "train/optim/quantization_map.h"

namespace surogate::train {
namespace {

// Elements rounded up to whole 16-byte vectors, as MirroredState lays them out.
size_t state_vector_bytes(int64_t count, size_t element) {
  const auto per_vector = static_cast<int64_t>(16 / element);
  return static_cast<size_t>((count + per_vector - 1) / per_vector * per_vector) * element;
}

// Each of an optimizer's state arrays (at most four) starts 256-byte aligned in its slot.
constexpr size_t kSlotAlignment = 256;
constexpr size_t kStateArrays = 4;

}  // namespace

size_t staged_state_bytes(surogate::Optimizer algorithm, int64_t count) {
  switch (algorithm) {
    case surogate::Optimizer::AdamW: return 2 * state_vector_bytes(count, sizeof(float));
    case surogate::Optimizer::AdamW8bit:
      return 2 * state_vector_bytes(count, 1) + 2 * state_vector_bytes(quantization_blocks(count), sizeof(float));
    case surogate::Optimizer::NorMuon: break;  // never staged (config/feature_support.cpp)
  }
  SUROGATE_CHECK(false, "a staged optimizer is adamw or adamw_8bit");
  return 0;
}

HostOffloadPlan plan_host_offload(const config::Offload& offload, surogate::Optimizer algorithm,
                                  std::span<const TrainableExtent> trainable, size_t chunk_bytes) {
  HostOffloadPlan plan;
  plan.masters = offload.offload_master;
  plan.optimizer = offload.offload_optimizer;
  plan.gradients = offload.offload_grads;
  plan.write_combined = offload.use_write_combined;
  plan.staged = (plan.masters || plan.optimizer) && !offload.use_zero_copy && !trainable.empty();
  if (!plan.staged) return plan;

  auto master_bytes = [&](const TrainableExtent& t) { return static_cast<size_t>(t.padded) * sizeof(float); };
  auto state_bytes = [&](const TrainableExtent& t) { return staged_state_bytes(algorithm, t.count); };
  auto tensor_bytes = [&](const TrainableExtent& t) {
    return (plan.masters ? master_bytes(t) : 0) + (plan.optimizer ? state_bytes(t) : 0);
  };
  HostOffloadPlan::Chunk chunk;
  size_t bytes = 0;
  for (size_t i = 0; i < trainable.size(); ++i) {
    const size_t add = tensor_bytes(trainable[i]);
    if (chunk.end > chunk.first && bytes + add > chunk_bytes) {
      plan.chunks.push_back(chunk);
      chunk = {};
      chunk.first = chunk.end = i;
      bytes = 0;
    }
    if (chunk.end == chunk.first) chunk.master_offset = trainable[i].offset;
    chunk.end = i + 1;
    chunk.master_count = trainable[i].offset + trainable[i].padded - chunk.master_offset;
    chunk.state_bytes += state_bytes(trainable[i]);
    bytes += add;
  }
  plan.chunks.push_back(chunk);
  for (HostOffloadPlan::Chunk& c : plan.chunks) {
    c.state_bytes += kStateArrays * kSlotAlignment;
    if (plan.masters) {
      plan.slot_master_bytes = std::max(plan.slot_master_bytes, static_cast<size_t>(c.master_count) * sizeof(float));
    }
    if (plan.optimizer) plan.slot_state_bytes = std::max(plan.slot_state_bytes, c.state_bytes);
  }
  plan.slot_master_bytes = (plan.slot_master_bytes + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  return plan;
}

}  // namespace surogate::train
