// The greedy choice of greedy_tokens.h: each thread scans a strided slice of its row (ascending,
// so its candidate is its slice's first maximum), then the block reduces (value, index) pairs —
// larger value first, equal values the lower index — and ORs the NaN / +inf flag. On sm_90 and
// later a row is split over a cluster of kGreedyClusterBlocks blocks (one SM could read a 151936
// logit row at about a tenth of the GPU's bandwidth: 41 µs on an H200); block 0 of the cluster
// reduces the blocks' candidates in rank order through distributed shared memory (no workspace, one
// launch, the same result whatever the timing). Older GPUs keep one block per row.
#include "cuda/kernels/greedy_tokens.h"

#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include "cuda/cuda_check.h"
#include "cuda/device_attributes.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/first_max.cuh"

namespace surogate::cuda {
namespace {

using kernels::to_float;

constexpr int kGreedyThreads = 512;
constexpr int kGreedyWarps = kGreedyThreads / 32;
constexpr int kGreedyClusterBlocks = 8;
constexpr int kGreedyUnroll = 4;  // loads in flight per thread

using Candidate = kernels::FirstMax;
using kernels::better_first_max;
using kernels::shuffle_first_max;

// The first maximum of row[begin, end) in the block: thread 0's return value (the others' is partial).
template <typename E>
__device__ Candidate block_candidate(const E* row, int64_t begin, int64_t end, int64_t vocab) {
  __shared__ Candidate warp_best[kGreedyWarps];
  // Index `vocab` is no element: any real one beats it on an equal value, so a row of -inf gives 0.
  Candidate mine{-INFINITY, vocab, false};
  for (int64_t start = begin + threadIdx.x; start < end; start += kGreedyThreads * kGreedyUnroll) {
    float values[kGreedyUnroll];
#pragma unroll
    for (int u = 0; u < kGreedyUnroll; ++u) {
      const int64_t i = start + static_cast<int64_t>(kGreedyThreads) * u;
      values[u] = i < end ? to_float(row[i]) : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kGreedyUnroll; ++u) {
      const int64_t i = start + static_cast<int64_t>(kGreedyThreads) * u;
      if (i >= end) break;
      const float x = values[u];
      mine.unusable |= !(x < INFINITY);  // exactly NaN and +inf
      if (x > mine.value || (x == mine.value && mine.index == vocab)) {
        mine.value = x;
        mine.index = i;
      }
    }
  }
  return kernels::block_first_max<kGreedyWarps>(mine, warp_best, vocab);
}

template <typename E>
__global__ void __launch_bounds__(kGreedyThreads) greedy_tokens_kernel(int32_t* tokens, const E* logits, int64_t vocab) {
  const Candidate best = block_candidate(logits + static_cast<int64_t>(blockIdx.x) * vocab, 0, vocab, vocab);
  if (threadIdx.x == 0) tokens[blockIdx.x] = best.unusable ? -1 : static_cast<int32_t>(best.index);
}

// Grid (kGreedyClusterBlocks, rows), clusters of kGreedyClusterBlocks along x: block b of a cluster
// scans the b-th slice of row blockIdx.y.
template <typename E>
__global__ void __launch_bounds__(kGreedyThreads)
    greedy_tokens_cluster_kernel(int32_t* tokens, const E* logits, int64_t vocab) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ Candidate cluster_best;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t rank = cluster.block_rank();
  const int64_t begin = vocab * rank / kGreedyClusterBlocks, end = vocab * (rank + 1) / kGreedyClusterBlocks;
  const Candidate best = block_candidate(logits + static_cast<int64_t>(blockIdx.y) * vocab, begin, end, vocab);
  if (threadIdx.x == 0) cluster_best = best;
  cluster.sync();  // every block's candidate written
  if (rank == 0 && threadIdx.x < 32) {
    Candidate mine = threadIdx.x < kGreedyClusterBlocks
                         ? *cluster.map_shared_rank(&cluster_best, static_cast<unsigned>(threadIdx.x))
                         : Candidate{-INFINITY, vocab, false};
    for (int offset = 16; offset > 0; offset /= 2) mine = better_first_max(mine, shuffle_first_max(mine, offset));
    if (threadIdx.x == 0) tokens[blockIdx.y] = mine.unusable ? -1 : static_cast<int32_t>(mine.index);
  }
  cluster.sync();  // block 0 has read the others' shared memory before they exit
#else
  (void)tokens, (void)logits, (void)vocab;
#endif
}

// Clusters where the GPU has them (compute capability 9 and later) and the rows fit grid.y.
bool use_clusters(int64_t rows) {
  return current_compute_major() >= 9 && rows <= 65535;
}

template <typename E>
void launch_cluster(int32_t* tokens, const E* logits, int64_t rows, int64_t vocab, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kGreedyClusterBlocks, static_cast<unsigned>(rows), 1);
  config.blockDim = dim3(kGreedyThreads, 1, 1);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = kGreedyClusterBlocks;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, greedy_tokens_cluster_kernel<E>, tokens, logits, vocab));
}

}  // namespace

template <typename E>
void greedy_tokens(int32_t* tokens, const E* logits, int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows <= 0) return;
  if (use_clusters(rows)) launch_cluster(tokens, logits, rows, vocab, stream);
  else greedy_tokens_one_block(tokens, logits, rows, vocab, stream);
}

template <typename E>
void greedy_tokens_one_block(int32_t* tokens, const E* logits, int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows <= 0) return;
  greedy_tokens_kernel<E><<<static_cast<unsigned>(rows), kGreedyThreads, 0, stream>>>(tokens, logits, vocab);
  CUDA_CHECK_LAUNCH();
}

template void greedy_tokens(int32_t*, const float*, int64_t, int64_t, cudaStream_t);
template void greedy_tokens(int32_t*, const __nv_bfloat16*, int64_t, int64_t, cudaStream_t);
template void greedy_tokens(int32_t*, const __half*, int64_t, int64_t, cudaStream_t);

template void greedy_tokens_one_block(int32_t*, const float*, int64_t, int64_t, cudaStream_t);
template void greedy_tokens_one_block(int32_t*, const __nv_bfloat16*, int64_t, int64_t, cudaStream_t);
template void greedy_tokens_one_block(int32_t*, const __half*, int64_t, int64_t, cudaStream_t);

}  // namespace surogate::cuda
