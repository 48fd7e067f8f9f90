// ZeRO-2/3's sharded gradient accumulation on a GPU rank; see cuda_sharded_gradients.h.
#include "train/device/cuda_sharded_gradients.h"

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "train/device/gradient_accumulate.h"
#include "train/device/sharded_gradients.h"

namespace surogate::train {

CudaShardedGradients::CudaShardedGradients(const GradientBuckets& buckets, const CudaTrainableLayout& layout,
                                           CudaRankState& state, const distributed::Shard& shard, cudaStream_t side,
                                           distributed::Communicator& communicator)
    : buckets_(buckets), state_(state), shard_(shard), side_(side), communicator_(communicator),
      dtype_(state.accumulator_dtype()), reduced_(false) {
  const size_t element_bytes = dtype_size_bytes(dtype_);
  // Each slot starts 256-byte aligned (the kernels load vectors; NCCL likes aligned buffers).
  slot_bytes_ = (largest_bucket_elements(buckets.buckets) * element_bytes + 255) / 256 * 256;
  staging_ = cuda::DeviceBuffer<std::byte>(slot_bytes_ * kCudaGradientStagingSlots);
  // Which bucket each tensor is in: its place in a slot is its offset from the bucket's start.
  std::vector<size_t> bucket_begin(layout.entries.size(), 0);
  for (const GradientBucket& bucket : buckets.buckets) {
    for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) bucket_begin[unit] = bucket.begin;
  }
  for (int index = 0; index < kCudaGradientStagingSlots; ++index) {
    std::vector<float*> floats;
    std::vector<__nv_bfloat16*> bf16s;
    for (size_t unit = 0; unit < layout.entries.size(); ++unit) {
      std::byte* place = static_cast<std::byte*>(slot(index)) +
                         (static_cast<size_t>(layout.entries[unit].offset) - bucket_begin[unit]) * element_bytes;
      floats.push_back(reinterpret_cast<float*>(place));
      bf16s.push_back(reinterpret_cast<__nv_bfloat16*>(place));
    }
    if (dtype_ == DType::BF16) bf16_tables_.push_back(cuda::to_device(bf16s));
    else float_tables_.push_back(cuda::to_device(floats));
    filled_.emplace_back(false);
    free_.emplace_back(false);
  }
}

void CudaShardedGradients::after_step(size_t step) {
  const size_t element_bytes = dtype_size_bytes(dtype_);
  for (size_t b : buckets_.ready_after[step]) {
    const GradientBucket& bucket = buckets_.buckets[b];
    const int index = next_;
    next_ = (next_ + 1) % kCudaGradientStagingSlots;
    // Compute stream: the slot's last reduction done (an event never recorded is complete), then
    // this micro-batch's gradients of the bucket into it; the padding between tensors stays zero.
    cudaStream_t compute = state_.stream();
    CUDA_CHECK(cudaStreamWaitEvent(compute, free_[static_cast<size_t>(index)], 0));
    CUDA_CHECK(cudaMemsetAsync(slot(index), 0, bucket.size() * element_bytes, compute));
    if (dtype_ == DType::BF16) {
      state_.add_gradients_into(bucket.first_unit, bucket.end_unit, bf16_tables_[static_cast<size_t>(index)].data());
    } else {
      state_.add_gradients_into(bucket.first_unit, bucket.end_unit, float_tables_[static_cast<size_t>(index)].data());
    }
    filled_[static_cast<size_t>(index)].record(compute);
    // Side stream: the ranks' sum of each piece to its owner, which adds its own.
    CUDA_CHECK(cudaStreamWaitEvent(side_, filled_[static_cast<size_t>(index)], 0));
    communicator_.reduce_scatter_sum(slot(index), bucket.piece_counts, dtype_);
    const BucketPiece piece = owned_piece(bucket, shard_);
    if (piece.size() > 0) {
      const std::byte* reduced = static_cast<const std::byte*>(slot(index)) + (piece.begin - bucket.begin) * element_bytes;
      std::byte* accumulator = static_cast<std::byte*>(state_.accumulators()) + (piece.begin - shard_.begin) * element_bytes;
      const auto count = static_cast<int64_t>(piece.size());
      if (dtype_ == DType::BF16) {
        cuda_kernels::add_reduced_gradients(reinterpret_cast<const __nv_bfloat16*>(reduced),
                                            reinterpret_cast<__nv_bfloat16*>(accumulator), count, side_);
      } else {
        cuda_kernels::add_reduced_gradients(reinterpret_cast<const float*>(reduced), reinterpret_cast<float*>(accumulator),
                                            count, side_);
      }
    }
    free_[static_cast<size_t>(index)].record(side_);
  }
}

void CudaShardedGradients::finish() {
  reduced_.record(side_);
  CUDA_CHECK(cudaStreamWaitEvent(state_.stream(), reduced_, 0));
}

}  // namespace surogate::train
