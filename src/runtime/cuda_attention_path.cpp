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
// SUROGATE_ATTENTION=auto|cudnn|surogate picks the backend for a whole process (A/B runs of the
// same job or test suite without rebuilding); unset is auto.
AttentionBackend backend_from_environment() {
  const char* value = std::getenv("SUROGATE_ATTENTION");
  const std::string text = value == nullptr ? "" : value;
  if (text.empty() || text == "auto") return AttentionBackend::Auto;
  if (text == "cudnn") return AttentionBackend::Cudnn;
  if (text == "surogate") return AttentionBackend::Surogate;
  fail_user("SUROGATE_ATTENTION is '{}'; it takes auto, cudnn or surogate", text);
}

AttentionSettings& settings_storage() {
  static AttentionSettings settings{backend_from_environment(), false};
  return settings;
}

// Head dims cuDNN runs here: the ones measured and tested against the CPU op
// (tests/runtime_cuda/test_cudnn_attention_cuda.cpp); the tiny models' dims keep our kernels.
bool measured_head_dim(int head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

// The workspace the memory plan counts for an attention backward (train/device/memory_budget.cpp's
// attention_workspace_bytes: an fp32 dQ accumulator and the softmax statistics). A shape for which
// cuDNN asks for more (its ragged layout for packed documents can ask for gigabytes) runs our
// kernels, so the plan and --dry-run stay true.
size_t planned_workspace_bytes(const cuda::CudnnAttentionShape& s) {
  const auto tokens = static_cast<size_t>(s.batch * s.sequence);
  return 20 * (tokens + 1) + tokens * static_cast<size_t>(s.q_heads) * (static_cast<size_t>(s.head_dim) + 1) * 4;
}

std::string workspace_refusal(const cuda::CudnnAttentionShape& s) {
  const size_t needed =
      std::max(cuda::cudnn_attention_forward_workspace(s), cuda::cudnn_attention_backward_workspace(s));
  if (needed <= planned_workspace_bytes(s)) return "";
  return fmt::format("cuDNN asks for a {:.2f} GiB workspace, more than the {:.2f} GiB the memory plan counts",
                     static_cast<double>(needed) / (1 << 30),
                     static_cast<double>(planned_workspace_bytes(s)) / (1 << 30));
}

std::string shape_text(const cuda::CudnnAttentionShape& s) {
  return fmt::format("{}×{} tokens, {}/{} heads, head_dim {}, window {}{}, {}", s.batch, s.sequence, s.q_heads,
                     s.kv_heads, s.head_dim, s.window, s.documents ? ", packed documents" : "",
                     s.half ? "fp16" : "bf16");
}

}  // namespace

void set_attention_settings(const AttentionSettings& settings) {
  std::lock_guard<std::mutex> lock(path_mutex());
  settings_storage() = settings;
}

AttentionSettings attention_settings() {
  std::lock_guard<std::mutex> lock(path_mutex());
  return settings_storage();
}

AttentionPath attention_path(cuda::CudnnAttentionShape& shape) {
  const AttentionSettings settings = attention_settings();
  shape.deterministic = settings.deterministic;
  AttentionPath path;
  const cuda::CudnnAvailability& cudnn = cuda::cudnn_availability();
  std::string refusal;
  if (settings.backend == AttentionBackend::Surogate) {
    refusal = "SUROGATE_ATTENTION=surogate";
  } else if (!cudnn.usable) {
    refusal = cudnn.description;
  } else if (shape.documents && settings.backend == AttentionBackend::Auto) {
    // Measured on an H200 at the 8B job's shape: the ragged layout (one slot per token, as the
    // count is not known on the host while CUDA graphs replay) asks for more memory than the GPU
    // has. Until the slots are bounded, packed documents run our kernels unless forced.
    refusal = "packed documents: cuDNN's ragged layout here takes one slot per token and a workspace of slots × "
              "sequence (more than a GPU holds at training sizes); SUROGATE_ATTENTION=cudnn forces it";
  } else if (!measured_head_dim(shape.head_dim)) {
    refusal = fmt::format("head_dim {} (cuDNN runs 64, 128 and 256)", shape.head_dim);
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
