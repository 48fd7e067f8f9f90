// RoPE through cos/sin tables, the graph's rope_cos_sin / rope contract (ops/rope.h): the tables
// from position ids and inverse frequencies, then the rotation of [tokens, heads, head_dim] by
// them. Plain host launchers on a stream; fp32 math, rounded once to the element type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

// cos/sin [tokens, half] = cos/sin(float(position) · inv_freq[i]) · scaling, as ops/rope.h (fp32
// angle, then rounded to the table's dtype). T = float, bf16 or fp16.
template <typename T>
void rope_tables(T* cos, T* sin, const int32_t* position_ids, const float* inv_freq, int64_t tokens, int half,
                 float scaling, cudaStream_t stream);

// M-RoPE tables (ops/mrope.h): position_ids [3, tokens] (temporal, height, width); frequency i
// reads axis 0 below section_t, axis 1 below section_t + section_h, else axis 2; `interleaved`
// (Qwen3-VL): axis 1 when i % 3 == 1 and i < 3 · section_h, axis 2 when i % 3 == 2 and
// i < 3 · section_w, else axis 0.
template <typename T>
void mrope_tables(T* cos, T* sin, const int32_t* position_ids, const float* inv_freq, int64_t tokens, int half,
                  int section_t, int section_h, int section_w, bool interleaved, float scaling, cudaStream_t stream);

// x [tokens, heads, head_dim] rotated by the tables' angles (sign +1) or their negation (sign −1,
// the backward); channels past 2·half pass unchanged. Tables in T (float or E).
template <typename E, typename T>
void rope_apply(E* out, const E* x, const T* cos, const T* sin, int64_t tokens, int heads, int head_dim,
                int half, float sign, cudaStream_t stream);

}  // namespace surogate::cuda
