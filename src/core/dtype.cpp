#include "core/dtype.h"

#include <array>

namespace surogate {
namespace {

struct DTypeInfo {
  DType dtype;
  size_t size_bytes;
  std::string_view safetensors_name;
  std::string_view torch_name;
  bool floating;
};

constexpr std::array<DTypeInfo, 12> kDTypes{{
    {DType::F64, 8, "F64", "float64", true},
    {DType::F32, 4, "F32", "float32", true},
    {DType::F16, 2, "F16", "float16", true},
    {DType::BF16, 2, "BF16", "bfloat16", true},
    {DType::F8_E4M3, 1, "F8_E4M3", "float8_e4m3fn", true},
    {DType::F8_E5M2, 1, "F8_E5M2", "float8_e5m2", true},
    {DType::I64, 8, "I64", "int64", false},
    {DType::I32, 4, "I32", "int32", false},
    {DType::I16, 2, "I16", "int16", false},
    {DType::I8, 1, "I8", "int8", false},
    {DType::U8, 1, "U8", "uint8", false},
    {DType::BOOL, 1, "BOOL", "bool", false},
}};

const DTypeInfo& info(DType dtype) {
  for (const auto& entry : kDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  return kDTypes[1];
}

}  // namespace

size_t dtype_size_bytes(DType dtype) { return info(dtype).size_bytes; }
std::string_view dtype_safetensors_name(DType dtype) { return info(dtype).safetensors_name; }
std::string_view dtype_torch_name(DType dtype) { return info(dtype).torch_name; }
bool dtype_is_floating(DType dtype) { return info(dtype).floating; }

std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
  for (const auto& entry : kDTypes) {
    if (entry.safetensors_name == name) return entry.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_torch_name(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  if (name == "float" ) return DType::F32;
  if (name == "half") return DType::F16;
  for (const auto& entry : kDTypes) {
    if (entry.torch_name == name) return entry.dtype;
  }
  return std::nullopt;
}

}  // namespace surogate
