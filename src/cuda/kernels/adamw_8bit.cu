// 8-bit AdamW kernel (see adamw_8bit.h).
//
// Per element the arithmetic is the one of the old one-block-per-job kernel, operation for
// operation; what changed is the memory traffic around it: 8 consecutive elements per thread
// (8-byte code, 16-byte fp32 / bf16 vectors), the code books and their nearest-code tables loaded
// into shared memory once per resident block instead of once per 2048 elements, and the nearest
// code found by one table look-up (nearest_code_table.h) instead of an 8-step binary search with
// bank conflicts, twice per element.
#include <algorithm>
#include <atomic>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/kernels/adamw_8bit.h"
#include "cuda/kernels/optimizer_precision.cuh"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 8;
constexpr int kWarps = kThreads / 32;
// Resident blocks per SM the registers are budgeted for (64 per thread at 4): 4 × ~49 KiB of
// shared memory fit the 228 KiB of an sm_90 SM. sm_100's compiler spills a few bytes at 64
// registers, so it gets 80 (3 blocks). The launch sizes its grid by the occupancy calculator.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kBlocksPerSm = 3;
#else
constexpr int kBlocksPerSm = 4;
#endif
static_assert(kThreads * kPerThread == kAdamW8bitBlock, "one job is one block-wide pass");

// The largest of every thread's (m_max, v_max). fmaxf ignores NaN and the values are ≥ +0, so
// the order of the reduction does not matter. Two buffers alternate between jobs, so one barrier
// per job suffices (a buffer is rewritten only after the next job's barrier).
__device__ __forceinline__ float2 block_max(float m_max, float v_max, float2* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    m_max = fmaxf(m_max, __shfl_xor_sync(0xffffffffu, m_max, offset));
    v_max = fmaxf(v_max, __shfl_xor_sync(0xffffffffu, v_max, offset));
  }
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = make_float2(m_max, v_max);
  __syncthreads();
  float2 result = shared[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    result.x = fmaxf(result.x, shared[w].x);
    result.y = fmaxf(result.y, shared[w].y);
  }
  return result;
}

// Whether a tensor's pointers allow vectors of 8 elements (threads start at multiples of 8).
__device__ __forceinline__ bool vectorisable(const AdamW8bitTensor& t) {
  const auto bits = [](const void* pointer) { return reinterpret_cast<uintptr_t>(pointer); };
  const uintptr_t sixteen = bits(t.params) | bits(t.master) | bits(t.grad) | bits(t.grad_bf16);
  const uintptr_t eight = bits(t.first_codes) | bits(t.second_codes);
  return (sixteen & 15) == 0 && (eight & 7) == 0;
}

// Code k of 8 packed little-endian in a uint2 (codes stay packed: 4 registers, not 16).
__device__ __forceinline__ uint32_t code_at(uint2 packed, int k) {
  return ((k < 4 ? packed.x : packed.y) >> (8 * (k % 4))) & 0xffu;
}

__device__ __forceinline__ void bf16x8_to_float(uint4 packed, float* out) {
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 pair = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[k]));
    out[2 * k] = pair.x;
    out[2 * k + 1] = pair.y;
  }
}

// fp32 elements 8·v8 .. 8·v8 + 7 (two 16-byte loads: the vector path checked the alignment).
__device__ __forceinline__ void load_float8(const float* values, int64_t v8, float* out) {
  const float4 low = reinterpret_cast<const float4*>(values)[2 * v8];
  const float4 high = reinterpret_cast<const float4*>(values)[2 * v8 + 1];
  out[0] = low.x, out[1] = low.y, out[2] = low.z, out[3] = low.w;
  out[4] = high.x, out[5] = high.y, out[6] = high.z, out[7] = high.w;
}

// The bf16 weight written: round to nearest from an fp32 master, stochastic for a bf16 master.
__device__ __forceinline__ __nv_bfloat16 to_bf16(float value, bool fp32_master, uint64_t rounding_key,
                                                 int64_t index) {
  return fp32_master ? __float2bfloat16(value) : kernels::stochastic_bf16(value, rounding_key, index);
}

// Loads a thread's elements first .. first + 7 (the first `valid` of them; all 8 as vectors with
// kVector), updates them (m, v and the weights; m = v = 0 past `valid`) and stores the weights.
// kFp32Master: t.master is set (else the bf16 params are the master); a template parameter so
// that each instantiation holds only its own path's registers (64 at 4 blocks per SM).
template <bool kVector, bool kFp32Master>
__device__ __forceinline__ void update_elements(const AdamW8bitTensor& t, int tensor, int64_t first, int valid,
                                                const AdamW8bitCodes& book, float scale, bool scaled,
                                                const AdamWStep& s, float decay,
                                                float old_first_absmax, float old_second_absmax, float* m,
                                                float* v, float& m_max, float& v_max) {
  const int64_t v8 = first / kPerThread;
  float g[kPerThread], p[kPerThread];
  uint2 first_codes = make_uint2(0u, 0u), second_codes = make_uint2(0u, 0u);
  if (kVector) {
    first_codes = reinterpret_cast<const uint2*>(t.first_codes)[v8];
    second_codes = reinterpret_cast<const uint2*>(t.second_codes)[v8];
    if (t.grad) {
      load_float8(t.grad, v8, g);
    } else {
      bf16x8_to_float(reinterpret_cast<const uint4*>(t.grad_bf16)[v8], g);
    }
    if (kFp32Master) {
      load_float8(t.master, v8, p);
    } else {
      bf16x8_to_float(reinterpret_cast<const uint4*>(t.params)[v8], p);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      g[k] = p[k] = 0.0f;
      if (k >= valid) continue;
      const int64_t index = first + k;
      (k < 4 ? first_codes.x : first_codes.y) |= uint32_t{t.first_codes[index]} << (8 * (k % 4));
      (k < 4 ? second_codes.x : second_codes.y) |= uint32_t{t.second_codes[index]} << (8 * (k % 4));
      g[k] = t.grad ? t.grad[index] : __bfloat162float(t.grad_bf16[index]);
      p[k] = kFp32Master ? t.master[index] : __bfloat162float(t.params[index]);
    }
  }

  // A bf16 master's rounding key: the tensor's, from its index in the table.
  const uint64_t rounding_key =
      kFp32Master ? 0 : rounding_parameter_key(s.rounding_key, static_cast<uint64_t>(tensor));
  uint32_t weights[kPerThread / 2] = {0u, 0u, 0u, 0u};  // the bf16 weights, packed in pairs
  // The update, operation for operation as the one-block-per-job kernel (and the CPU) did it.
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    m[k] = 0.0f;
    v[k] = 0.0f;
    if (!kVector && k >= valid) continue;
    const float gk = scaled ? __fmul_rn(g[k], scale) : g[k];
    const float m_old = __fmul_rn(book.signed_code[code_at(first_codes, k)], old_first_absmax);
    const float v_old = __fmul_rn(book.unsigned_code[code_at(second_codes, k)], old_second_absmax);
    m[k] = __fadd_rn(__fmul_rn(s.beta1, m_old), __fmul_rn(__fsub_rn(1.0f, s.beta1), gk));
    v[k] = __fadd_rn(__fmul_rn(s.beta2, v_old), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, s.beta2), gk), gk));
    const float update = __fdiv_rn(__fmul_rn(s.step_size, m[k]),
                                   __fadd_rn(__fmul_rn(__fsqrt_rn(v[k]), s.second_correction), s.epsilon));
    p[k] = __fsub_rn(p[k], __fadd_rn(update, __fmul_rn(decay, p[k])));
    const uint32_t weight = __bfloat16_as_ushort(to_bf16(p[k], kFp32Master, rounding_key, first + k));
    weights[k / 2] |= weight << (16 * (k % 2));
    m_max = fmaxf(m_max, fabsf(m[k]));
    v_max = fmaxf(v_max, v[k]);
  }

  if (kVector) {
    if (kFp32Master) {
      reinterpret_cast<float4*>(t.master)[2 * v8] = make_float4(p[0], p[1], p[2], p[3]);
      reinterpret_cast<float4*>(t.master)[2 * v8 + 1] = make_float4(p[4], p[5], p[6], p[7]);
    }
    if (t.params) {
      reinterpret_cast<uint4*>(t.params)[v8] = make_uint4(weights[0], weights[1], weights[2], weights[3]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      if (k >= valid) continue;
      const int64_t index = first + k;
      if (kFp32Master) t.master[index] = p[k];
      if (t.params) t.params[index] = __ushort_as_bfloat16(static_cast<uint16_t>(weights[k / 2] >> (16 * (k % 2))));
    }
  }
}

// The nearest codes of m / absmax and v / absmax (as m · (1 / absmax), the CPU's order), stored.
template <bool kVector>
__device__ __forceinline__ void store_codes(const AdamW8bitTensor& t, int64_t first, int valid,
                                            const AdamW8bitCodes& book, const float* m, const float* v,
                                            float m_inverse, float v_inverse) {
  uint2 first_codes = make_uint2(0u, 0u), second_codes = make_uint2(0u, 0u);
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const uint32_t first_code = nearest_code_from_table(book.signed_table, __fmul_rn(m[k], m_inverse));
    const uint32_t second_code =
        nearest_code_from_table(book.unsigned_table, __fmul_rn(v[k], v_inverse));
    (k < 4 ? first_codes.x : first_codes.y) |= first_code << (8 * (k % 4));
    (k < 4 ? second_codes.x : second_codes.y) |= second_code << (8 * (k % 4));
  }
  if (kVector) {
    reinterpret_cast<uint2*>(t.first_codes)[first / kPerThread] = first_codes;
    reinterpret_cast<uint2*>(t.second_codes)[first / kPerThread] = second_codes;
  } else {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      if (k >= valid) continue;
      t.first_codes[first + k] = static_cast<uint8_t>(code_at(first_codes, k));
      t.second_codes[first + k] = static_cast<uint8_t>(code_at(second_codes, k));
    }
  }
}

// One job: the quantisation block `job.block` of tensor `job.tensor`. Every thread of the block
// reaches the barrier in block_max (the vector / scalar choice is per thread, around it).
__device__ __forceinline__ void update_block(const AdamW8bitTensor* tensors, AdamW8bitJob job,
                                             const AdamW8bitCodes& book, float scale, bool scaled,
                                             const AdamWStep& s, float2* reduction) {
  const AdamW8bitTensor t = tensors[job.tensor];
  const float decay = t.decays ? s.decay : 0.0f;
  const int64_t block = job.block;
  const float old_first_absmax = t.first_absmax[block];
  const float old_second_absmax = t.second_absmax[block];
  const int64_t first = block * kAdamW8bitBlock + static_cast<int64_t>(threadIdx.x) * kPerThread;
  const int valid = static_cast<int>(max(int64_t{0}, min(t.count - first, int64_t{kPerThread})));
  const bool vector = valid == kPerThread && vectorisable(t);

  float m[kPerThread], v[kPerThread];
  float m_max = 0.0f, v_max = 0.0f;
  const auto update = [&](auto vector_path, auto fp32_master) {
    update_elements<decltype(vector_path)::value, decltype(fp32_master)::value>(
        t, job.tensor, first, valid, book, scale, scaled, s, decay, old_first_absmax, old_second_absmax, m, v,
        m_max, v_max);
  };
  using Yes = std::true_type;
  using No = std::false_type;
  if (t.master) {
    if (vector) update(Yes{}, Yes{}); else update(No{}, Yes{});
  } else {
    if (vector) update(Yes{}, No{}); else update(No{}, No{});
  }
  const float2 maxima = block_max(m_max, v_max, reduction);
  if (threadIdx.x == 0) {
    t.first_absmax[block] = maxima.x;
    t.second_absmax[block] = maxima.y;
  }
  const float m_inverse = maxima.x > 0.0f ? __fdiv_rn(1.0f, maxima.x) : 0.0f;
  const float v_inverse = maxima.y > 0.0f ? __fdiv_rn(1.0f, maxima.y) : 0.0f;
  if (vector) {
    store_codes<true>(t, first, valid, book, m, v, m_inverse, v_inverse);
  } else {
    store_codes<false>(t, first, valid, book, m, v, m_inverse, v_inverse);
  }
}

__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
adamw_8bit_kernel(const AdamW8bitTensor* tensors, const AdamW8bitJob* jobs, int job_count,
                  const AdamW8bitCodes* codes, const float* grad_scale, AdamWStep s) {
  extern __shared__ uint4 shared_codes[];
  __shared__ float2 reduction[2][kWarps];
  constexpr int kWords = static_cast<int>(sizeof(AdamW8bitCodes) / sizeof(uint4));
  for (int i = threadIdx.x; i < kWords; i += kThreads) {
    shared_codes[i] = reinterpret_cast<const uint4*>(codes)[i];
  }
  const AdamW8bitCodes& book = *reinterpret_cast<const AdamW8bitCodes*>(shared_codes);
  const float scale = grad_scale ? *grad_scale : 1.0f;
  __syncthreads();
  // A fixed grid walks the jobs; the next job's entry is fetched a job ahead.
  int parity = 0;
  AdamW8bitJob next = jobs[blockIdx.x];
  for (int job = static_cast<int>(blockIdx.x); job < job_count; job += static_cast<int>(gridDim.x), parity ^= 1) {
    const AdamW8bitJob current = next;
    if (job + static_cast<int>(gridDim.x) < job_count) next = jobs[job + gridDim.x];
    update_block(tensors, current, book, scale, grad_scale != nullptr, s, reduction[parity]);
  }
}

// Blocks resident per SM times the SMs of the current device, found once per device (the
// attribute raising the dynamic shared memory limit is per device too). Racing first calls
// compute the same value.
int resident_blocks() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_REQUIRE(device < kMaxDevices, "adamw_8bit_update: device index out of range");
  int blocks = cached[device].load(std::memory_order_acquire);
  if (blocks > 0) return blocks;
  CUDA_CHECK(cudaFuncSetAttribute(adamw_8bit_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(sizeof(AdamW8bitCodes))));
  int per_sm = 0, sms = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, adamw_8bit_kernel, kThreads,
                                                           sizeof(AdamW8bitCodes)));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_REQUIRE(per_sm > 0, "adamw_8bit_update: the kernel does not fit an SM");
  blocks = per_sm * sms;
  cached[device].store(blocks, std::memory_order_release);
  return blocks;
}

}  // namespace

AdamW8bitCodes adamw_8bit_codes(const float* signed_code, const float* unsigned_code) {
  AdamW8bitCodes codes{};
  for (int i = 0; i < 256; ++i) {
    codes.signed_code[i] = signed_code[i];
    codes.unsigned_code[i] = unsigned_code[i];
  }
  CUDA_REQUIRE(build_nearest_code_table(codes.signed_code, codes.signed_table) &&
                   build_nearest_code_table(codes.unsigned_code, codes.unsigned_table),
               "adamw_8bit_codes: a code book is too dense for the nearest-code table layout");
  return codes;
}

void adamw_8bit_update(const AdamW8bitTensor* tensors, const AdamW8bitJob* jobs, int64_t job_count,
                       const AdamW8bitCodes* codes, const float* grad_scale, const AdamWStep& step,
                       cudaStream_t stream) {
  if (job_count == 0) return;
  CUDA_REQUIRE(job_count <= 0x7fffffff - 0x100000, "adamw_8bit_update: too many blocks for one launch");
  const int64_t grid = std::min<int64_t>(job_count, resident_blocks());
  adamw_8bit_kernel<<<static_cast<unsigned>(grid), kThreads, sizeof(AdamW8bitCodes), stream>>>(
      tensors, jobs, static_cast<int>(job_count), codes, grad_scale, step);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda
