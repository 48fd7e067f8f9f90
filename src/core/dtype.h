// Element types of tensors, with the names safetensors and Hugging Face configs use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace surogate {

enum class DType : uint8_t { F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U8, BOOL };

size_t dtype_size_bytes(DType dtype);
// The safetensors spelling: "F32", "BF16", "F8_E4M3", ...
std::string_view dtype_safetensors_name(DType dtype);
std::optional<DType> dtype_from_safetensors_name(std::string_view name);
// The torch spelling used by config.json and the `torch_dtype` option: "float32", "bfloat16", ...
std::string_view dtype_torch_name(DType dtype);
std::optional<DType> dtype_from_torch_name(std::string_view name);
bool dtype_is_floating(DType dtype);

}  // namespace surogate
