// One warp's step over 16 cached keys on tensor cores: what the tensor-core split kernel
// (cached_attention_tensor.cu) and the many-rows kernel (cached_attention_rows.cu) both run once
// their step's keys and values are in shared memory. Internal to those two files.
//
//   scores  S[16 × 16] = Q[16 × D] · K[16 × D]ᵀ, the keys as two n-tiles of 8, K's B fragments by
//           ldmatrix from the tile, Q's A fragments held by the caller;
//   softmax masked (past the range's end, after the query's position, outside the window), scaled
//           into the exp2 domain, each query row's running max, sum and accumulator rescaled;
//   values  O[16 × D] += P[16 × 16] · V[16 × D]: the scores' C fragments are P's A fragment (no
//           shared memory), rounded to the element type; V's B fragments by ldmatrix.trans.
// kHalves: 2 for tiles with queries in all 16 rows (prefill chunks), 1 when every query of a tile
// is in rows 0-7 (decode: mma_upper_rows, no register holds rows 8-15).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/attention_tiles.cuh"

namespace surogate::cuda::cached {

constexpr int kStepKeys = 16;  // keys a warp scores per step: two n-tiles of 8

// A K or V tile's row in shared memory (elements): 16-byte aligned, ldmatrix conflict-free.
template <int D>
constexpr int kTensorRowStride = D + 8;

// The rows-0-to-7 form of mma_16816 for tiles whose queries all sit in the first 8 rows (decode:
// one position, at most 8 query heads per kv head): rows 8-15 of A are zero and their outputs are
// dropped, so no register holds them across the loop. 242 registers a thread left two blocks an
// SM at 512 decode rows (2.6 TB/s, Nsight Compute, 2026-11-30); this form and V through cp.async
// free the room for more.
template <typename T>
__device__ __forceinline__ void mma_upper_rows(float (&c)[2], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
#if !SUROGATE_SM80_INSTRUCTIONS
  __trap();
#else
  float dropped2, dropped3;
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%10,%10};\n"
        : "+f"(c[0]), "+f"(c[1]), "=f"(dropped2), "=f"(dropped3)
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1), "f"(0.0f));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%10,%10};\n"
        : "+f"(c[0]), "+f"(c[1]), "=f"(dropped2), "=f"(dropped3)
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1), "f"(0.0f));
  }
#endif
}

// A warp's running softmax state for its tile's rows (lane (g, t) = (lane / 4, lane % 4) holds
// rows g and g + 8, columns 8j + 2t, +1 of the accumulator; the sums are the lane's columns only
// until the caller adds the quad's).
template <int D>
struct WarpSoftmax {
  float acc[D / 8][4];
  float maximum[2];
  float sum[2];
  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    maximum[0] = maximum[1] = -INFINITY;
    sum[0] = sum[1] = 0.0f;
  }
};

// What masks a step's scores: the keys' end (exclusive), each of the lane's two rows' position and
// whether it is a query at all, the window (0: full causal) and the scale times log2(e).
struct StepMask {
  int64_t end = 0;
  int64_t position[2] = {};
  bool real[2] = {false, false};
  int window = 0;
  float scale_log2 = 0.0f;
};

// The step over keys base .. base + 15, whose K and V rows are key_tile / value_tile (row stride
// kTensorRowStride<D>), with the tile's query A fragments `query` (k-step k: dims 16k + 2t, +1 in
// registers 0 / 1 and 16k + 8 + 2t, +1 in 2 / 3).
template <typename T, int D, int kHalves>
__device__ __forceinline__ void tensor_step(WarpSoftmax<D>& state, const uint32_t (&query)[D / 16][4],
                                            const T* key_tile, const T* value_tile, int64_t base, const StepMask& mask,
                                            int lane) {
  constexpr int kSteps = D / 16, kStride = kTensorRowStride<D>;
  const int matrix = lane / 8, t = lane % 4;
  float score[2][4] = {};
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    // Matrices: keys 0-7 × dims 16k..+7, keys 0-7 × +8..+15, keys 8-15 × the same two.
    uint32_t fragments[4];
    attention::ldmatrix_x4(fragments, key_tile + ((matrix / 2) * 8 + lane % 8) * kStride + 16 * k + (matrix % 2) * 8);
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      if constexpr (kHalves == 1) {
        float upper[2] = {score[n][0], score[n][1]};
        mma_upper_rows<T>(upper, query[k][0], query[k][2], fragments[2 * n], fragments[2 * n + 1]);
        score[n][0] = upper[0];
        score[n][1] = upper[1];
      } else {
        attention::mma_16816<T>(score[n], query[k], fragments[2 * n], fragments[2 * n + 1]);
      }
    }
  }
  // Masked, scaled into the exp2 domain; then each row's running max, sum and accumulator.
#pragma unroll
  for (int n = 0; n < 2; ++n) {
#pragma unroll
    for (int e = 0; e < 2 * kHalves; ++e) {  // rows 8-15 (e 2, 3) unused with kHalves 1
      const int h = e / 2;
      const int64_t key = base + 8 * n + 2 * t + e % 2;
      const bool visible = mask.real[h] && key < mask.end && key <= mask.position[h] &&
                           (mask.window <= 0 || key > mask.position[h] - mask.window);
      score[n][e] = visible ? score[n][e] * mask.scale_log2 : -INFINITY;
    }
  }
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    float step_max = fmaxf(fmaxf(score[0][2 * h], score[0][2 * h + 1]), fmaxf(score[1][2 * h], score[1][2 * h + 1]));
    step_max = fmaxf(step_max, __shfl_xor_sync(0xffffffffu, step_max, 1));
    step_max = fmaxf(step_max, __shfl_xor_sync(0xffffffffu, step_max, 2));
    const float new_max = fmaxf(state.maximum[h], step_max);
    const float correction = new_max == -INFINITY ? 1.0f : exp2f(state.maximum[h] - new_max);
    float step_sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        score[n][e] = new_max == -INFINITY ? 0.0f : exp2f(score[n][e] - new_max);
        step_sum += score[n][e];
      }
    }
    state.sum[h] = state.sum[h] * correction + step_sum;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      state.acc[j][2 * h] *= correction;
      state.acc[j][2 * h + 1] *= correction;
    }
    state.maximum[h] = new_max;
  }
  const uint32_t probabilities[4] = {attention::pack_x2<T>(score[0][0], score[0][1]),
                                     attention::pack_x2<T>(score[0][2], score[0][3]),
                                     attention::pack_x2<T>(score[1][0], score[1][1]),
                                     attention::pack_x2<T>(score[1][2], score[1][3])};
#pragma unroll
  for (int j = 0; j < D / 16; ++j) {
    uint32_t fragments[4];
    attention::ldmatrix_x4_trans(fragments,
                                 value_tile + ((matrix % 2) * 8 + lane % 8) * kStride + 16 * j + (matrix / 2) * 8);
    if constexpr (kHalves == 1) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float upper[2] = {state.acc[2 * j + half][0], state.acc[2 * j + half][1]};
        mma_upper_rows<T>(upper, probabilities[0], probabilities[2], fragments[2 * half], fragments[2 * half + 1]);
        state.acc[2 * j + half][0] = upper[0];
        state.acc[2 * j + half][1] = upper[1];
      }
    } else {
      attention::mma_16816<T>(state.acc[2 * j], probabilities, fragments[0], fragments[1]);
      attention::mma_16816<T>(state.acc[2 * j + 1], probabilities, fragments[2], fragments[3]);
    }
  }
}

}  // namespace surogate::cuda::cached
