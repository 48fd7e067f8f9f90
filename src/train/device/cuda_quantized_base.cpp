// The quantized base of GPU ZeRO-3 ranks; see cuda_quantized_base.h.
#include "train/device/cuda_quantized_base.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "core/error.h"
#include "cuda/cuda_check.h"

namespace surogate::train {

CudaQuantizedBase::CudaQuantizedBase(compiler::ExecutionPlan& plan, QuantizedBaseKeeping keeping, int world_size,
                                     int first_rank, int local_ranks)
    : plan_(plan), keeping_(keeping), gathering_(quantized_base_gathering(plan, keeping, world_size)) {
  if (gathering_.empty()) return;
  compiler::apply_weight_gathering(plan, gathering_);
  owned_.resize(static_cast<size_t>(local_ranks));
  for (int local = 0; local < local_ranks; ++local) {
    shards_.push_back({&gathering_, keeping == QuantizedBaseKeeping::Offloaded ? 0 : first_rank + local, nullptr});
  }
}

void CudaQuantizedBase::allocate(int local) {
  if (!gathered()) return;
  QuantizedBaseShard& shard = shards_[static_cast<size_t>(local)];
  if (keeping_ == QuantizedBaseKeeping::Sharded) {
    cuda::DeviceBuffer<std::byte>& owned = owned_[static_cast<size_t>(local)];
    owned = cuda::DeviceBuffer<std::byte>(shard.bytes());
    if (shard.bytes() > 0) CUDA_CHECK(cudaMemset(owned.data(), 0, shard.bytes()));
    shard.owned = owned.data();
    return;
  }
  if (local != 0) return;  // the other local ranks allocate nothing, so they touch no shard meanwhile
  image_ = cuda::PinnedHostBuffer<std::byte>(shard.bytes());
  std::memset(image_.data(), 0, image_.bytes());
  for (QuantizedBaseShard& each : shards_) each.owned = image_.data();
}

void CudaQuantizedBase::keep(int local, const models::QuantizedWeight& weight, const QuantizedPieces& pieces) {
  QuantizedBaseShard& shard = shards_[static_cast<size_t>(local)];
  if (keeping_ == QuantizedBaseKeeping::Offloaded) {
    if (local != 0) return;
    shard.keep(plan_, weight, pieces, [&](size_t offset, std::span<const std::byte> bytes) {
      std::memcpy(image_.data() + offset, bytes.data(), bytes.size());
    });
    return;
  }
  shard.keep(plan_, weight, pieces, [&](size_t offset, std::span<const std::byte> bytes) {
    CUDA_CHECK(cudaMemcpy(shard.owned + offset, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  });
  if (local != 0) return;
  for (size_t i = 0; i < weight.pieces.size(); ++i) host_copies_[weight.pieces[i]] = pieces.bytes[i];
}

CudaWeightGatherer::Fill CudaQuantizedBase::fill(int local, distributed::Communicator& communicator) const {
  std::vector<std::vector<size_t>> counts;
  for (const compiler::GatherGroup& group : gathering_.groups) counts.push_back(byte_group_piece_counts(group));
  const QuantizedBaseShard* shard = &shards_[static_cast<size_t>(local)];
  return [this, shard, &communicator, counts = std::move(counts)](size_t g, void* buffer, cudaStream_t stream) {
    const compiler::GatherGroup& group = gathering_.groups[g];
    auto* bytes = static_cast<std::byte*>(buffer);
    if (const size_t count = shard->piece_bytes(g); count > 0) {
      // Sharded: device to device; Offloaded: from the pinned image, at the host link's speed.
      CUDA_CHECK(cudaMemcpyAsync(bytes + group.piece_offsets[static_cast<size_t>(shard->keeper)], shard->piece(g), count,
                                 cudaMemcpyDefault, stream));
    }
    if (gathering_.world_size > 1) communicator.all_gather(buffer, counts[g], DType::BF16);
  };
}

std::span<const std::byte> CudaQuantizedBase::host_piece(const std::string& name) const {
  if (keeping_ == QuantizedBaseKeeping::Sharded) {
    const auto found = host_copies_.find(name);
    SUROGATE_CHECK(found != host_copies_.end(), "no host copy of quantized piece '{}'", name);
    return found->second;
  }
  const graph::TensorId id = plan_.tensor(name);
  const std::optional<size_t> offset = shards_.front().offset_of(id);
  SUROGATE_CHECK(offset.has_value(), "quantized piece '{}' is not in the image", name);
  return {image_.data() + *offset, plan_.graph.tensor(id).type.size_bytes()};
}

void CudaQuantizedBase::release(int local) {
  if (!gathered()) return;
  // The image goes with this object, once every rank's side stream has finished reading it.
  if (keeping_ == QuantizedBaseKeeping::Sharded) shards_[static_cast<size_t>(local)].owned = nullptr;
  owned_[static_cast<size_t>(local)] = {};
}

}  // namespace surogate::train
