// ZeRO-3's host copies to and from the GPU ranks; see cuda_weight_transfer.h.
#include "train/device/cuda_weight_transfer.h"

#include <algorithm>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/kernels/weights_from_masters.h"
#include "train/device/kernel_namespaces.h"

namespace surogate::train {
namespace {

int owner_of(const CudaWeightShard& shard, graph::TensorId tensor) {
  const auto [g, index] = shard.gathering->locate(tensor);
  return shard.gathering->groups[g].owners[index];
}

}  // namespace

void upload_weight_shards(const CudaShardTransfer& rank, const CudaTrainableLayout& layout,
                          std::span<const WeightView> weights) {
  std::vector<int> unit_of(weights.size(), -1);  // the trainable index of each weight, or -1
  for (size_t u = 0; u < layout.entries.size(); ++u) unit_of[layout.entries[u].weight] = static_cast<int>(u);
  cudaStream_t stream = rank.state.stream();
  const bool source = rank.shard.rank == 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const std::span<const float> values = weights[i].values;
    __nv_bfloat16* owned = rank.shard.weight(layout.ids[i]);
    for (size_t first = 0; first < values.size(); first += kTransferChunkElements) {
      const size_t count = std::min(kTransferChunkElements, values.size() - first);
      if (source) {
        CUDA_CHECK(cudaMemcpyAsync(rank.scratch, values.data() + first, count * sizeof(float), cudaMemcpyHostToDevice,
                                   stream));
      }
      rank.communicator.broadcast(rank.scratch, count, DType::F32, 0);
      if (owned == nullptr) continue;
      cuda_kernels::round_to_bf16(rank.scratch, owned + first, static_cast<int64_t>(count), stream);
      if (unit_of[i] >= 0) {
        CUDA_CHECK(cudaMemcpyAsync(rank.state.master(static_cast<size_t>(unit_of[i])) + first, rank.scratch,
                                   count * sizeof(float), cudaMemcpyDefault, stream));
      }
    }
  }
}

void download_weight_shards(const CudaShardTransfer& rank, const CudaTrainableLayout& layout,
                            std::span<const WeightView> weights) {
  cudaStream_t stream = rank.state.stream();
  for (size_t u = 0; u < layout.entries.size(); ++u) {
    const CudaTrainable& entry = layout.entries[u];
    const int owner = owner_of(rank.shard, entry.parameter);
    const std::span<float> values = weights[entry.weight].values;
    for (size_t first = 0; first < values.size(); first += kTransferChunkElements) {
      const size_t count = std::min(kTransferChunkElements, values.size() - first);
      if (owner == rank.shard.rank) {
        CUDA_CHECK(cudaMemcpyAsync(rank.scratch, rank.state.master(u) + first, count * sizeof(float), cudaMemcpyDefault,
                                   stream));
      }
      rank.communicator.broadcast(rank.scratch, count, DType::F32, owner);
      if (rank.writes_host) {
        CUDA_CHECK(cudaMemcpyAsync(values.data() + first, rank.scratch, count * sizeof(float), cudaMemcpyDeviceToHost,
                                   stream));
      }
    }
  }
}

}  // namespace surogate::train
