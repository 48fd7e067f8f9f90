// A few floats in page-locked host memory (not mapped, not write-combined): what a rank's stream
// copies its per-step scalars into (losses, the gradient norm) so that the host reads them after
// one synchronize, without a pageable copy.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/cuda_check.h"

namespace surogate::train {

struct PinnedFloats {
  float* data = nullptr;
  explicit PinnedFloats(size_t count) {
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data), count * sizeof(float)));
  }
  ~PinnedFloats() {
    if (data) cudaFreeHost(data);
  }
  PinnedFloats(const PinnedFloats&) = delete;
  PinnedFloats& operator=(const PinnedFloats&) = delete;
};

}  // namespace surogate::train
