// Which implementation runs the attention ops (attention, attention_fp8, attention_backward) on
// the CUDA backend: cuDNN's fused SDPA (cuda/cudnn_attention.h) or our kernels
// (cuda/kernels/attention.h, plain_attention.h). Chosen once per process from the settings and
// the cuDNN found at run time, and once per attention shape (cuDNN may refuse a shape: head dims
// other than 64 / 128 / 256 (and 80 for bidirectional attention), a GPU older than sm_80, a shape its heuristics have no engine for);
// the first choice prints one line on stderr ("attention: ..."), a refused shape one more.
// A shape's forward and backward always take the same path: the logsumexp between them is laid
// out differently by the two (each path's own). The settings it reads, and the scratch the memory
// plan counts for it, are runtime/attention_settings.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/cudnn_attention.h"
#include "runtime/attention_settings.h"

namespace surogate::runtime {

struct AttentionPath {
  bool cudnn = false;
  std::string description;  // what runs it and, for our kernels, why not cuDNN
};

// The path for a shape under the current settings (shape.deterministic is filled from them);
// builds cuDNN's graphs on first sight (bind time, not under capture).
AttentionPath attention_path(cuda::CudnnAttentionShape& shape);

}  // namespace surogate::runtime
