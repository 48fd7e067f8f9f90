// The device optimizer chosen by the `optimizer` option (see device_optimizer.h).
#include "train/device/device_optimizer.h"

#include <algorithm>

#include "core/error.h"
#include "train/optim/quantization_map.h"

namespace surogate::train {
namespace {

// Elements rounded up to whole 16-byte vectors, as MirroredState lays them out.
size_t vector_bytes(int64_t count, size_t element) {
  const int64_t per_vector = 16 / static_cast<int64_t>(element);
  return static_cast<size_t>((count + per_vector - 1) / per_vector * per_vector) * element;
}

}  // namespace

size_t device_optimizer_bytes(const config::Optimizer& optimizer, const std::vector<DeviceParameter>& parameters) {
  size_t bytes = 0;
  for (const DeviceParameter& p : parameters) {
    switch (optimizer.algorithm) {
      case surogate::Optimizer::AdamW: bytes += 2 * vector_bytes(p.size(), sizeof(float)); break;
      case surogate::Optimizer::AdamW8bit:
        bytes += 2 * vector_bytes(p.size(), 1) + 2 * vector_bytes(quantization_blocks(p.size()), sizeof(float));
        break;
      case surogate::Optimizer::NorMuon: {
        const bool hidden = p.is_hidden_matrix && p.rows > 1;
        bytes += vector_bytes(p.size(), sizeof(float)) + vector_bytes(hidden ? p.rows : p.size(), sizeof(float));
        break;
      }
    }
  }
  if (optimizer.algorithm == surogate::Optimizer::NorMuon) bytes += device_normuon_workspace_bytes(parameters);
  return bytes;
}

void* StagingArena::reserve(void* host, size_t bytes) {
  constexpr size_t kAlignment = 256;
  used_ = (used_ + kAlignment - 1) / kAlignment * kAlignment;
  SUROGATE_CHECK(used_ + bytes <= capacity_, "a staging slot of {} bytes holds its chunk's optimizer state ({} more)",
                 capacity_, used_ + bytes - capacity_);
  void* device = base_ + used_;
  used_ += bytes;
  if (bytes > 0) regions_.push_back({host, device, bytes});
  return device;
}

std::unique_ptr<DeviceOptimizer> make_device_optimizer(const config::Optimizer& optimizer, uint64_t seed,
                                                       std::vector<DeviceParameter> parameters,
                                                       const StateMemory& memory) {
  AdamWSettings adamw{optimizer.adamw_beta1, optimizer.adamw_beta2, optimizer.adamw_epsilon};
  switch (optimizer.algorithm) {
    case surogate::Optimizer::AdamW: return make_device_adamw(std::move(parameters), adamw, seed, memory);
    case surogate::Optimizer::AdamW8bit: return make_device_adamw_8bit(std::move(parameters), adamw, seed, memory);
    case surogate::Optimizer::NorMuon:
      return make_device_normuon(std::move(parameters),
                                 {optimizer.normuon_momentum, optimizer.normuon_beta2, optimizer.normuon_cautious_wd,
                                  adamw},
                                 seed, memory);
  }
  return make_device_adamw(std::move(parameters), adamw, seed, memory);
}

}  // namespace surogate::train
