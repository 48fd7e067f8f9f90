// ZeRO-1's gradient buckets (gradient_buckets.h) on a CPU rank: the buffer operations of the bucket
// reduction (bucket_reduction.h). After a bucket's ready step, its gradients (the backend's views,
// which hold the rank's sum over its micro-batches) are packed into the flat buffer, where the
// reduction sums the rank's piece over the ranks (gloo's reduce-scatter, at once): the flat
// buffer's run of the rank's optimizer shard, which its optimizer steps, holds the world's sums.
// ZeRO-2/3 reduce every micro-batch into sharded accumulators instead (CpuShardedGradients,
// sharded_gradients.h).
#pragma once

#include <span>

#include "distributed/communicator.h"
#include "runtime/step_observer.h"
#include "train/device/bucket_reduction.h"
#include "train/device/gradient_buckets.h"

namespace surogate::train {

class CpuGradientReducer final : public runtime::StepObserver, private BucketBuffers {
public:
  // `gradients[u]` is unit u's gradient, packed at `offsets[u]` of `flat`; `shard` (the rank's
  // optimizer shard) must outlive the reducer.
  CpuGradientReducer(const GradientBuckets& buckets, std::span<const std::span<const float>> gradients,
                     std::span<const size_t> offsets, float* flat, const distributed::Shard& shard,
                     distributed::Communicator& communicator);
  void before_step(size_t) override {}
  void after_step(size_t step) override { reduction_.after_step(step); }

private:
  std::byte* fill(size_t index, const GradientBucket& bucket) override;

  std::span<const std::span<const float>> gradients_;
  std::span<const size_t> offsets_;
  float* flat_;
  BucketReduction reduction_;
};

}  // namespace surogate::train
