// A CUDA rank's gradient norm and clip factor: the global L2 norm of accumulated gradients
// (cuda/kernels/grad_norm.h) and the factor min(1, max_grad_norm / (norm + 1e-6)) every gradient is
// multiplied by in the optimizer step, both kept on the device (the optimizer kernels read the
// factor there: no host round trip) and copied to pinned host memory (norm() after the stream is
// synchronized).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/device_buffer.h"
#include "train/device/cuda_rank/gradient_accumulators.h"
#include "train/device/cuda_rank/pinned_floats.h"

namespace surogate::train {

class CudaGradientClip {
public:
  // For up to `tensors` tensors at a time, clipping to `max_grad_norm` (0: no clipping).
  CudaGradientClip(size_t tensors, double max_grad_norm, cudaStream_t stream);

  // Enqueues the norm of the accumulated gradients of tensors [first, end) and its clip factor
  // (none: a norm of 0).
  void measure(CudaGradientAccumulators& accumulators, size_t first, size_t end);
  float norm() const { return norm_.data[0]; }
  // Sets the device clip factor from a norm computed elsewhere (ZeRO-2: the ranks' shards
  // together), with global_grad_norm's formula.
  void set_from_norm(double norm);
  // fp16 loss scaling: the factor becomes gradient_scale (1 / the loss scale) times the clip
  // coefficient of the unscaled norm (norm() · gradient_scale), as the CPU device's
  // clip_slot_gradients applies them in one pass. After synchronize, before the step.
  void scale(double gradient_scale);
  const float* factor() const { return result_.data() + 1; }

private:
  // Writes the host factor to the device.
  void upload_factor();

  float max_norm_;
  cudaStream_t stream_;
  cuda::DeviceBuffer<float> result_, partials_;  // result_: the norm and the factor
  PinnedFloats norm_;                            // their host copies
};

}  // namespace surogate::train
