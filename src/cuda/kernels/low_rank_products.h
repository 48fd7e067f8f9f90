// The low-rank adapters of one input in two launches, for forward-only graphs (generation and
// GRPO rollouts, where a LoRA adapter is applied unmerged at every decode step):
//   out_i [M, N_i] = T(scale · T(x [M, K] · A_iᵀ) · B_iᵀ),   A_i [r_i, K], B_i [N_i, r_i],
// for up to three adapters reading the same x (an attention layer's q, k and v; gate and up),
// each rounded as the unfused pair of products rounds it (linear, then linear with alpha = scale:
// the rank-r product in T first). Kernel 1 takes 16 rows of x and 512 columns of K a block and
// every adapter's A at once: 8 warps, each issuing all its loads (two 32-wide slices of K) before
// its mma.sync m16n8k16 products, their sums meeting in shared memory in a fixed order into fp32
// partial sums [K / 512, M, Σ r_i]; the last block of a row tile to finish (a counter per 16-row
// tile in `counters`, zero before and after a launch) adds them in order into u = T(x · [A_1; ..]ᵀ)
// [M, Σ r_i] — the same bits every run. Kernel 2 (one launch per distinct rank) writes 64 rows ×
// 64 columns of out_i a block from u and B_i (tensor cores again, K = r_i). Against cuBLASLt's
// concat / product / split / one product per B that the unfused graph runs (6 launches for q, k
// and v, about 5 µs each at 512 rows), bench/lora_products_bench.cpp times both.
// Both kernels wait for the previous grid before they read x or u and let the next launch begin
// at once (programmatic_launch.cuh), so they may always overlap the kernel before them.
// Requires (low_rank_products_supported): M ≤ kLowRankMaxRows, K a multiple of 32, every r_i a
// multiple of 16 up to 64, Σ r_i ≤ kLowRankMaxTotalRank, every N_i a multiple of 8; x, every A_i,
// every output and the scratch 16-byte aligned, every B_i 8-byte aligned
// (low_rank_products_aligned).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

inline constexpr int kLowRankMaxAdapters = 3;
inline constexpr int64_t kLowRankMaxTotalRank = 96;
// The most rows (M) the kernels take: at a prefill's thousands of rows cuBLASLt's products, which
// write through shared memory in large tiles, are the faster (bench/lora_products_bench.cpp: at
// 4,096 rows 0.3-0.6× of the chain's speed).
inline constexpr int64_t kLowRankMaxRows = 1024;

template <typename T>
struct LowRankAdapter {
  const T* a = nullptr;  // [rank, K]
  const T* b = nullptr;  // [width, rank]
  T* out = nullptr;      // [M, width]
  int64_t rank = 0;
  int64_t width = 0;
};

struct LowRankShape {
  int64_t rows = 0;  // M
  int64_t in = 0;    // K
  float scale = 1.0f;
};

// Bytes of `scratch` the launch needs: fp32 partial sums [ceil(K / 512), M, Σ r_i], then u.
size_t low_rank_products_scratch_bytes(int64_t rows, int64_t total_rank, int64_t in);

// Counters (int) the launch needs: one per 16-row tile, zeroed once before the first launch; the
// kernels leave them zero. Not shared between launches that may run at the same time.
int64_t low_rank_products_counters(int64_t rows);

// Whether the kernels take these shapes (the pointers are checked at launch by the caller with
// low_rank_products_aligned).
bool low_rank_products_supported(int64_t rows, int64_t in, const int64_t* ranks, const int64_t* widths, int count);

template <typename T>
bool low_rank_products_aligned(const LowRankAdapter<T>* adapters, int count, const T* x, const void* scratch);

template <typename T>
void low_rank_products(const LowRankAdapter<T>* adapters, int count, const T* x, const LowRankShape& shape,
                       void* scratch, int* counters, cudaStream_t stream);

}  // namespace surogate::cuda
