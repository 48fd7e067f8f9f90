// The replica reduction's bucket schedule, written once over distributed::Communicator for every
// backend (gradient_buckets.h says why buckets, sharded_gradients.h why ZeRO-2/3 shard them). After
// the step of a micro-batch that completes a bucket:
//   ZeRO-1 (the last micro-batch only): the backend brings the bucket's gradients into its flat
//     buffer, and the ranks' sums are all-reduced there, in place;
//   ZeRO-2/3 (every micro-batch): the backend stages this micro-batch's gradients of the bucket in
//     a slot (zeroing the plan's), the slot is reduce-scattered over the ranks (each rank's piece:
//     its shard within the bucket), and the backend adds the rank's reduced piece into its shard's
//     accumulators and frees the slot.
// A backend supplies only those buffer operations (BucketBuffers): CPU ranks copy and add on the
// host (gloo blocks), GPUs enqueue on the compute and side streams, ordered by events.
#pragma once

#include <cstddef>

#include "core/dtype.h"
#include "distributed/communicator.h"
#include "distributed/shard_placement.h"
#include "runtime/step_observer.h"
#include "train/device/gradient_buckets.h"

namespace surogate::train {

class BucketBuffers {
public:
  virtual ~BucketBuffers() = default;
  // Bucket `index`'s gradients where the collective reads them, returning the address of its first
  // element: ZeRO-1 in the flat buffer, ZeRO-2/3 in a staging slot.
  virtual std::byte* fill(size_t index, const GradientBucket& bucket) = 0;
  // ZeRO-2/3: the rank's reduced piece (`count` elements at `reduced`, in the slot) added into its
  // shard's accumulators, `offset` elements from the shard's start.
  virtual void add_piece(const std::byte* /*reduced*/, size_t /*offset*/, size_t /*count*/) {}
  // ZeRO-2/3: the slot fill() returned may be filled again (after the piece was added).
  virtual void release(std::byte* /*slot*/) {}
};

class BucketReduction final : public runtime::StepObserver {
public:
  // `shard` null: ZeRO-1's all-reduce; else ZeRO-2/3's reduce-scatter into this rank's `shard`.
  // `buckets`, `buffers`, `communicator` and `shard` must outlive the reduction.
  BucketReduction(const GradientBuckets& buckets, BucketBuffers& buffers, DType dtype,
                  distributed::Communicator& communicator, const distributed::Shard* shard = nullptr)
      : buckets_(buckets), buffers_(buffers), dtype_(dtype), communicator_(communicator), shard_(shard) {}

  void before_step(size_t) override {}
  void after_step(size_t step) override;

private:
  const GradientBuckets& buckets_;
  BucketBuffers& buffers_;
  DType dtype_;
  distributed::Communicator& communicator_;
  const distributed::Shard* shard_;
};

}  // namespace surogate::train
