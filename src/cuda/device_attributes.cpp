// cuda/device_attributes.h.
#include "cuda/device_attributes.h"

#include <cuda_runtime_api.h>

#include <atomic>

#include "cuda/cuda_check.h"

namespace surogate::cuda {

int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

int current_compute_major() {
  constexpr int kDevices = 64;
  static std::atomic<int> majors[kDevices];  // 0: not asked yet
  const int device = current_device();
  int major = device < kDevices ? majors[device].load(std::memory_order_relaxed) : 0;
  if (major == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (device < kDevices) majors[device].store(major, std::memory_order_relaxed);
  }
  return major;
}

}  // namespace surogate::cuda
