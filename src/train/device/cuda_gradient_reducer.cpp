// The gradient buckets on a GPU rank; see cuda_gradient_reducer.h.
#include "train/device/cuda_gradient_reducer.h"

#include "cuda/cuda_check.h"

namespace surogate::train {

CudaGradientReducer::CudaGradientReducer(const GradientBuckets& buckets, CudaRankState& state, cudaStream_t side,
                                         distributed::Communicator& communicator)
    : buckets_(buckets), state_(state), side_(side), communicator_(communicator), reduced_(false) {
  for (size_t b = 0; b < buckets.buckets.size(); ++b) added_.emplace_back(false);
}

void CudaGradientReducer::after_step(size_t step) {
  const DType dtype = state_.accumulators().dtype();
  for (size_t b : buckets_.ready_after[step]) {
    const GradientBucket& bucket = buckets_.buckets[b];
    state_.accumulators().add(bucket.first_unit, bucket.end_unit);
    added_[b].record(state_.stream());
    CUDA_CHECK(cudaStreamWaitEvent(side_, added_[b], 0));
    void* data = static_cast<std::byte*>(state_.accumulators().data()) + bucket.begin * dtype_size_bytes(dtype);
    communicator_.all_reduce_sum(data, bucket.size(), dtype);
  }
}

void CudaGradientReducer::finish() {
  reduced_.record(side_);
  CUDA_CHECK(cudaStreamWaitEvent(state_.stream(), reduced_, 0));
}

}  // namespace surogate::train
