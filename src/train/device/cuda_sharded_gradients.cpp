// ZeRO-2/3's sharded gradient accumulation on a GPU rank; see cuda_sharded_gradients.h.
#include "train/device/cuda_sharded_gradients.h"

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/gradient_accumulate.h"
#include "train/device/sharded_gradients.h"

namespace surogate::train {

CudaShardedGradients::CudaShardedGradients(const GradientBuckets& buckets, const CudaTrainableLayout& layout,
                                           CudaRankState& state, const distributed::Shard& shard, cudaStream_t side,
                                           distributed::Communicator& communicator)
    : state_(state), shard_(shard), side_(side), dtype_(state.accumulators().dtype()), reduced_(false),
      reduction_(buckets, *this, dtype_, communicator, shard_) {
  const size_t element_bytes = dtype_size_bytes(dtype_);
  // Each slot starts 256-byte aligned (NCCL and the kernels like aligned buffers).
  slot_bytes_ = (largest_bucket_elements(buckets.buckets) * element_bytes + 255) / 256 * 256;
  staging_ = cuda::DeviceBuffer<std::byte>(slot_bytes_ * kCudaGradientStagingSlots);
  // One table entry per part of a tensor in a bucket (padding excluded): the bf16 gradient from
  // that part on, its count, and per slot where it lands.
  std::vector<__nv_bfloat16*> gradients;
  std::vector<int64_t> counts;
  std::vector<std::vector<size_t>> places(kCudaGradientStagingSlots);  // byte offsets into the slot
  for (const GradientBucket& bucket : buckets.buckets) {
    entries_.push_back(gradients.size());
    for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) {
      const CudaTrainable& entry = layout.entries[unit];
      const BucketSegment segment =
          bucket_segment(bucket, static_cast<size_t>(entry.offset), static_cast<size_t>(entry.count));
      if (segment.count == 0) continue;
      gradients.push_back(static_cast<__nv_bfloat16*>(state.backend().device_address(entry.gradient)) + segment.from);
      counts.push_back(static_cast<int64_t>(segment.count));
      for (int index = 0; index < kCudaGradientStagingSlots; ++index) {
        places[static_cast<size_t>(index)].push_back(static_cast<size_t>(index) * slot_bytes_ + segment.into * element_bytes);
      }
    }
  }
  entries_.push_back(gradients.size());
  gradient_table_ = cuda::to_device(gradients);
  counts_ = cuda::GradientCounts(counts);
  for (const std::vector<size_t>& offsets : places) {
    std::vector<float*> floats;
    std::vector<__nv_bfloat16*> bf16s;
    for (size_t offset : offsets) {
      floats.push_back(reinterpret_cast<float*>(staging_.data() + offset));
      bf16s.push_back(reinterpret_cast<__nv_bfloat16*>(staging_.data() + offset));
    }
    if (dtype_ == DType::BF16) bf16_tables_.push_back(cuda::to_device(bf16s));
    else float_tables_.push_back(cuda::to_device(floats));
    filled_.emplace_back(false);
    free_.emplace_back(false);
  }
}

std::byte* CudaShardedGradients::fill(size_t b, const GradientBucket& bucket) {
  const size_t index = current_ = next_;
  next_ = (next_ + 1) % kCudaGradientStagingSlots;
  // Compute stream: the slot's last reduction done (an event never recorded is complete), then this
  // micro-batch's gradients of the bucket into it (and zeroed in the plan); the padding between
  // tensors stays zero.
  cudaStream_t compute = state_.stream();
  CUDA_CHECK(cudaStreamWaitEvent(compute, free_[index], 0));
  CUDA_CHECK(cudaMemsetAsync(slot(index), 0, bucket.size() * dtype_size_bytes(dtype_), compute));
  const size_t first = entries_[b], end = entries_[b + 1];
  if (dtype_ == DType::BF16) {
    cuda::accumulate_bf16_gradients(gradient_table_.data(), bf16_tables_[index].data(), counts_, first, end, compute);
  } else {
    cuda::accumulate_bf16_gradients(gradient_table_.data(), float_tables_[index].data(), counts_, first, end, compute);
  }
  filled_[index].record(compute);
  // Side stream (the reduction's communicator's): the ranks' sum of each piece to its owner.
  CUDA_CHECK(cudaStreamWaitEvent(side_, filled_[index], 0));
  return slot(index);
}

// On the side stream, after the reduce-scatter.
void CudaShardedGradients::add_piece(const std::byte* reduced, size_t offset, size_t count) {
  std::byte* accumulator = static_cast<std::byte*>(state_.accumulators().data()) + offset * dtype_size_bytes(dtype_);
  if (dtype_ == DType::BF16) {
    cuda::add_reduced_gradients(reinterpret_cast<const __nv_bfloat16*>(reduced),
                                reinterpret_cast<__nv_bfloat16*>(accumulator), static_cast<int64_t>(count), side_);
  } else {
    cuda::add_reduced_gradients(reinterpret_cast<const float*>(reduced), reinterpret_cast<float*>(accumulator),
                                static_cast<int64_t>(count), side_);
  }
}

void CudaShardedGradients::release(std::byte*) { free_[current_].record(side_); }

void CudaShardedGradients::finish() {
  reduced_.record(side_);
  CUDA_CHECK(cudaStreamWaitEvent(state_.stream(), reduced_, 0));
}

}  // namespace surogate::train
