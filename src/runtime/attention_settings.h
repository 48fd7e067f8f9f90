// The attention settings of a process (which implementation runs the CUDA attention ops, cuDNN's
// deterministic backward, the data's bound on documents per row) and the scratch a CUDA attention
// backward is planned with. Plain C++, so the trainer's start-up and the memory plan read and set
// them in a build without CUDA too; the choice they steer is runtime/cuda_attention_path.h's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace surogate::runtime {

enum class AttentionBackend {
  Auto,      // cuDNN where it takes the shape, else our kernels (the default)
  Cudnn,     // the same, named (tests; a refusal still falls back, with its line)
  Surogate,  // our kernels only
};

struct AttentionSettings {
  AttentionBackend backend = AttentionBackend::Auto;
  bool deterministic = false;  // cuDNN's deterministic backward (the config's deterministic_attention)
  // The most segments (documents and padding runs) one row of this run's data has: cuDNN's packed
  // documents layout takes rows × this many slots (its graph cannot follow each batch). 0: not
  // known (no data seen), and then packed documents run our kernels unless cuDNN is forced, with a
  // slot per token. Bidirectional attention (causal: false: a vision tower's windows and frames)
  // ignores it: its documents run our kernels unless cuDNN is forced, with a slot per token.
  int64_t segments_per_row = 0;
};

// Process-wide; set before the plans are loaded (binders read it when they bind). The backend
// starts as the environment's SUROGATE_ATTENTION (auto, cudnn or surogate; unset: auto; anything
// else a UserError naming the variable), deterministic as false, segments_per_row as 0.
void set_attention_settings(const AttentionSettings& settings);
AttentionSettings attention_settings();

// Head dims cuDNN runs for causal attention: the ones measured and tested against the CPU op
// (tests/runtime_cuda/test_cudnn_attention_cuda.cpp); the tiny models' dims keep our kernels.
bool cudnn_measured_head_dim(int64_t head_dim);

// The scratch one CUDA attention backward of `tokens` tokens takes at most, whichever path runs
// it: cu_seqlens and cuDNN's ragged lengths and offsets (20 bytes a token), and the larger of our
// flash kernels' workspace (an fp32 dQ accumulator and a row statistic: tokens × q_heads ×
// (head_dim + 1) floats) and, for the head dims cuDNN runs, cuDNN's (measured on an H200 with cuDNN
// 9.19: three fp32 copies of dQ's size and the statistic with packed documents, two for rows).
// The memory plan counts it (train/device/memory_budget.cpp); a shape for which cuDNN asks for
// more runs our kernels (attention_path), so the plan and --dry-run stay true.
size_t planned_attention_scratch_bytes(int64_t tokens, int64_t q_heads, int64_t head_dim);

}  // namespace surogate::runtime
