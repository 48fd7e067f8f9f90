// The replica reduction's bucket schedule, written once over distributed::Communicator for every
// backend (gradient_buckets.h says why buckets, sharded_gradients.h why ZeRO-2/3 shard them). After
// the step of a micro-batch that completes a bucket, the bucket is reduce-scattered over the ranks:
// each rank receives the world's sums of its piece (its optimizer shard within the bucket) alone,
// since it steps only those: half the bytes of an all-reduce. On NCCL's ring an all-reduce sends
// 2(N-1)/N of a bucket from each GPU; a bucket with one owner (whole tensors: most have one) goes
// to it as a reduce, the whole bucket from every other GPU — (N-1)/N of the buffer from each GPU
// over all buckets — in the bucket's time on the wire, where an all-reduce takes 2(N-1)/N of it
// (two thirds on 4 GPUs, the same on 2);
//   ZeRO-1 (the last micro-batch only): the backend brings the bucket's gradients into its flat
//     buffer, the full-size accumulators, and the rank's piece is reduced there, in place (the
//     other pieces are left undefined: nothing reads them before the next step zeroes them);
//   ZeRO-2/3 (every micro-batch): the backend stages this micro-batch's gradients of the bucket in
//     a slot (zeroing the plan's), the slot is reduce-scattered, and the backend adds the rank's
//     reduced piece into its shard's accumulators and frees the slot.
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
  // shard's accumulators, `offset` elements from the shard's start. ZeRO-1's piece is already
  // where its accumulators are: nothing to do.
  virtual void add_piece(const std::byte* /*reduced*/, size_t /*offset*/, size_t /*count*/) {}
  // ZeRO-2/3: the slot fill() returned may be filled again (after the piece was added).
  virtual void release(std::byte* /*slot*/) {}
};

class BucketReduction final : public runtime::StepObserver {
public:
  // Reduces into this rank's `shard` (of the units the buckets cut). `buckets`, `buffers`,
  // `communicator` and `shard` must outlive the reduction.
  BucketReduction(const GradientBuckets& buckets, BucketBuffers& buffers, DType dtype,
                  distributed::Communicator& communicator, const distributed::Shard& shard)
      : buckets_(buckets), buffers_(buffers), dtype_(dtype), communicator_(communicator), shard_(shard) {}

  void before_step(size_t) override {}
  void after_step(size_t step) override;

private:
  const GradientBuckets& buckets_;
  BucketBuffers& buffers_;
  DType dtype_;
  distributed::Communicator& communicator_;
  const distributed::Shard& shard_;
};

}  // namespace surogate::train
