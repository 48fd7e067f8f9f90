// 8-bit AdamW kernel (see adamw_8bit.h).
#include "cuda/cuda_check.h"
#include "cuda/kernels/adamw_8bit.h"
#include "cuda/kernels/optimizer_precision.cuh"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = static_cast<int>(kAdamW8bitBlock) / kThreads;

// Index of the code value nearest to x; ties go to the lower code, NaN to code 0 (as the CPU's
// nearest_code over std::lower_bound).
__device__ __forceinline__ uint8_t nearest_code(const float* code, float x) {
  int low = 0, high = 256;
  while (low < high) {
    const int middle = (low + high) >> 1;
    if (code[middle] < x) low = middle + 1; else high = middle;
  }
  if (low == 0) return 0;
  if (low == 256) return 255;
  const float upper = code[low], lower = code[low - 1];
  return static_cast<uint8_t>(__fsub_rn(x, lower) <= __fsub_rn(upper, x) ? low - 1 : low);
}

__device__ __forceinline__ float block_max(float value, float* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  value = lane < kThreads / 32 ? shared[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  __syncthreads();  // `shared` is reused by the next reduction
  return value;
}

__global__ void __launch_bounds__(kThreads)
adamw_8bit_kernel(const AdamW8bitTensor* tensors, const AdamW8bitJob* jobs, const float* signed_code,
                  const float* unsigned_code, const float* grad_scale, AdamWStep s) {
  __shared__ float signed_map[256];
  __shared__ float unsigned_map[256];
  __shared__ float reduction[kThreads / 32];
  signed_map[threadIdx.x] = signed_code[threadIdx.x];
  unsigned_map[threadIdx.x] = unsigned_code[threadIdx.x];
  const AdamW8bitJob job = jobs[blockIdx.x];
  const AdamW8bitTensor t = tensors[job.tensor];
  __nv_bfloat16* params = t.params;
  float* master = t.master;
  uint8_t* first_codes = t.first_codes;
  uint8_t* second_codes = t.second_codes;
  float* first_absmax = t.first_absmax;
  float* second_absmax = t.second_absmax;
  const float* grad = t.grad;
  const __nv_bfloat16* grad_bf16 = t.grad_bf16;
  const uint64_t rounding_key = master ? 0 : rounding_parameter_key(s.rounding_key, static_cast<uint64_t>(job.tensor));
  const int64_t count = t.count;
  const float decay = t.decays ? s.decay : 0.0f;
  const int64_t block = job.block;
  const float old_first_absmax = first_absmax[block];
  const float old_second_absmax = second_absmax[block];
  const float scale = grad_scale ? *grad_scale : 1.0f;
  __syncthreads();

  const int64_t begin = block * kAdamW8bitBlock;
  float m[kPerThread], v[kPerThread];
  float m_max = 0.0f, v_max = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t index = begin + threadIdx.x + static_cast<int64_t>(k) * kThreads;
    m[k] = 0.0f;
    v[k] = 0.0f;
    if (index >= count) continue;
    const float raw = grad ? grad[index] : __bfloat162float(grad_bf16[index]);
    const float g = grad_scale ? __fmul_rn(raw, scale) : raw;
    const float m_old = __fmul_rn(signed_map[first_codes[index]], old_first_absmax);
    const float v_old = __fmul_rn(unsigned_map[second_codes[index]], old_second_absmax);
    m[k] = __fadd_rn(__fmul_rn(s.beta1, m_old), __fmul_rn(__fsub_rn(1.0f, s.beta1), g));
    v[k] = __fadd_rn(__fmul_rn(s.beta2, v_old), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, s.beta2), g), g));
    const float update = __fdiv_rn(__fmul_rn(s.step_size, m[k]),
                                   __fadd_rn(__fmul_rn(__fsqrt_rn(v[k]), s.second_correction), s.epsilon));
    float p = master ? master[index] : __bfloat162float(params[index]);
    p = __fsub_rn(p, __fadd_rn(update, __fmul_rn(decay, p)));
    if (master) {
      master[index] = p;
      if (params) params[index] = __float2bfloat16(p);
    } else {
      params[index] = kernels::stochastic_bf16(p, rounding_key, index);
    }
    m_max = fmaxf(m_max, fabsf(m[k]));
    v_max = fmaxf(v_max, v[k]);
  }
  m_max = block_max(m_max, reduction);
  v_max = block_max(v_max, reduction);
  if (threadIdx.x == 0) {
    first_absmax[block] = m_max;
    second_absmax[block] = v_max;
  }
  const float m_inverse = m_max > 0.0f ? __fdiv_rn(1.0f, m_max) : 0.0f;
  const float v_inverse = v_max > 0.0f ? __fdiv_rn(1.0f, v_max) : 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t index = begin + threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (index >= count) continue;
    first_codes[index] = nearest_code(signed_map, __fmul_rn(m[k], m_inverse));
    second_codes[index] = nearest_code(unsigned_map, __fmul_rn(v[k], v_inverse));
  }
}

}  // namespace

void adamw_8bit_update(const AdamW8bitTensor* tensors, const AdamW8bitJob* jobs, int64_t job_count,
                       const float* signed_code, const float* unsigned_code, const float* grad_scale,
                       const AdamWStep& step, cudaStream_t stream) {
  if (job_count == 0) return;
  CUDA_REQUIRE(job_count <= 0x7fffffff, "adamw_8bit_update: too many blocks for one launch");
  adamw_8bit_kernel<<<static_cast<unsigned>(job_count), kThreads, 0, stream>>>(tensors, jobs, signed_code,
                                                                                unsigned_code, grad_scale, step);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda
