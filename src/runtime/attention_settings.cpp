// The process's attention settings and the planned attention scratch; see attention_settings.h.
#include "runtime/attention_settings.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.h"

namespace surogate::runtime {
namespace {

std::mutex& settings_mutex() {
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

size_t cudnn_planned_bytes(int64_t tokens, int64_t q_heads, int64_t head_dim) {
  if (!cudnn_measured_head_dim(head_dim)) return 0;
  return static_cast<size_t>(tokens * q_heads * (3 * head_dim + 1) * 4 + 2048);
}

}  // namespace

bool cudnn_measured_head_dim(int64_t head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

size_t planned_attention_scratch_bytes(int64_t tokens, int64_t q_heads, int64_t head_dim) {
  const auto ours = static_cast<size_t>(tokens * q_heads * (head_dim + 1) * 4);
  return static_cast<size_t>(20 * (tokens + 1)) + std::max(ours, cudnn_planned_bytes(tokens, q_heads, head_dim));
}

void set_attention_settings(const AttentionSettings& settings) {
  std::lock_guard<std::mutex> lock(settings_mutex());
  settings_storage() = settings;
}

AttentionSettings attention_settings() {
  std::lock_guard<std::mutex> lock(settings_mutex());
  return settings_storage();
}

}  // namespace surogate::runtime
