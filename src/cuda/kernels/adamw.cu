// AdamW update kernel (see adamw.h).
#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/adamw.h"
#include "cuda/kernels/optimizer_precision.cuh"

namespace surogate::cuda {
namespace {

__device__ __forceinline__ float adamw_element(float w, float& m, float& v, float g, const AdamWStep& s) {
  m = __fadd_rn(__fmul_rn(s.beta1, m), __fmul_rn(__fsub_rn(1.0f, s.beta1), g));
  v = __fadd_rn(__fmul_rn(s.beta2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, s.beta2), g), g));
  const float denominator = __fadd_rn(__fmul_rn(__fsqrt_rn(v), s.second_correction), s.epsilon);
  return __fsub_rn(__fmul_rn(w, __fsub_rn(1.0f, s.decay)), __fdiv_rn(__fmul_rn(s.step_size, m), denominator));
}

// The updated weights 4·index .. 4·index + 3 from their old values `w`; the moments are read and
// written back (all pointers aligned).
template <typename Grad>
__device__ __forceinline__ float4 adamw_vector(float4 w, float* first_moment, float* second_moment, const Grad* grad,
                                               int64_t index, float scale, const AdamWStep& step) {
  float4 m = reinterpret_cast<float4*>(first_moment)[index];
  float4 v = reinterpret_cast<float4*>(second_moment)[index];
  const float4 g = kernels::load4(grad, index);
  w.x = adamw_element(w.x, m.x, v.x, __fmul_rn(g.x, scale), step);
  w.y = adamw_element(w.y, m.y, v.y, __fmul_rn(g.y, scale), step);
  w.z = adamw_element(w.z, m.z, v.z, __fmul_rn(g.z, scale), step);
  w.w = adamw_element(w.w, m.w, v.w, __fmul_rn(g.w, scale), step);
  reinterpret_cast<float4*>(first_moment)[index] = m;
  reinterpret_cast<float4*>(second_moment)[index] = v;
  return w;
}

// The updated weight `index` from its old value `w`; the moments are read and written back.
template <typename Grad>
__device__ __forceinline__ float adamw_scalar(float w, float* first_moment, float* second_moment, const Grad* grad,
                                              int64_t index, float scale, const AdamWStep& step) {
  float m = first_moment[index], v = second_moment[index];
  w = adamw_element(w, m, v, __fmul_rn(kernels::load_gradient(grad, index), scale), step);
  first_moment[index] = m;
  second_moment[index] = v;
  return w;
}

// Elements 4·index .. 4·index + 3 of one tensor with an fp32 master (all pointers aligned).
template <typename Grad>
__device__ __forceinline__ void adamw_master_vector(__nv_bfloat16* params, float* master, float* first_moment,
                                                    float* second_moment, const Grad* grad, int64_t index,
                                                    float scale, const AdamWStep& step) {
  const float4 w = adamw_vector(reinterpret_cast<float4*>(master)[index], first_moment, second_moment, grad, index,
                                scale, step);
  reinterpret_cast<float4*>(master)[index] = w;
  if (!params) return;
  const __nv_bfloat162 low = __floats2bfloat162_rn(w.x, w.y), high = __floats2bfloat162_rn(w.z, w.w);
  uint2 packed;
  packed.x = *reinterpret_cast<const uint32_t*>(&low);
  packed.y = *reinterpret_cast<const uint32_t*>(&high);
  reinterpret_cast<uint2*>(params)[index] = packed;
}

// Element `index` of one tensor with an fp32 master.
template <typename Grad>
__device__ __forceinline__ void adamw_master_scalar(__nv_bfloat16* params, float* master, float* first_moment,
                                                    float* second_moment, const Grad* grad, int64_t index,
                                                    float scale, const AdamWStep& step) {
  const float w = adamw_scalar(master[index], first_moment, second_moment, grad, index, scale, step);
  master[index] = w;
  if (params) params[index] = __float2bfloat16(w);
}

// kMaster: fp32 master weights (else the bf16 params are the master, stochastically rounded).
template <bool kVector, bool kMaster, typename Grad>
__global__ void adamw_kernel(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                             const Grad* grad, const float* grad_scale, int64_t count, AdamWStep step) {
  const float scale = grad_scale ? *grad_scale : 1.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first_index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (kVector) {
    for (int64_t index = first_index; index < count / 4; index += stride) {
      if constexpr (kMaster) {
        adamw_master_vector(params, master, first_moment, second_moment, grad, index, scale, step);
      } else {
        const float4 w =
            adamw_vector(kernels::load4(params, index), first_moment, second_moment, grad, index, scale, step);
        const int64_t first = 4 * index;
        const __nv_bfloat162 low = __halves2bfloat162(kernels::stochastic_bf16(w.x, step.rounding_key, first),
                                                      kernels::stochastic_bf16(w.y, step.rounding_key, first + 1));
        const __nv_bfloat162 high = __halves2bfloat162(kernels::stochastic_bf16(w.z, step.rounding_key, first + 2),
                                                       kernels::stochastic_bf16(w.w, step.rounding_key, first + 3));
        uint2 packed;
        packed.x = *reinterpret_cast<const uint32_t*>(&low);
        packed.y = *reinterpret_cast<const uint32_t*>(&high);
        reinterpret_cast<uint2*>(params)[index] = packed;
      }
    }
  } else {
    for (int64_t index = first_index; index < count; index += stride) {
      if constexpr (kMaster) {
        adamw_master_scalar(params, master, first_moment, second_moment, grad, index, scale, step);
      } else {
        const float w =
            adamw_scalar(__bfloat162float(params[index]), first_moment, second_moment, grad, index, scale, step);
        params[index] = kernels::stochastic_bf16(w, step.rounding_key, index);
      }
    }
  }
}

// adamw_update_tensors: block b updates elements [kTensorBlock · (b − start), + kTensorBlock) of
// the tensor whose blocks start at the largest block_starts entry ≤ b (empty tensors own none).
constexpr int kTensorThreads = 256;
constexpr int64_t kTensorBlock = 4 * 4 * kTensorThreads;  // 4 vectors of 4 elements per thread

// Elements [begin, end) of one tensor of the table (begin a multiple of 4).
template <typename Grad>
__device__ __forceinline__ void adamw_tensor_range(const AdamWTensor& t, const Grad* grad, int64_t begin, int64_t end,
                                                   float scale, const AdamWStep& step) {
  if (t.vector) {
    for (int64_t index = begin / 4 + threadIdx.x; index < end / 4; index += kTensorThreads) {
      adamw_master_vector(t.params, t.master, t.first_moment, t.second_moment, grad, index, scale, step);
    }
  } else {
    for (int64_t index = begin + threadIdx.x; index < end; index += kTensorThreads) {
      adamw_master_scalar(t.params, t.master, t.first_moment, t.second_moment, grad, index, scale, step);
    }
  }
}

__global__ void adamw_tensors_kernel(const AdamWTensor* tensors, const int64_t* block_starts, int size,
                                     const float* grad_scale, AdamWStep step) {
  const float scale = grad_scale ? *grad_scale : 1.0f;
  const int64_t block = blockIdx.x;
  int low = 0, high = size - 1;
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (block_starts[middle] <= block) low = middle;
    else high = middle - 1;
  }
  const AdamWTensor tensor = tensors[low];
  if (!tensor.decays) step.decay = 0.0f;
  const int64_t begin = (block - block_starts[low]) * kTensorBlock;
  const int64_t end = begin + kTensorBlock < tensor.count ? begin + kTensorBlock : tensor.count;
  if (tensor.grad) {
    adamw_tensor_range(tensor, tensor.grad, begin, end, scale, step);
  } else {
    adamw_tensor_range(tensor, tensor.grad_bf16, begin, end, scale, step);
  }
}

template <bool kMaster, typename Grad>
void launch(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment, const Grad* grad,
            const float* grad_scale, int64_t count, const AdamWStep& step, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const bool vector = count % 4 == 0;
  const int64_t work = vector ? count / 4 : count;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((work + kThreads - 1) / kThreads, 65535));
  if (vector) {
    adamw_kernel<true, kMaster><<<blocks, kThreads, 0, stream>>>(params, master, first_moment, second_moment, grad,
                                                                 grad_scale, count, step);
  } else {
    adamw_kernel<false, kMaster><<<blocks, kThreads, 0, stream>>>(params, master, first_moment, second_moment, grad,
                                                                  grad_scale, count, step);
  }
  CUDA_CHECK_LAUNCH();
}

template <typename Grad>
void dispatch(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment, const Grad* grad,
              const float* grad_scale, int64_t count, const AdamWStep& step, cudaStream_t stream) {
  if (count == 0) return;
  if (master) {
    launch<true>(params, master, first_moment, second_moment, grad, grad_scale, count, step, stream);
  } else {
    CUDA_REQUIRE(params != nullptr, "adamw_update: a bf16 master (null master) needs the bf16 params");
    launch<false>(params, master, first_moment, second_moment, grad, grad_scale, count, step, stream);
  }
}

bool aligned(const void* pointer, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }

}  // namespace

AdamWTensorTable::AdamWTensorTable(std::vector<AdamWTensor> tensors) : size_(static_cast<int>(tensors.size())) {
  CUDA_REQUIRE(!tensors.empty(), "adamw_update_tensors: no tensors");
  std::vector<int64_t> starts;
  for (AdamWTensor& tensor : tensors) {
    CUDA_REQUIRE(tensor.count == 0 || (tensor.master && tensor.first_moment && tensor.second_moment &&
                                       (tensor.grad || tensor.grad_bf16)),
                 "adamw_update_tensors: every tensor needs an fp32 master, both moments and a gradient");
    tensor.vector = tensor.count % 4 == 0 && aligned(tensor.master, 16) && aligned(tensor.first_moment, 16) &&
                    aligned(tensor.second_moment, 16) && aligned(tensor.params, 8) &&
                    (tensor.grad ? aligned(tensor.grad, 16) : aligned(tensor.grad_bf16, 8));
    starts.push_back(blocks_);
    blocks_ += (tensor.count + kTensorBlock - 1) / kTensorBlock;
  }
  tensors_ = to_device(tensors);
  block_starts_ = to_device(starts);
}

void adamw_update_tensors(const AdamWTensorTable& table, const float* grad_scale, const AdamWStep& step,
                          cudaStream_t stream) {
  if (table.blocks() == 0) return;
  CUDA_REQUIRE(table.blocks() <= 0x7fffffff, "adamw_update_tensors: too many elements");
  adamw_tensors_kernel<<<static_cast<unsigned>(table.blocks()), kTensorThreads, 0, stream>>>(
      table.tensors(), table.block_starts(), table.size(), grad_scale, step);
  CUDA_CHECK_LAUNCH();
}

void adamw_update(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                  const float* grad, const float* grad_scale, int64_t count, const AdamWStep& step,
                  cudaStream_t stream) {
  dispatch(params, master, first_moment, second_moment, grad, grad_scale, count, step, stream);
}

void adamw_update(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                  const __nv_bfloat16* grad, const float* grad_scale, int64_t count, const AdamWStep& step,
                  cudaStream_t stream) {
  dispatch(params, master, first_moment, second_moment, grad, grad_scale, count, step, stream);
}

}  // namespace surogate::cuda
