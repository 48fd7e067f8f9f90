// See dependent_launch.h.
#include "cuda/dependent_launch.h"

#include <atomic>

#include "cuda/cuda_check.h"

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

DependentLaunch::DependentLaunch(bool overlap, cudaStream_t stream) {
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  count = overlap && may_overlap_previous(stream) ? 1 : 0;
}

}  // namespace surogate::cuda
