// Host fp32 weights into a CUDA plan's 16-bit weights: every weight is rounded to bf16 (fp16 in an
// fp16 plan) on all cores into one of two pinned staging halves while the other half's copy to the
// device runs (an 8B model: 16 GB through 64 MiB halves, at the host link's speed instead of one
// core's rounding plus a pageable copy per tensor).
#pragma once

#include <span>

#include "graph/graph.h"
#include "runtime/cuda_backend.h"
#include "train/device/training_device.h"

namespace surogate::train {

// `weights[i]` into the plan's tensor `ids[i]`, on the backend's stream; returns once the staging
// halves are free again (the copies read them), not necessarily once the stream is done.
void upload_16bit_weights(runtime::CudaBackend& backend, std::span<const graph::TensorId> ids,
                          std::span<const WeightView> weights, bool fp16);

}  // namespace surogate::train
