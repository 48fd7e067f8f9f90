#include "runtime/cuda_attention_path.h"

#include <fmt/format.h>

#include "core/error.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace surogate::runtime {
namespace {

std::mutex& path_mutex() {
  static std::mutex mutex;
  return mutex;
}
// Bidirectional attention (causal: false) also runs the Qwen2.5-VL vision tower's head dim on
// cuDNN (1280 / 16; tests/runtime_cuda/test_bidirectional_attention_cuda.cpp).
constexpr int kVisionHeadDim = 80;

std::string workspace_refusal(const cuda::CudnnAttentionShape& s) {
  const size_t needed = std::max(cuda::cudnn_attention_forward_workspace(s),
                                 cuda::cudnn_attention_backward_workspace(s)) +
                        sizeof(int32_t) * static_cast<size_t>(s.tokens() + 1);  // the cu_seqlens beside it
  const size_t planned = planned_attention_scratch_bytes(s.tokens(), s.q_heads, s.head_dim);
  if (needed <= planned) return "";
  return fmt::format("cuDNN asks for a {:.2f} GiB workspace, more than the {:.2f} GiB the memory plan counts",
                     static_cast<double>(needed) / (1 << 30), static_cast<double>(planned) / (1 << 30));
}

std::string shape_text(const cuda::CudnnAttentionShape& s) {
  return fmt::format("{}×{} tokens, {}/{} heads, head_dim {}, window {}{}{}, {}", s.batch, s.sequence, s.q_heads,
                     s.kv_heads, s.head_dim, s.window,
                     s.documents ? fmt::format(", packed documents in {} slots", s.slots) : "",
                     s.causal ? "" : ", bidirectional", s.half ? "fp16" : "bf16");
}

}  // namespace

AttentionPath attention_path(cuda::CudnnAttentionShape& shape) {
  const AttentionSettings settings = attention_settings();
  shape.deterministic = settings.deterministic;
  // The data's bound counts a row's text documents; a bidirectional attention's documents are a
  // vision tower's windows and frames, which it does not bound: a slot per token there.
  const int64_t segments_per_row = shape.causal ? settings.segments_per_row : 0;
  if (shape.documents && segments_per_row == 1) {
    // Every row of the run's data is one document filling it (long documents cut into whole rows):
    // the rows layout has the same causal mask without the segment scan and the padding fix-up
    // (docs/cuda.md, "Documents that fill their rows"). A row of padding alone
    // is one segment too: its tokens share one id and position, so attending causally among
    // themselves gives each its own value, as seeing only itself does.
    shape.documents = false;
  }
  if (shape.documents) {
    shape.slots = segments_per_row > 0 ? std::min(shape.tokens(), shape.batch * segments_per_row) : shape.tokens();
  }
  AttentionPath path;
  const cuda::CudnnAvailability& cudnn = cuda::cudnn_availability();
  std::string refusal;
  if (settings.backend == AttentionBackend::Surogate) {
    refusal = "SUROGATE_ATTENTION=surogate";
  } else if (!cudnn.usable) {
    refusal = cudnn.description;
  } else if (shape.documents && segments_per_row <= 0 && settings.backend == AttentionBackend::Auto) {
    // Measured on an H200 at the 8B job's shape: with a slot per token (all we know without the
    // data) the ragged layout ran at a sixth of the rows layout's speed and its deterministic
    // backward asked for a terabyte of workspace.
    refusal = shape.causal ? "packed documents with no bound on their count per row (the run's data sets one); "
                             "SUROGATE_ATTENTION=cudnn forces a slot per token"
                           : "bidirectional attention within documents (a vision tower's windows and frames, "
                             "not bounded by the data); SUROGATE_ATTENTION=cudnn forces a slot per token";
  } else if (!cudnn_measured_head_dim(shape.head_dim) && (shape.causal || shape.head_dim != kVisionHeadDim)) {
    refusal = fmt::format("head_dim {} (cuDNN runs 64, 128 and 256, and {} bidirectional)", shape.head_dim,
                          kVisionHeadDim);
  } else {
    refusal = cuda::cudnn_attention_prepare(shape);
    // Forced (SUROGATE_ATTENTION=cudnn, the tests) cuDNN runs whatever workspace it asks for.
    if (refusal.empty() && settings.backend == AttentionBackend::Auto) refusal = workspace_refusal(shape);
  }
  path.cudnn = refusal.empty();
  path.description = path.cudnn ? fmt::format("{} fused SDPA (deterministic backward: {})", cudnn.description,
                                               shape.deterministic ? "on" : "off")
                                 : fmt::format("Surogate's attention kernels ({})", refusal);
  // One line for the run's choice, one more for each shape that goes the other way.
  static std::once_flag first;
  static bool first_cudnn = false;
  bool printed = false;
  std::call_once(first, [&] {
    first_cudnn = path.cudnn;
    printed = true;
    fmt::print(stderr, "attention: {}\n", path.description);
  });
  if (!printed && path.cudnn != first_cudnn) {
    std::lock_guard<std::mutex> lock(path_mutex());
    static std::set<std::string> told;
    const std::string text = shape_text(shape);
    if (told.insert(text).second) fmt::print(stderr, "attention: {}: {}\n", text, path.description);
  }
  return path;
}

}  // namespace surogate::runtime
