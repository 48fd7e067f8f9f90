// fp8_hybrid on the CUDA devices: tells the backend which scaling-state sites have a delayed amax
// (quant/fp8_scaling.h: row[0] > 0), so that their producers launch neither the amax scratch's
// zeroing nor the pending quantize pass (runtime::CudaResources::fp8_delayed). Row[0] changes only
// when the history rolls after an optimizer step (or when a checkpoint is restored), so:
//   after_roll(state, stream)  enqueues the copy of every row[0] into pinned host memory, and an
//                              event after it;
//   apply(backend)             before the next micro-batch: waits for that event (by then the
//                              optimizer's kernels are done or nearly) and hands the flags to the
//                              backend, which recaptures its CUDA graph only when they changed
//                              (after the first step, and rarely after);
//   restore(host_state, ...)   from a host copy (upload(), a restored checkpoint).
// A site left unflagged (before the first roll, a NaN or all-zero history) keeps the device-side
// check: always correct, one launch slower.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <cuda_runtime_api.h>

#include "cuda/device_buffer.h"
#include "cuda/host_buffer.h"
#include "runtime/cuda_backend.h"

namespace surogate::train {

class Fp8DelayedSites {
public:
  Fp8DelayedSites(int64_t sites, int64_t history);

  void after_roll(const float* device_state, cudaStream_t stream);
  void apply(runtime::CudaBackend& backend);
  void restore(const float* host_state, runtime::CudaBackend& backend);

private:
  int64_t sites_ = 0, width_ = 0;
  cuda::PinnedHostBuffer<float> first_;  // row[0] of each site, as last copied
  cuda::Event copied_{false};
  bool pending_ = false;
};

}  // namespace surogate::train
