// The fp8_hybrid recipe's quantization as the epilogue of a kernel that produces a bf16 tensor
// (rmsnorm.cu, swiglu.cu: the "*_fp8" forms of fp8_quantize.h's Fp8Output), and the pieces the
// plain quantize kernels (fp8_quantize.cu) share with it, so that both quantize bit for bit alike.
//
// A producer with an Fp8Output writes its bf16 result as before, then, per element v (the value
// as rounded to bf16, what a later quantize pass would read):
//   - the site has a delayed amax (row[0] > 0): q = cvt.satfinite(v · scale), scale =
//     fp8_scale(row[0]); max |v| into row[1]; one thread writes scale_inv;
//   - it has none yet (the first step): max |v| into *amax only. fp8_quantize_pending then
//     quantizes the bf16 result as fp8_quantize would (row[0] is read, not written, by both).
// Amaxes are unsigned bit patterns under atomicMax, as the CPU reference compares them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace surogate::cuda::fp8 {

__device__ __forceinline__ unsigned amax_bits(float value) { return __float_as_uint(fabsf(value)); }

// quant::fp8_scale: max / amax, or 1 for an amax that is 0, NaN or infinite.
__device__ __forceinline__ float scale_for(float amax, float format_max) {
  return (amax > 0.0f && isfinite(amax)) ? __fdiv_rn(format_max, amax) : 1.0f;
}

// Block-wide max of `bits` (every thread of the block calls it), then one atomicMax into
// *target from thread 0 — skipped when *target already holds as much (most blocks, once the
// tensor's largest value has been recorded: fewer atomics on one address). Ends with a barrier,
// so that a second call (swiglu_backward_fp8 records two tensors) cannot overwrite warp_max
// before warp 0 has read the first call's.
__device__ __forceinline__ void record_block_max(unsigned bits, float* target) {
  __shared__ unsigned warp_max[32];
  for (int offset = 16; offset > 0; offset /= 2) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  if (lane == 0) warp_max[warp] = bits;
  __syncthreads();
  if (warp == 0) {
    bits = lane < warps ? warp_max[lane] : 0u;
    for (int offset = 16; offset > 0; offset /= 2) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, offset));
    unsigned* address = reinterpret_cast<unsigned*>(target);
    if (lane == 0 && bits != 0u && bits > *reinterpret_cast<volatile unsigned*>(address)) atomicMax(address, bits);
  }
  __syncthreads();
}

// Codes of 8 values (already rounded to bf16) at `scale`, as 8 bytes.
template <__nv_fp8_interpretation_t kFormat>
__device__ __forceinline__ uint2 encode8(const float v[8], float scale) {
  uint2 out;
  auto* pairs = reinterpret_cast<__nv_fp8x2_storage_t*>(&out);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    pairs[j] = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(v[2 * j], scale), __fmul_rn(v[2 * j + 1], scale)),
                                        __NV_SATFINITE, kFormat);
  }
  return out;
}
__device__ __forceinline__ uint2 encode8_e4m3(const float v[8], float scale) { return encode8<__NV_E4M3>(v, scale); }

// One producer's view of its site (fp8_quantize.h's Fp8Output) inside the kernel; format_max is
// 448 (E4M3, the default) or 57344 (E5M2).
struct EpilogueState {
  bool delayed = false;  // row[0] > 0: quantize here
  float scale = 1.0f;
};

__device__ __forceinline__ EpilogueState epilogue_begin(const float* row, float* scale_inv, bool first_block,
                                                        float format_max = 448.0f) {
  EpilogueState state;
  const float delayed = row[0];
  state.delayed = delayed > 0.0f;
  if (state.delayed) {
    state.scale = scale_for(delayed, format_max);
    if (first_block && threadIdx.x == 0) *scale_inv = __fdiv_rn(1.0f, state.scale);
  }
  return state;
}

// After the block's last value: its max into row[1] (delayed) or into *amax (no delayed amax yet).
__device__ __forceinline__ void epilogue_end(const EpilogueState& state, unsigned bits, float* row, float* amax) {
  record_block_max(bits, state.delayed ? row + 1 : amax);
}

// The grid of an elementwise producer that loops over `work` items, `threads` per block: at most
// one wave (8 blocks of 256 threads on each of an H100's / H200's 132 multiprocessors). One item
// per thread made SwiGLU's block reduction (two barriers and an atomic, once per 2,048 values)
// cost ~10 µs of 36 per 25M values on an H200, as each of ~12 waves waited on it.
inline unsigned epilogue_blocks(int64_t work, int threads) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 132 * 8 ? 132 * 8 : blocks);
}

}  // namespace surogate::cuda::fp8
