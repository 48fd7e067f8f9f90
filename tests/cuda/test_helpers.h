// Shared helpers for the GPU kernel tests: skip without a GPU, random bf16 data (host floats
// already rounded to bf16, so CPU references see exactly the GPU's inputs), conversions, and
// the error measure used by every test:
//   relative_error(gpu, ref) = max_i |gpu_i − ref_i| / max_i |ref_i|
// (the largest deviation relative to the tensor's scale). Any non-finite GPU value — such as
// the NaN poison left in an element the kernel failed to write — makes the error infinite.
#pragma once

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "../random_values.h"

namespace surogate::cuda::testing {

#define SKIP_WITHOUT_GPU()                                         \
  do {                                                             \
    std::string skip_reason;                                       \
    if (!::surogate::cuda::cuda_device_available(&skip_reason)) {  \
      GTEST_SKIP() << skip_reason;                                 \
    }                                                              \
  } while (0)

using Bf16 = uint16_t;  // host view of __nv_bfloat16 bits

inline std::mt19937& generator() {
  static std::mt19937 engine(::surogate::testing::test_seed(20261129));
  return engine;
}

// Uniform in [-scale, scale], rounded to bf16; returns the float values.
inline std::vector<float> random_floats(size_t count, float scale = 1.0f) {
  std::uniform_real_distribution<float> distribution(-scale, scale);
  std::vector<float> values(count);
  for (auto& value : values) value = bf16_to_float(float_to_bf16(distribution(generator())));
  return values;
}

inline std::vector<float> random_fp32(size_t count, float low, float high) {
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (auto& value : values) value = distribution(generator());
  return values;
}

inline std::vector<Bf16> to_bf16(const std::vector<float>& values) {
  std::vector<Bf16> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
  return bits;
}

inline std::vector<float> from_bf16(const std::vector<Bf16>& bits) {
  std::vector<float> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) values[i] = bf16_to_float(bits[i]);
  return values;
}

// Device bf16 buffer holding `values` (already bf16-exact).
inline DeviceBuffer<Bf16> device_bf16(const std::vector<float>& values) { return to_device(to_bf16(values)); }

inline std::vector<float> download_bf16(const DeviceBuffer<Bf16>& buffer) { return from_bf16(buffer.download()); }

template <typename Gpu, typename Reference>
double relative_error(const std::vector<Gpu>& gpu, const std::vector<Reference>& reference) {
  EXPECT_EQ(gpu.size(), reference.size());
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) scale = std::max(scale, std::fabs(static_cast<double>(reference[i])));
  for (size_t i = 0; i < gpu.size() && i < reference.size(); ++i) {
    const double value = static_cast<double>(gpu[i]);
    if (!std::isfinite(value)) return INFINITY;
    worst = std::max(worst, std::fabs(value - static_cast<double>(reference[i])));
  }
  return scale > 0.0 ? worst / scale : worst;
}

// A bf16 device pointer type for kernel calls.
inline __nv_bfloat16* bf16_ptr(DeviceBuffer<Bf16>& buffer) { return reinterpret_cast<__nv_bfloat16*>(buffer.data()); }
inline const __nv_bfloat16* bf16_ptr(const DeviceBuffer<Bf16>& buffer) {
  return reinterpret_cast<const __nv_bfloat16*>(buffer.data());
}

inline void synchronize() { CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace surogate::cuda::testing
