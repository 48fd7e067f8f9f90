// programmatic_launch.cuh's host side.
#include <atomic>

#include "cuda/kernels/programmatic_launch.cuh"

namespace surogate::cuda {

bool may_overlap_previous(cudaStream_t stream) {
  constexpr int kDevices = 64;
  static std::atomic<int> majors[kDevices];  // 0: not asked yet
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int major = device < kDevices ? majors[device].load(std::memory_order_relaxed) : 0;
  if (major == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (device < kDevices) majors[device].store(major, std::memory_order_relaxed);
  }
  if (major < 9) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status == cudaStreamCaptureStatusActive;
}

}  // namespace surogate::cuda
