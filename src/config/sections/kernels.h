// Configuration section: how the step is executed: CUDA graphs, fused kernels and chunking.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>

namespace surogate::config {

struct Kernels {
  bool use_cuda_graphs = true;
  bool use_fused_rope = false;
  int64_t lmhead_chunks = 1;
  int64_t attn_bwd_chunks = 1;
  bool deterministic_attention = false;  // cuDNN's deterministic attention backward
};

}  // namespace surogate::config
