// Kernels for the ops the LoRA rewrite (models/lora.h) adds to a BF16 graph beyond linear / add:
// `scale` in bf16 / fp16 and the counter-based `dropout` (ops/dropout.h) in bf16, fp16 and fp32; plus the
// bf16 → fp32 widening an optimizer step needs to read bf16 gradients. Plain host launchers on a
// stream, checked after every launch; no graph headers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

// The dropout mask of ops/dropout.h, bit for bit: SplitMix64's finaliser, one hash per four
// elements, element i kept when its 16-bit draw (bits 16·(i mod 4) of mix(mix(mix(seed) ^ stream)
// ^ (i / 4))) is at least ops::dropout_threshold16(p); integer arithmetic only on the device.
__host__ __device__ inline uint64_t dropout_mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

// out[i] = (addend[i] +) (keep(seed, stream, i) ? x[i] · float(ops::dropout_keep_scale(p)) : 0),
// summed in fp32 and rounded once for E (bf16 or fp16). `seed` is a device pointer to the graph's I32 seed
// scalar, read as uint32 like the CPU op. probability in [0, 1). addend may be null.
template <typename E>
void dropout_16bit(const E* x, const int32_t* seed, uint64_t stream_id, double probability, E* out, int64_t count,
                   cudaStream_t stream, const E* addend = nullptr);
void dropout_f32(const float* x, const int32_t* seed, uint64_t stream_id, double probability, float* out,
                 int64_t count, cudaStream_t stream, const float* addend = nullptr);

}  // namespace surogate::cuda
