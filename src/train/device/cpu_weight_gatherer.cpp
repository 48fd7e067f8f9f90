// ZeRO-3's weight gathers on a CPU rank; see cpu_weight_gatherer.h.
#include "train/device/cpu_weight_gatherer.h"

#include <cstring>

#include "core/error.h"

namespace surogate::train {

CpuWeightGatherer::CpuWeightGatherer(const compiler::WeightGathering& gathering, int rank, runtime::CpuBackend& backend,
                                     distributed::Communicator& communicator)
    : gathering_(gathering), rank_(rank), backend_(backend), communicator_(communicator),
      owned_(gathering.owned_elements[static_cast<size_t>(rank)], 0.0f) {
  for (const compiler::GatherGroup& group : gathering.groups) {
    SUROGATE_CHECK(group.dtype == DType::F32, "CPU ranks gather fp32 weights");
    piece_counts_.push_back(group.piece_counts());
  }
}

std::span<float> CpuWeightGatherer::owned(graph::TensorId tensor) {
  const auto [g, index] = gathering_.locate(tensor);
  const compiler::GatherGroup& group = gathering_.groups[g];
  if (group.owners[index] != rank_) return {};
  const auto r = static_cast<size_t>(rank_);
  const size_t offset = group.owned_offsets[r] + group.tensor_offsets[index] - group.piece_offsets[r];
  const auto count = static_cast<size_t>(backend_.view<float>(tensor).size());
  return std::span<float>(owned_).subspan(offset, count);
}

int CpuWeightGatherer::owner(graph::TensorId tensor) const {
  const auto [g, index] = gathering_.locate(tensor);
  return gathering_.groups[g].owners[index];
}

void CpuWeightGatherer::before_step(size_t step) {
  for (size_t use : gathering_.issue_before[step]) gather(gathering_.uses[use].group);
}

void CpuWeightGatherer::gather(size_t g) {
  const compiler::GatherGroup& group = gathering_.groups[g];
  auto* buffer = reinterpret_cast<float*>(backend_.arena_data() + gathering_.region_offset + group.offset);
  const auto r = static_cast<size_t>(rank_);
  std::memcpy(buffer + group.piece_offsets[r], owned_.data() + group.owned_offsets[r],
              piece_counts_[g][r] * sizeof(float));
  communicator_.all_gather(buffer, piece_counts_[g], DType::F32);
}

}  // namespace surogate::train
