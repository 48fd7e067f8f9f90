// The out-of-memory report for what a CUDA rank adds to its loaded plan (masters, accumulators,
// optimizer state, offload staging), made before any of it is allocated: a UserError naming what
// takes the room and what would help, instead of a CUDA allocation failure.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config/config_enums.h"
#include "runtime/cuda_backend.h"
#include "train/device/host_offload_plan.h"

namespace surogate::train {

struct RankMemoryNeeds {
  int64_t masters = 0;       // master elements (0 with bf16 masters)
  int64_t accumulators = 0;  // accumulator elements
  int64_t trainable = 0;     // the whole flat layout's elements (what bf16 masters save)
  bool bf16_master = false, bf16_gradients = false;
  const HostOffloadPlan* offload = nullptr;
  size_t optimizer_bytes = 0;  // the optimizer's GPU bytes and the offload staging slots
  surogate::Optimizer optimizer = surogate::Optimizer::AdamW;
};

// UserError unless the GPU the backend runs on has room for `needs`.
void check_rank_memory(const RankMemoryNeeds& needs, const runtime::CudaBackend& backend);

}  // namespace surogate::train
