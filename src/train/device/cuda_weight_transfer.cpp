// ZeRO-3's host copies to and from the GPU ranks; see cuda_weight_transfer.h.
#include "train/device/cuda_weight_transfer.h"

#include <algorithm>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/kernels/weights_from_masters.h"
#include "train/device/scratch_transfer.h"

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
  std::vector<size_t> counts;
  for (const WeightView& weight : weights) counts.push_back(weight.values.size());
  upload_through_scratch(
      {rank.communicator, rank.scratch, kTransferChunkElements}, counts,
      [&](size_t i, size_t first, size_t count) {
        CUDA_CHECK(cudaMemcpyAsync(rank.scratch, weights[i].values.data() + first, count * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
      },
      [&](size_t i, size_t first, size_t count) {
        __nv_bfloat16* owned = rank.shard.weight(layout.ids[i]);
        if (owned == nullptr) return;
        cuda::round_to_bf16(rank.scratch, owned + first, static_cast<int64_t>(count), stream);
        if (unit_of[i] >= 0) {
          CUDA_CHECK(cudaMemcpyAsync(rank.state.masters().master(static_cast<size_t>(unit_of[i])) + first, rank.scratch,
                                     count * sizeof(float), cudaMemcpyDefault, stream));
        }
      });
}

void download_weight_shards(const CudaShardTransfer& rank, const CudaTrainableLayout& layout,
                            std::span<const WeightView> weights) {
  cudaStream_t stream = rank.state.stream();
  std::vector<size_t> counts;
  std::vector<int> owners;
  for (const CudaTrainable& entry : layout.entries) {
    counts.push_back(weights[entry.weight].values.size());
    owners.push_back(owner_of(rank.shard, entry.parameter));
  }
  download_through_scratch(
      {rank.communicator, rank.scratch, kTransferChunkElements, rank.writes_host}, counts, owners,
      [&](size_t u, size_t first, size_t count) {
        CUDA_CHECK(cudaMemcpyAsync(rank.scratch, rank.state.masters().master(u) + first, count * sizeof(float),
                                   cudaMemcpyDefault, stream));
      },
      [&](size_t u, size_t first, size_t count) {
        CUDA_CHECK(cudaMemcpyAsync(weights[layout.entries[u].weight].values.data() + first, rank.scratch,
                                   count * sizeof(float), cudaMemcpyDeviceToHost, stream));
      });
}

}  // namespace surogate::train
