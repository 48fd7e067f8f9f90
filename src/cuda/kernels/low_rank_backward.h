// Backward of a rank-r product out = scale · x · Wᵀ, x [T, r], W [N, r] (LoRA's B, r = 16 or 32),
// from ONE read of d_out [T, N] (cuBLASLt needs two skinny products, each reading d_out):
//   d_x [T, r] = scale · d_out · W                bf16, overwritten
//   d_W [N, r] = scale · d_outᵀ · x  (+ d_W)      bf16; added to what it holds when `accumulate`
// A block owns 128·j tokens × 128·k columns of d_out (LowRankTiling), streamed through a ring of
// shared-memory stages in 128 × 128 tiles with mma.sync (bf16 in, fp32 accumulate); it writes fp32
// partial sums of both products (d_x per column block, d_W per token block) to the workspace, and a
// second kernel sums them in a fixed order, scales and rounds once, so the result is
// deterministic. Needs r = 16 or 32, N a multiple of 8 and 16-byte aligned d_out, x and W
// (low_rank_backward_supported); callers take two matmuls otherwise.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

// Tiles of 128 columns and of 128 tokens per block (1, 2 or 4 each) and shared-memory stages of
// the dy pipeline (2, 3 or 4). All zero: the launcher's choice for the shape (measured on H100).
struct LowRankTiling {
  int column_tiles = 0;
  int token_tiles = 0;
  int stages = 0;
};

struct LowRankBackwardShape {
  int64_t tokens = 0;   // T
  int64_t columns = 0;  // N
  int rank = 0;         // r
  float scale = 1.0f;
  bool accumulate = false;  // d_W += instead of d_W =
  LowRankTiling tiling{};   // {} = the launcher's choice; cuda_measure compares others
};

bool low_rank_backward_supported(const LowRankBackwardShape& shape, const void* d_out, const void* x,
                                 const void* weight);

// fp32 workspace the kernel needs (the partial sums) for the shape and its tiling.
int64_t low_rank_backward_workspace_floats(const LowRankBackwardShape& shape);

template <typename T>
void low_rank_backward(T* d_x, T* d_weight, float* workspace, const T* d_out,
                       const T* x, const T* weight, const LowRankBackwardShape& shape,
                       cudaStream_t stream);

}  // namespace surogate::cuda
