// The greedy choice of greedy_tokens.h: each thread scans a strided slice of its row (ascending,
// so its candidate is its slice's first maximum), then the block reduces (value, index) pairs —
// larger value first, equal values the lower index — and ORs the NaN / +inf flag.
#include "cuda/kernels/greedy_tokens.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda {
namespace {

using kernels::to_float;

constexpr int kGreedyThreads = 512;
constexpr int kGreedyWarps = kGreedyThreads / 32;

struct Candidate {
  float value;
  int64_t index;
  bool unusable;
};

__device__ __forceinline__ Candidate better(Candidate a, Candidate b) {
  const bool take_b = b.value > a.value || (b.value == a.value && b.index < a.index);
  Candidate out = take_b ? b : a;
  out.unusable = a.unusable || b.unusable;
  return out;
}

__device__ __forceinline__ Candidate shuffle_down(Candidate c, int offset) {
  return {__shfl_down_sync(0xffffffffu, c.value, offset), __shfl_down_sync(0xffffffffu, c.index, offset),
          __shfl_down_sync(0xffffffffu, static_cast<int>(c.unusable), offset) != 0};
}

template <typename E>
__global__ void __launch_bounds__(kGreedyThreads) greedy_tokens_kernel(int32_t* tokens, const E* logits, int64_t vocab) {
  __shared__ Candidate warp_best[kGreedyWarps];
  const E* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  // Index `vocab` is no element: any real one beats it on an equal value, so a row of -inf gives 0.
  Candidate mine{-INFINITY, vocab, false};
  for (int64_t i = threadIdx.x; i < vocab; i += kGreedyThreads) {
    const float x = to_float(row[i]);
    mine.unusable |= !(x < INFINITY);  // exactly NaN and +inf
    if (x > mine.value || (x == mine.value && mine.index == vocab)) {
      mine.value = x;
      mine.index = i;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) mine = better(mine, shuffle_down(mine, offset));
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = mine;
  __syncthreads();
  if (threadIdx.x >= 32) return;
  mine = threadIdx.x < kGreedyWarps ? warp_best[threadIdx.x] : Candidate{-INFINITY, vocab, false};
  for (int offset = 16; offset > 0; offset /= 2) mine = better(mine, shuffle_down(mine, offset));
  if (threadIdx.x == 0) tokens[blockIdx.x] = mine.unusable ? -1 : static_cast<int32_t>(mine.index);
}

}  // namespace

template <typename E>
void greedy_tokens(int32_t* tokens, const E* logits, int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows <= 0) return;
  greedy_tokens_kernel<E><<<static_cast<unsigned>(rows), kGreedyThreads, 0, stream>>>(tokens, logits, vocab);
  CUDA_CHECK_LAUNCH();
}

template void greedy_tokens(int32_t*, const float*, int64_t, int64_t, cudaStream_t);
template void greedy_tokens(int32_t*, const __nv_bfloat16*, int64_t, int64_t, cudaStream_t);
template void greedy_tokens(int32_t*, const __half*, int64_t, int64_t, cudaStream_t);

}  // namespace surogate::cuda
