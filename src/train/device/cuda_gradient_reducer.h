// ZeRO-1's gradient buckets (gradient_buckets.h) on a GPU rank: the buffer operations of the bucket
// reduction (bucket_reduction.h). During the last micro-batch of a step, after the step that
// completes a bucket the observer adds the micro-batch's bf16 gradients of the bucket's tensors
// into the flat accumulators (compute stream), records an event, and the side stream — the one
// ZeRO-3's gathers use, with its own NCCL communicator — waits for it and sums the rank's piece of
// the bucket's accumulators over the ranks (reduce-scatter: each rank receives the sums of its
// optimizer shard alone), while the backward goes on with the earlier layers. finish() makes the
// compute stream wait for the last reduction before anything reads the summed gradients. ZeRO-2/3
// reduce every micro-batch into sharded accumulators instead (cuda_sharded_gradients.h).
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/device_buffer.h"
#include "distributed/communicator.h"
#include "runtime/step_observer.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/bucket_reduction.h"
#include "train/device/gradient_buckets.h"

namespace surogate::train {

class CudaGradientReducer final : public runtime::StepObserver, private BucketBuffers {
public:
  // `communicator` enqueues on `side`; `shard` (the rank's optimizer shard) must outlive the reducer.
  CudaGradientReducer(const GradientBuckets& buckets, CudaRankState& state, const distributed::Shard& shard,
                      cudaStream_t side, distributed::Communicator& communicator);

  void before_step(size_t) override {}
  void after_step(size_t step) override { reduction_.after_step(step); }
  // The compute stream waits for every reduction enqueued so far.
  void finish();

private:
  std::byte* fill(size_t index, const GradientBucket& bucket) override;

  CudaRankState& state_;
  cudaStream_t side_;
  std::vector<cuda::Event> added_;  // one per bucket
  cuda::Event reduced_;
  BucketReduction reduction_;
};

}  // namespace surogate::train
