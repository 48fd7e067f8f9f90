// ZeRO-3 on a GPU rank (parallel/cuda_rank_host.cpp) and the GPU evaluator under ZeRO-3: the
// step observer that fills the backend's gather buffers (compiler/weight_gathering.h) on a side
// stream, so the next layer's weights arrive while the current one computes.
//
// For a use issued before step s the observer records an event on the compute stream (every step
// before s is enqueued, among them the last reader of whatever the buffer held before: the
// placement gives a buffer to a group only after its previous holder's last use), the side stream
// waits for it, fills the group's buffer and records the use's own event; before the use's first
// step the compute stream waits for that event. So compute never waits for a gather issued a use
// ahead unless the gather is slower than the use before it, and the host never waits at all.
//
// How a buffer is filled is the caller's: on a training rank the rank's piece is copied in from
// its owned buffer (CudaWeightShard) and NCCL's all-gather, on the side stream's own communicator,
// brings the other ranks' pieces (the gradient buckets are reduced on the same stream and
// communicator, gradient_buckets.h, so every rank enqueues the side stream's collectives in one
// order); the evaluator copies each group from a pinned host image.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

#include "compiler/weight_gathering.h"
#include "cuda/device_buffer.h"
#include "distributed/communicator.h"
#include "runtime/cuda_backend.h"
#include "runtime/step_observer.h"

namespace surogate::train {

// Where a GPU rank keeps its pieces of the sharded weights: one bf16 buffer of
// gathering.owned_elements[rank] elements, each group's piece at its owned offset.
struct CudaWeightShard {
  const compiler::WeightGathering* gathering = nullptr;
  int rank = 0;
  __nv_bfloat16* owned = nullptr;
  // The rank's copy of `tensor`, or nullptr when another rank keeps it.
  __nv_bfloat16* weight(graph::TensorId tensor) const;
  // The rank's piece of group `g`.
  __nv_bfloat16* piece(size_t g) const;
};

class CudaWeightGatherer final : public runtime::StepObserver {
public:
  // Fills group `g`'s buffer (`buffer`, its bytes) on `stream`.
  using Fill = std::function<void(size_t g, void* buffer, cudaStream_t stream)>;
  // `backend` has loaded the plan `gathering` was applied to; `side` is the stream the fills run on.
  CudaWeightGatherer(const compiler::WeightGathering& gathering, runtime::CudaBackend& backend, cudaStream_t side,
                     Fill fill);

  void before_step(size_t step) override;
  void after_step(size_t) override {}

private:
  const compiler::WeightGathering& gathering_;
  runtime::CudaBackend& backend_;
  cudaStream_t side_;
  Fill fill_;
  std::vector<cuda::Event> issued_, gathered_;  // one each per use
};

// The usual fill of a training rank: its piece copied in, then `communicator`'s all-gather (on
// the side stream) of the group's pieces.
CudaWeightGatherer::Fill all_gather_fill(const CudaWeightShard& shard, distributed::Communicator& communicator);

}  // namespace surogate::train
