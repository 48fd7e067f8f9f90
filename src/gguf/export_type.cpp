#include "gguf/export_type.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace surogate::gguf {

ExportType parse_export_type(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "f16") return ExportType::F16;
  if (lower == "bf16") return ExportType::BF16;
  if (lower == "q8_0") return ExportType::Q8_0;
  if (lower == "q4_k_m") return ExportType::Q4_K_M;
  fail_user("--type {}: unknown GGUF type; choose one of f16, bf16, q8_0, q4_k_m", text);
}

std::string_view export_type_name(ExportType type) {
  switch (type) {
    case ExportType::F16: return "f16";
    case ExportType::BF16: return "bf16";
    case ExportType::Q8_0: return "q8_0";
    case ExportType::Q4_K_M: return "q4_k_m";
  }
  return "?";
}

uint32_t llama_file_type(ExportType type) {
  switch (type) {
    case ExportType::F16: return 1;      // LLAMA_FTYPE_MOSTLY_F16
    case ExportType::BF16: return 32;    // LLAMA_FTYPE_MOSTLY_BF16
    case ExportType::Q8_0: return 7;     // LLAMA_FTYPE_MOSTLY_Q8_0
    case ExportType::Q4_K_M: return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  }
  return 0;
}

}  // namespace surogate::gguf
