// Which implementation runs the attention ops (attention, attention_fp8, attention_backward) on
// the CUDA backend: cuDNN's fused SDPA (cuda/cudnn_attention.h) or our kernels
// (cuda/kernels/attention.h, plain_attention.h). Chosen once per process from the settings and
// the cuDNN found at run time, and once per attention shape (cuDNN may refuse a shape: head dims
// other than 64 / 128 / 256, a GPU older than sm_80, a shape its heuristics have no engine for);
// the first choice prints one line on stderr ("attention: ..."), a refused shape one more.
// A shape's forward and backward always take the same path: the logsumexp between them is laid
// out differently by the two (each path's own).
#pragma once

#include <string>

#include "cuda/cudnn_attention.h"

namespace surogate::runtime {

enum class AttentionBackend {
  Auto,      // cuDNN where it takes the shape, else our kernels (the default)
  Cudnn,     // the same, named (tests; a refusal still falls back, with its line)
  Surogate,  // our kernels only
};

struct AttentionSettings {
  AttentionBackend backend = AttentionBackend::Auto;
  bool deterministic = false;  // cuDNN's deterministic backward (the config's deterministic_attention)
};

// Process-wide; set before the plans are loaded (binders read it when they bind). The backend
// starts as the environment's SUROGATE_ATTENTION (auto, cudnn or surogate; unset: auto; anything
// else a UserError naming the variable), deterministic as false.
void set_attention_settings(const AttentionSettings& settings);
AttentionSettings attention_settings();

struct AttentionPath {
  bool cudnn = false;
  std::string description;  // what runs it and, for our kernels, why not cuDNN
};

// The path for a shape under the current settings (shape.deterministic is filled from them);
// builds cuDNN's graphs on first sight (bind time, not under capture).
AttentionPath attention_path(cuda::CudnnAttentionShape& shape);

}  // namespace surogate::runtime
