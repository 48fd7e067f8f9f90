// The gradient buckets on a GPU rank; see cuda_gradient_reducer.h.
#include "train/device/cuda_gradient_reducer.h"

#include "cuda/cuda_check.h"

namespace surogate::train {

CudaGradientReducer::CudaGradientReducer(const GradientBuckets& buckets, CudaRankState& state,
                                         const distributed::Shard& shard, cudaStream_t side,
                                         distributed::Communicator& communicator)
    : state_(state), side_(side), reduced_(false),
      reduction_(buckets, *this, state.accumulators().dtype(), communicator, shard) {
  for (size_t b = 0; b < buckets.buckets.size(); ++b) added_.emplace_back(false);
}

// The bucket's gradients added into the accumulators on the compute stream; the side stream, on
// which the reduction's communicator enqueues, waits for them.
std::byte* CudaGradientReducer::fill(size_t index, const GradientBucket& bucket) {
  CudaGradientAccumulators& accumulators = state_.accumulators();
  accumulators.add(bucket.first_unit, bucket.end_unit);
  added_[index].record(state_.stream());
  CUDA_CHECK(cudaStreamWaitEvent(side_, added_[index], 0));
  return static_cast<std::byte*>(accumulators.data()) + bucket.begin * dtype_size_bytes(accumulators.dtype());
}

void CudaGradientReducer::finish() {
  reduced_.record(side_);
  CUDA_CHECK(cudaStreamWaitEvent(state_.stream(), reduced_, 0));
}

}  // namespace surogate::train
