// ZeRO-1's publish on a GPU replica, overlapped with the next step's first micro-batch. The
// exchange (shard_publish.h: publish_shard_in_buckets — the rank's bf16 weights rounded into the
// accumulators' memory, each bucket all-gathered, the other ranks' weights copied out) runs on the
// rank's side stream with its NCCL communicator, after the optimizer's step on the compute stream
// (begin()); an event is recorded after each bucket (published()). The next micro-batch runs with
// this observer: before each step it waits for the buckets that step is the first to read a weight
// of (gradient_buckets.h: publish_waits), so the forward starts once the first layer's weights are
// there while the later buckets travel. Everything else that reads or writes the weights, the
// masters or the accumulators (the optimizer, the norm, the FP8 copies, a memset of the
// accumulators, a download, an upload, an evaluation, GRPO's rollouts) settles first: the compute
// stream waits for the last bucket. The next micro-batch's forward reads every trainable weight
// before its backward writes any gradient into the accumulators, so the publish buffer is free
// again by then (the accumulators defer their zeroing: cuda_rank/gradient_accumulators.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "cuda/device_buffer.h"
#include "runtime/step_observer.h"
#include "train/device/gradient_buckets.h"

namespace surogate::train {

class CudaPublishOverlap final : public runtime::StepObserver {
public:
  // `plan`: what the rank runs; `buckets`: the publish's; `weights`: each unit's tensor in the plan.
  CudaPublishOverlap(const compiler::ExecutionPlan& plan, std::span<const GradientBucket> buckets,
                     std::span<const graph::TensorId> weights, cudaStream_t compute, cudaStream_t side);

  // Before the first bucket: the side stream waits for the optimizer's step.
  void begin();
  // After bucket `b`'s copies out of the flat buffer, on the side stream.
  void published(size_t b);
  // Whether a publish began and no micro-batch has waited for it yet.
  bool in_flight() const { return in_flight_; }
  // The compute stream waits for the last publish's last bucket (nothing before any publish).
  void settle();

  // The micro-batch after a publish.
  void before_step(size_t step) override;
  void after_step(size_t step) override;

private:
  cudaStream_t compute_, side_;
  std::vector<std::vector<size_t>> waits_;  // per step: the buckets waited for before it
  cuda::Event stepped_{false};
  std::vector<cuda::Event> published_;  // per bucket
  bool began_ = false, in_flight_ = false;
};

}  // namespace surogate::train
