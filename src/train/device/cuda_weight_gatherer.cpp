// ZeRO-3's weight gathers on a GPU; see cuda_weight_gatherer.h.
#include "train/device/cuda_weight_gatherer.h"

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "distributed/communicator.h"

namespace surogate::train {

__nv_bfloat16* CudaWeightShard::weight(graph::TensorId tensor) const {
  const auto [g, index] = gathering->locate(tensor);
  const compiler::GatherGroup& group = gathering->groups[g];
  if (group.owners[index] != rank) return nullptr;
  const auto r = static_cast<size_t>(rank);
  return owned + group.owned_offsets[r] + group.tensor_offsets[index] - group.piece_offsets[r];
}

__nv_bfloat16* CudaWeightShard::piece(size_t g) const {
  return owned + gathering->groups[g].owned_offsets[static_cast<size_t>(rank)];
}

CudaWeightGatherer::CudaWeightGatherer(const compiler::WeightGathering& gathering, runtime::CudaBackend& backend,
                                       cudaStream_t side, Fill fill)
    : gathering_(gathering), backend_(backend), side_(side), fill_(std::move(fill)) {
  for (size_t k = 0; k < gathering.uses.size(); ++k) {
    issued_.emplace_back(false);
    gathered_.emplace_back(false);
  }
}

void CudaWeightGatherer::before_step(size_t step) {
  cudaStream_t compute = backend_.stream();
  for (size_t use : gathering_.issue_before[step]) {
    const size_t g = gathering_.uses[use].group;
    issued_[use].record(compute);
    CUDA_CHECK(cudaStreamWaitEvent(side_, issued_[use], 0));
    fill_(g, backend_.arena_data() + gathering_.region_offset + gathering_.groups[g].offset, side_);
    gathered_[use].record(side_);
  }
  for (size_t use : gathering_.wait_before[step]) CUDA_CHECK(cudaStreamWaitEvent(compute, gathered_[use], 0));
}

CudaWeightGatherer::Fill all_gather_fill(const CudaWeightShard& shard, distributed::Communicator& communicator) {
  std::vector<std::vector<size_t>> pieces;
  for (const compiler::GatherGroup& group : shard.gathering->groups) {
    SUROGATE_CHECK(group.dtype == DType::BF16, "GPU ranks gather bf16 weights");
    pieces.push_back(group.piece_counts());
  }
  return [shard, &communicator, pieces = std::move(pieces)](size_t g, void* buffer, cudaStream_t stream) {
    const compiler::GatherGroup& group = shard.gathering->groups[g];
    const auto r = static_cast<size_t>(shard.rank);
    auto* own = static_cast<__nv_bfloat16*>(buffer) + group.piece_offsets[r];
    if (pieces[g][r] > 0) {
      CUDA_CHECK(cudaMemcpyAsync(own, shard.piece(g), pieces[g][r] * sizeof(__nv_bfloat16), cudaMemcpyDeviceToDevice,
                                 stream));
    }
    communicator.all_gather(buffer, pieces[g], DType::BF16);
  };
}

}  // namespace surogate::train
