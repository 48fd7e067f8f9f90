// The precision a vision run (vision_tower_run.h, vision_model_run.h) takes its weights and float
// inputs in: fp32 on the CPU backend (the parity tests and tools), or the CUDA comparisons'
// (tests/runtime_cuda/test_vision_cuda.cpp): every weight and float input rounded to bf16 once, the
// CUDA plan in BF16 and the CPU plan in F32 on the same (rounded) values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/bfloat16.h"
#include "core/dtype.h"
#include "graph/graph.h"
#include "runtime/backend.h"

namespace surogate::models::testing {

struct RunPrecision {
  DType dtype = DType::F32;    // the graph's float dtype (F32 or BF16)
  bool round_to_bf16 = false;  // weights and float inputs rounded to bf16 before either backend sees them
};

// Float values in the bytes a tensor of the run's dtype takes.
class HostValues {
public:
  HostValues(std::span<const float> values, const RunPrecision& precision) : dtype_(precision.dtype) {
    f32_.assign(values.begin(), values.end());
    if (precision.round_to_bf16 || dtype_ == DType::BF16) {
      bf16_.reserve(f32_.size());
      for (float& value : f32_) {
        bf16_.push_back(float_to_bf16(value));
        value = bf16_to_float(bf16_.back());
      }
    }
  }
  std::span<const std::byte> bytes() const {
    if (dtype_ == DType::BF16) return std::as_bytes(std::span<const uint16_t>(bf16_));
    return std::as_bytes(std::span<const float>(f32_));
  }

private:
  DType dtype_;
  std::vector<float> f32_;
  std::vector<uint16_t> bf16_;
};

// `count` values of a tensor of `dtype` (F32 or BF16) as floats.
inline std::vector<float> read_floats(const runtime::Backend& backend, graph::TensorId id, size_t count, DType dtype) {
  std::vector<float> values(count);
  if (dtype != DType::BF16) {
    backend.read(id, std::as_writable_bytes(std::span<float>(values)));
    return values;
  }
  std::vector<uint16_t> bits(count);
  backend.read(id, std::as_writable_bytes(std::span<uint16_t>(bits)));
  for (size_t i = 0; i < count; ++i) values[i] = bf16_to_float(bits[i]);
  return values;
}

}  // namespace surogate::models::testing
