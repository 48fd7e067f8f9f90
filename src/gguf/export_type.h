// The `--type` of `surogate export`: what llama.cpp calls the file type (general.file_type), and
// the rule that picks each tensor's encoding for it (gguf/tensor_plan.h).
//   f16, bf16, q8_0  as convert_hf_to_gguf.py --outtype writes them
//   q4_k_m           as llama-quantize Q4_K_M writes it from an f16 file
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace surogate::gguf {

enum class ExportType { F16, BF16, Q8_0, Q4_K_M };

// "f16", "bf16", "q8_0", "q4_k_m" (case-insensitive); anything else is a UserError naming it.
ExportType parse_export_type(std::string_view text);
std::string_view export_type_name(ExportType type);
// llama.cpp's LLAMA_FTYPE_MOSTLY_* value, written as general.file_type.
uint32_t llama_file_type(ExportType type);

}  // namespace surogate::gguf
