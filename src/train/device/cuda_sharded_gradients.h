// ZeRO-2/3's sharded gradient accumulation on a GPU rank (sharded_gradients.h says what and why): the
// buffer operations of the bucket reduction (bucket_reduction.h). During every micro-batch, after
// the step that completes a bucket,
//   compute stream: waits until the next staging slot is free, zeroes it, and adds the
//                   micro-batch's bf16 gradients of the bucket into it (zeroing them for the next
//                   micro-batch, gradient_accumulate.h; a bucket may be part of one large tensor);
//                   records an event;
//   side stream:    waits for that event, reduce-scatters the slot over the ranks (the side NCCL
//                   communicator, which ZeRO-3's gathers share, in plan order on every rank),
//                   adds the rank's reduced piece into its shard's accumulators (CudaRankState
//                   made with shard_accumulators) and records the slot free.
// Two slots of the largest bucket (kCudaGradientStagingSlots): the backward fills one while the
// side stream reduces the other, and waits only when it gets two buckets ahead. finish() makes
// the compute stream wait for the last reduction before the norm and the optimizer read the
// accumulators. The slots hold the accumulator dtype (fp32; bf16 with gradient_dtype bf16), so
// the ranks' sums are taken in the dtype ZeRO-1's reduction uses.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/kernels/gradient_accumulate.h"
#include "distributed/communicator.h"
#include "distributed/shard_placement.h"
#include "runtime/step_observer.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/bucket_reduction.h"
#include "train/device/gradient_buckets.h"

namespace surogate::train {

class CudaShardedGradients final : public runtime::StepObserver, private BucketBuffers {
public:
  // `state` holds the accumulators of `shard` only; `communicator` enqueues on `side`.
  CudaShardedGradients(const GradientBuckets& buckets, const CudaTrainableLayout& layout, CudaRankState& state,
                       const distributed::Shard& shard, cudaStream_t side, distributed::Communicator& communicator);

  void before_step(size_t) override {}
  void after_step(size_t step) override { reduction_.after_step(step); }
  // The compute stream waits for every reduction enqueued so far.
  void finish();
  // The staging slots' bytes.
  size_t staging_bytes() const { return staging_.size(); }

private:
  std::byte* slot(size_t index) { return staging_.data() + index * slot_bytes_; }
  std::byte* fill(size_t index, const GradientBucket& bucket) override;
  void add_piece(const std::byte* reduced, size_t offset, size_t count) override;
  void release(std::byte* slot) override;

  CudaRankState& state_;
  distributed::Shard shard_;
  cudaStream_t side_;
  DType dtype_;
  size_t slot_bytes_ = 0;
  cuda::DeviceBuffer<std::byte> staging_;  // the slots, back to back
  // The multi-tensor kernel's tables: one entry per part of a tensor in a bucket (bucket b's are
  // entries_[b] .. entries_[b + 1]): its bf16 gradient, its count, and per slot its place there
  // in the accumulator dtype.
  std::vector<size_t> entries_;
  cuda::DeviceBuffer<__nv_bfloat16*> gradient_table_;
  cuda::GradientCounts counts_;
  std::vector<cuda::DeviceBuffer<float*>> float_tables_;
  std::vector<cuda::DeviceBuffer<__nv_bfloat16*>> bf16_tables_;
  std::vector<cuda::Event> filled_, free_;  // per slot
  size_t next_ = 0;     // the slot the next bucket fills
  size_t current_ = 0;  // the slot being reduced
  cuda::Event reduced_;
  BucketReduction reduction_;
};

}  // namespace surogate::train
