// Micro-batch copies for multi-rank devices; see micro_batch.h.
#include "train/device/micro_batch.h"

#include <cstring>

#include "core/dropout_rate.h"
#include "core/error.h"
#include "models/lora.h"

namespace surogate::train {

std::vector<runtime::InputBinding> MicroBatch::bindings() const {
  std::vector<runtime::InputBinding> result;
  for (size_t i = 0; i < tensors.size(); ++i) result.push_back({tensors[i], bytes[i]});
  return result;
}

namespace {
// A bound dropout seed that switches dropout off (core/dropout_rate.h), kept as it is on every slice.
bool dropout_off(const std::vector<std::byte>& seed) {
  int32_t value = 0;
  std::memcpy(&value, seed.data(), sizeof(value));
  return value == kDropoutOffSeed;
}
}  // namespace

MicroBatch copy_micro_batch(const compiler::ExecutionPlan& source, const compiler::ExecutionPlan& plan,
                            std::span<const runtime::InputBinding> inputs, int sequence, int ranks) {
  MicroBatch batch;
  for (const runtime::InputBinding& input : inputs) {
    const std::string& name = source.graph.tensor(input.tensor).name;
    const std::optional<graph::TensorId> id = &source == &plan ? std::optional(input.tensor) : plan.graph.find_tensor(name);
    if (!id) continue;  // an input this plan does not read (a pipeline stage's)
    const graph::TensorType& type = plan.graph.tensor(*id).type;
    batch.tensors.push_back(*id);
    if (input.data.size() == type.size_bytes()) {
      batch.bytes.emplace_back(input.data.begin(), input.data.end());
      if (name == models::kDropoutSeed && ranks > 1 && !dropout_off(batch.bytes.back())) {
        // Each slice draws its own LoRA dropout masks: the ranks of a group index their slices'
        // elements alike, so one seed would give every slice the same mask.
        int32_t seed = 0;
        std::memcpy(&seed, batch.bytes.back().data(), sizeof(seed));
        seed = static_cast<int32_t>(static_cast<uint32_t>(seed) * 0x9e3779b1u + static_cast<uint32_t>(sequence) * 0x85ebca6bu);
        std::memcpy(batch.bytes.back().data(), &seed, sizeof(seed));
      }
      continue;
    }
    // A token input this plan holds at T/N per row: rank `sequence`'s slice of each row.
    SUROGATE_CHECK(type.shape.size() == 2 && input.data.size() == type.size_bytes() * static_cast<size_t>(ranks),
                   "input '{}': {} bytes bound, the plan holds {} ({} ranks)", name, input.data.size(),
                   type.size_bytes(), ranks);
    const size_t slice = type.size_bytes() / static_cast<size_t>(type.shape[0]);  // one row's T/N tokens
    std::vector<std::byte>& bytes = batch.bytes.emplace_back(type.size_bytes());
    for (int64_t row = 0; row < type.shape[0]; ++row) {
      const size_t from = (static_cast<size_t>(row) * static_cast<size_t>(ranks) + static_cast<size_t>(sequence)) * slice;
      std::memcpy(bytes.data() + static_cast<size_t>(row) * slice, input.data.data() + from, slice);
    }
  }
  return batch;
}

}  // namespace surogate::train
