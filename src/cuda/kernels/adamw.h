// AdamW step with decoupled weight decay (PyTorch's AdamW):
//   g = grad · grad_scale            (grad_scale: device scalar from grad-norm clipping, may be null)
//   m = β1·m + (1−β1)·g,   v = β2·v + (1−β2)·g²
//   w = w · (1 − lr·wd) − step_size · m / (sqrt(v) · second_correction + ε)
// with step_size = lr / (1 − β1^t) and second_correction = 1 / sqrt(1 − β2^t), the same
// coefficients as the CPU optimizer (train/optim/adamw_math.h), computed on the host per step.
// Every operation is one round-to-nearest fp32 operation in the order written (no fused
// multiply-adds), so a host computation of the same formula reproduces the kernel bit for bit.
//
// Where the weight w lives (master_dtype):
//   fp32 master: w is master[i]; params[i] = bf16(w) round to nearest (params may be null when
//                the master is the only copy);
//   bf16 master: master is null; w is read from params[i] and written back as
//                stochastic_round_bf16(w, rounding_bits(step.rounding_key, i))
//                (core/stochastic_rounding.h; step.rounding_key is the parameter's key).
// The gradient (gradient_dtype) is fp32 or bf16 (one overload each).
// Memory-bound: 4 elements per thread (16-byte fp32 / 8-byte bf16 vectors) when the element
// count is a multiple of 4, a scalar loop otherwise; grid-stride.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "cuda/device_buffer.h"

namespace surogate::cuda {

struct AdamWStep {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float step_size = 0.0f;          // lr / (1 − β1^t)
  float second_correction = 1.0f;  // 1 / sqrt(1 − β2^t)
  float decay = 0.0f;              // lr · weight_decay (0 for norms and biases)
  // bf16 master only: adamw_update takes the parameter's key (rounding_parameter_key),
  // adamw_8bit_update the step's key (rounding_step_key; each tensor's key from its table index).
  uint64_t rounding_key = 0;
};

void adamw_update(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                  const float* grad, const float* grad_scale, int64_t count, const AdamWStep& step,
                  cudaStream_t stream);
void adamw_update(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                  const __nv_bfloat16* grad, const float* grad_scale, int64_t count, const AdamWStep& step,
                  cudaStream_t stream);

// Many tensors in one launch, for fp32 masters (the LoRA job steps 504 adapter tensors: one
// launch each cost ~4 ms a step). The same element-wise update as adamw_update, bit for bit;
// step.decay applies to the tensors with `decays`, 0 to the others.
struct AdamWTensor {
  __nv_bfloat16* params = nullptr;  // may be null
  float* master = nullptr;
  float* first_moment = nullptr;
  float* second_moment = nullptr;
  const float* grad = nullptr;              // the gradient: fp32 ...
  const __nv_bfloat16* grad_bf16 = nullptr;  // ... or bf16
  int64_t count = 0;
  bool decays = true;
  bool vector = false;  // set by AdamWTensorTable: 4-element vectors (count and pointers allow)
};

// The device copy of a fixed list of tensors and of where each one's blocks start.
class AdamWTensorTable {
public:
  explicit AdamWTensorTable(std::vector<AdamWTensor> tensors);
  const AdamWTensor* tensors() const { return tensors_.data(); }
  const int64_t* block_starts() const { return block_starts_.data(); }
  int size() const { return size_; }
  int64_t blocks() const { return blocks_; }

private:
  DeviceBuffer<AdamWTensor> tensors_;
  DeviceBuffer<int64_t> block_starts_;
  int size_ = 0;
  int64_t blocks_ = 0;
};

void adamw_update_tensors(const AdamWTensorTable& table, const float* grad_scale, const AdamWStep& step,
                          cudaStream_t stream);

}  // namespace surogate::cuda
