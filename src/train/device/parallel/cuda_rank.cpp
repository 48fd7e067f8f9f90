// One GPU rank of the parallel device; see cuda_rank.h.
#include "train/device/parallel/cuda_rank.h"

#include <cstddef>
#include <utility>

#include "core/error.h"

namespace surogate::train {

CollectiveRegion CudaRank::flat_gradients() {
  CudaGradientAccumulators& accumulators = state_->accumulators();
  const size_t element = dtype_size_bytes(accumulators.dtype());
  return {static_cast<std::byte*>(accumulators.data()) + static_cast<size_t>(units_offset()) * element,
          static_cast<size_t>(layout_.total - units_offset())};
}

std::vector<CollectiveRegion> CudaRank::tied_gradients() {
  CudaGradientAccumulators& accumulators = state_->accumulators();
  return tied_regions(accumulators.data(), dtype_size_bytes(accumulators.dtype()));
}

std::vector<CollectiveRegion> CudaRank::tied_weights() { return tied_regions(state_->masters().data(), sizeof(float)); }

std::vector<CollectiveRegion> CudaRank::tied_regions(void* base, size_t element) const {
  std::vector<CollectiveRegion> regions;
  for (size_t index : tied) {
    const CudaTrainable& entry = layout_.entries[index];
    regions.push_back({static_cast<std::byte*>(base) + static_cast<size_t>(entry.offset) * element,
                       static_cast<size_t>(entry.count)});
  }
  return regions;
}

void CudaRank::finish_reduction() {
  if (sharded) sharded->finish();
  else if (reducer) reducer->finish();
}

// Every communicator enqueues on the rank's streams: the side stream's (a replica's buckets and
// gathers), then the world's.
double CudaRank::squares(distributed::Communicator& world) {
  if (side_communicator) side_communicator->synchronize();
  world.synchronize();
  const double norm = state_->clip().norm();
  return norm * norm;
}

void CudaRank::publish_bf16() {
  SUROGATE_CHECK(first_entry_ == 0 && state_->accumulators().bytes() >= static_cast<size_t>(layout_.total) * 2,
                 "a replica's full-size accumulators hold its bf16 publish");
  state_->masters().set_publish_buffer(static_cast<__nv_bfloat16*>(state_->accumulators().data()));
  publishes_bf16_ = true;
}

PublishedWeights CudaRank::published_weights() {
  if (publishes_bf16_) return {state_->masters().publish_buffer(), DType::BF16};
  return {state_->masters().data() + units_offset(), DType::F32};
}

ShardCopies CudaRank::shard_copies() {
  if (!publishes_bf16_) return cuda_shard_copies(*state_, first_entry_);
  // On the stream the publish's communicator enqueues on.
  cudaStream_t stream = publish_overlap ? side->get() : state_->stream();
  return {[this, stream](size_t first, size_t end) {
            state_->masters().round_into_publish_buffer(first, end, stream);
            masters_stale_ = true;
          },
          [this, stream](size_t first, size_t end) {
            state_->masters().weights_from_publish_buffer(first, end, stream);
          }};
}

void* CudaRank::take_stale_masters() {
  settle_publish();
  if (!std::exchange(masters_stale_, false)) return nullptr;
  return state_->masters().data();
}

void CudaRank::step(const OptimizerStep& step) {
  // fp16 loss scaling is the CPU emulation's in this build (torch_dtype: float16 is refused on CUDA).
  SUROGATE_CHECK(step.gradient_scale == 1.0, "no gradient scale on the CUDA backend");
  settle_publish();
  state_->step(step);
}

}  // namespace surogate::train
