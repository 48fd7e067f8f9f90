// AdamW step on fp32 master weights with decoupled weight decay (PyTorch's AdamW):
//   g = grad · grad_scale            (grad_scale: device scalar from grad-norm clipping, may be null)
//   m = β1·m + (1−β1)·g,   v = β2·v + (1−β2)·g²
//   master = master · (1 − lr·wd) − step_size · m / (sqrt(v) · second_correction + ε)
//   params = bf16(master)            (params may be null when the master is the only copy)
// with step_size = lr / (1 − β1^t) and second_correction = 1 / sqrt(1 − β2^t), the same
// coefficients as the CPU optimizer (train/optim/adamw_math.h), computed on the host per step.
// Memory-bound: 16-byte fp32 vectors (4 elements per thread) when the element count is a
// multiple of 4, a scalar loop otherwise; grid-stride.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

struct AdamWStep {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float step_size = 0.0f;          // lr / (1 − β1^t)
  float second_correction = 1.0f;  // 1 / sqrt(1 − β2^t)
  float decay = 0.0f;              // lr · weight_decay (0 for norms and biases)
};

void adamw_update(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                  const float* grad, const float* grad_scale, int64_t count, const AdamWStep& step,
                  cudaStream_t stream);

}  // namespace surogate::cuda
