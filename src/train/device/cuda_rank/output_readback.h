// A CUDA rank's kept outputs (TrainingDevice::keep_outputs: a training objective's per-sequence
// log-probabilities, train/objective/): after each micro-batch the tensors are copied to pinned
// host memory on the backend's stream, so nothing waits between a rank's micro-batches and its
// collectives, and take() hands them over once the stream is synchronized (after measure()).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compiler/execution_plan.h"
#include "runtime/cuda_backend.h"
#include "train/device/cuda_rank/pinned_floats.h"
#include "train/device/training_device.h"

namespace surogate::train {

class CudaOutputReadback {
public:
  // `tensors`: F32 outputs of `plan`. Room for `max_micro_batches` micro-batches between two take()
  // calls. Allocates pinned memory: made on the rank's thread outside its collective tasks.
  CudaOutputReadback(const compiler::ExecutionPlan& plan, std::vector<graph::TensorId> tensors,
                     int64_t max_micro_batches);

  // The micro-batch `backend` just enqueued: its outputs copied on the backend's stream.
  void record(runtime::CudaBackend& backend);
  // Every recorded micro-batch's outputs, in order (waits for `stream`); then none is kept.
  std::vector<KeptOutputs> take(cudaStream_t stream);

private:
  std::vector<graph::TensorId> tensors_;
  std::vector<size_t> sizes_;  // floats per tensor
  size_t floats_ = 0;          // per micro-batch
  int64_t max_micro_batches_ = 0, micro_batches_ = 0;
  PinnedFloats values_;
};

}  // namespace surogate::train
