// programmatic_launch.cuh's host side.
#include "cuda/kernels/programmatic_launch.cuh"

#include "cuda/device_attributes.h"

namespace surogate::cuda {

bool may_overlap_previous(cudaStream_t stream) {
  if (current_compute_major() < 9) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status == cudaStreamCaptureStatusActive;
}

}  // namespace surogate::cuda
