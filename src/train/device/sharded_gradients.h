// ZeRO-2/3's gradient accumulators, which shrink with the shards. Under ZeRO-1 a rank sums its own
// micro-batches into full-size accumulators and the ranks' sums are reduced once, during the last
// micro-batch (gradient_buckets.h). Under ZeRO-2/3 (shard_gradients) every micro-batch's gradients
// are reduce-scattered bucket by bucket as the backward completes them, and each rank adds only
// its own piece of each reduced bucket into accumulators that cover its optimizer shard:
//
//   after the step that completes bucket b (every micro-batch):
//     staging ← the bucket's gradients of this micro-batch (the plan's, which are then zeroed
//               for the next micro-batch's backward to add into);
//     reduce-scatter of the staging slot over the ranks (the bucket's pieces: each rank's shard
//               within the bucket);
//     shard accumulators[own piece] += staging[own piece].
//
// So a rank keeps full-precision accumulators for its shard (about 1/N of them) plus a staging
// slot of one bucket, instead of every tensor's; the price is a reduction per micro-batch instead
// of per step (gradient_accumulation_steps times the gradient traffic, still overlapped with the
// backward), and on GPUs no CUDA graph for any micro-batch (every one has a step observer).
// Summation order: the ranks' micro-batch k are summed first, then the micro-batches in order —
// one rank's order with the same global batch up to fp32 rounding; a world of one gives exactly
// the plain device's sums (each gradient gets one `P.grad += dP` per micro-batch, and a sum over
// one rank leaves it as it is).
//
// The schedule is bucket_reduction.h's, written once; this file holds the pieces both backends
// share and the CPU ranks' buffer operations; the GPUs' are cuda_sharded_gradients.h (two staging
// slots, the reductions on the side stream).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/shard_placement.h"
#include "runtime/step_observer.h"
#include "train/checkpoint_io.h"
#include "train/device/bucket_reduction.h"
#include "train/device/gradient_buckets.h"

namespace surogate::train {

// Staging slots a rank cycles through: CPU ranks reduce at once (gloo blocks), GPUs let the
// backward fill one slot while the side stream reduces the other.
inline constexpr int kCpuGradientStagingSlots = 1;
inline constexpr int kCudaGradientStagingSlots = 2;

// The elements of the flat buffer in both `bucket` and `shard` (empty when the rank owns none of
// the bucket); contiguous, since both are runs of whole units.
struct BucketPiece {
  size_t begin = 0, end = 0;
  size_t size() const { return end > begin ? end - begin : 0; }
};
BucketPiece owned_piece(const GradientBucket& bucket, const distributed::Shard& shard);

// The part of a unit (its elements [offset, offset + count) of the flat buffer) in `bucket`: `count`
// elements from `from` into the unit, at `into` in the bucket (a bucket may be part of one unit).
struct BucketSegment {
  size_t from = 0, into = 0, count = 0;
};
BucketSegment bucket_segment(const GradientBucket& bucket, size_t offset, size_t count);

// The largest bucket's elements: what one staging slot holds.
size_t largest_bucket_elements(std::span<const GradientBucket> buckets);

// What one rank keeps to accumulate its gradients under ZeRO-2/3, in elements: the largest shard
// of `unit_sizes` over `ranks` plus `staging_slots` slots of the largest bucket (buckets cut as
// the devices cut them). The memory estimate's figure (memory_budget.h).
size_t sharded_accumulator_elements(std::span<const size_t> unit_sizes, int ranks, size_t bucket_elements,
                                    int staging_slots);

// A CPU rank's ZeRO-2/3 accumulation (the step observer of every micro-batch), and its ZeRO-2
// weight exchange through the same staging buffer.
class CpuShardedGradients final : public runtime::StepObserver, private BucketBuffers {
public:
  // `gradients`: the backend's gradient of each trainable tensor, in flat order (a unit's size is
  // its gradient's); `shard`: this rank's units.
  CpuShardedGradients(const GradientBuckets& buckets, std::vector<std::span<float>> gradients,
                      const distributed::Shard& shard, distributed::Communicator& communicator);

  void before_step(size_t) override {}
  void after_step(size_t step) override { reduction_.after_step(step); }

  // The accumulated, summed gradient of `unit` (one of the shard's).
  float* accumulator(size_t unit);
  std::span<const float> accumulators() const { return accumulators_; }
  void zero();
  // The accumulators and the staging slot.
  size_t bytes() const { return (accumulators_.size() + staging_.size()) * sizeof(float); }

  // ZeRO-2: every rank's updated trainable tensors (its shard's) to every rank, bucket by bucket
  // (an all-gather of the bucket's pieces in the staging slot): no full-size flat buffer.
  void all_gather(std::span<const WeightView> trainable);

private:
  std::byte* fill(size_t index, const GradientBucket& bucket) override;
  void add_piece(const std::byte* reduced, size_t offset, size_t count) override;

  const GradientBuckets& buckets_;
  std::vector<std::span<float>> gradients_;
  std::vector<size_t> offsets_;  // each unit's start in the flat buffer
  distributed::Shard shard_;
  distributed::Communicator& communicator_;
  std::vector<float> accumulators_;  // the shard's elements [shard.begin, shard.end)
  std::vector<float> staging_;       // one bucket
  BucketReduction reduction_;
};

}  // namespace surogate::train
