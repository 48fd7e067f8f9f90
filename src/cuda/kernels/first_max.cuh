// The first-maximum search of a row that greedy_tokens.cu and sample_tokens.cu share: a candidate
// (value, index, and whether the row held NaN or +inf), the rule that picks between two (the
// larger value; on equal values the lower index), its warp shuffle, and a block's reduction.
#pragma once

#include <cstdint>

namespace surogate::cuda::kernels {

struct FirstMax {
  float value;
  int64_t index;
  bool unusable;
};

__device__ __forceinline__ FirstMax better_first_max(FirstMax a, FirstMax b) {
  const bool take_b = b.value > a.value || (b.value == a.value && b.index < a.index);
  FirstMax out = take_b ? b : a;
  out.unusable = a.unusable || b.unusable;
  return out;
}

__device__ __forceinline__ FirstMax shuffle_first_max(FirstMax c, int offset) {
  return {__shfl_down_sync(0xffffffffu, c.value, offset), __shfl_down_sync(0xffffffffu, c.index, offset),
          __shfl_down_sync(0xffffffffu, static_cast<int>(c.unusable), offset) != 0};
}

// The best of every thread's `mine` in the block: thread 0's return value (the others' is
// partial). warp_best: shared memory of kWarps candidates; `none`: the index no element has.
template <int kWarps>
__device__ FirstMax block_first_max(FirstMax mine, FirstMax* warp_best, int64_t none) {
  for (int offset = 16; offset > 0; offset /= 2) mine = better_first_max(mine, shuffle_first_max(mine, offset));
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = mine;
  __syncthreads();
  if (threadIdx.x < 32) {
    mine = threadIdx.x < kWarps ? warp_best[threadIdx.x] : FirstMax{-INFINITY, none, false};
    for (int offset = 16; offset > 0; offset /= 2) mine = better_first_max(mine, shuffle_first_max(mine, offset));
  }
  return mine;
}

}  // namespace surogate::cuda::kernels
