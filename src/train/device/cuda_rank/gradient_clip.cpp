// A CUDA rank's gradient norm and clip factor; see gradient_clip.h.
#include "train/device/cuda_rank/gradient_clip.h"

#include <cmath>

#include "cuda/cuda_check.h"
#include "cuda/kernels/grad_norm.h"

namespace surogate::train {
namespace {

// global_grad_norm's finish, in the same float arithmetic (cuda/kernels/grad_norm.cu).
float clip_coefficient(float norm, float max_norm) {
  return max_norm > 0.0f ? std::fmin(1.0f, max_norm / (norm + 1e-6f)) : 1.0f;
}

}  // namespace

CudaGradientClip::CudaGradientClip(size_t tensors, double max_grad_norm, cudaStream_t stream)
    : max_norm_(static_cast<float>(max_grad_norm)), stream_(stream), result_(2),
      partials_(static_cast<size_t>(cuda::kGradNormBlocks) * tensors), norm_(2) {}

void CudaGradientClip::measure(CudaGradientAccumulators& accumulators, size_t first, size_t end) {
  accumulators.zero_stale();
  const int tensors = static_cast<int>(end - first);
  if (tensors == 0) {
    norm_.data[0] = 0.0f;
    set_from_norm(0.0);
    return;
  }
  const int64_t* counts = accumulators.counts().counts() + first;
  if (accumulators.dtype() == DType::BF16) {
    cuda::global_grad_norm(result_.data(), partials_.data(), accumulators.bf16_table() + first, counts, tensors,
                           max_norm_, stream_);
  } else {
    cuda::global_grad_norm(result_.data(), partials_.data(), accumulators.fp32_table() + first, counts, tensors,
                           max_norm_, stream_);
  }
  CUDA_CHECK(cudaMemcpyAsync(norm_.data, result_.data(), 2 * sizeof(float), cudaMemcpyDeviceToHost, stream_));
}

void CudaGradientClip::set_from_norm(double norm) {
  norm_.data[1] = clip_coefficient(static_cast<float>(norm), max_norm_);
  upload_factor();
}

void CudaGradientClip::scale(double gradient_scale) {
  // clip_slot_gradients' coefficient (cpu_parameters.h) on the norm read back by norm(), in the
  // float arithmetic of global_grad_norm's finish: the norm measured is the loss-scaled one.
  const float unscaled = static_cast<float>(static_cast<double>(norm()) * gradient_scale);
  norm_.data[1] = static_cast<float>(gradient_scale) * clip_coefficient(unscaled, max_norm_);
  upload_factor();
}

void CudaGradientClip::upload_factor() {
  CUDA_CHECK(cudaMemcpyAsync(result_.data() + 1, norm_.data + 1, sizeof(float), cudaMemcpyHostToDevice, stream_));
}

}  // namespace surogate::train
