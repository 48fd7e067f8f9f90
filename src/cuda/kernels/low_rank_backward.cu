// Fused backward of a rank-r product (see low_rank_backward.h). Fragment layouts and the
// ldmatrix / mma helpers are attention_tiles.cuh's (g = lane / 4, t = lane % 4).
//
// Per 128-token × 128-column tile of d_out (dy) in shared memory, with 8 warps:
//   d_x partial:  warp w takes tokens 16w..16w+15: A = dy rows (ldmatrix), B = W rows of the tile's
//                 columns ([k = column][n = r], ldmatrix.trans), K = the tile's 128 columns;
//   d_Wᵀ partial: warp w takes columns 16w..16w+15: A = xᵀ (m = r, k = token; built from x in
//                 shared memory with scalar loads), B = dy ([k = token][n = column], ldmatrix.trans),
//                 K = the tile's 128 tokens.
// A block walks 2 token tiles × `column_tiles` column tiles (dy double-buffered with cp.async),
// keeping the d_x sums of both token tiles and the d_Wᵀ sums of every column tile in registers,
// then writes them as fp32 partials: d_x [column block][T][r], d_Wᵀ [token block][r][N].
#include "cuda/kernels/low_rank_backward.h"

#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/attention_tiles.cuh"

namespace surogate::cuda {
namespace {

using attention::copy_async_16;
using attention::copy_async_commit;
using attention::copy_async_wait;
using attention::ldmatrix_x4;
using attention::ldmatrix_x4_trans;
using attention::mma_16816;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTile = 128;                  // tokens and columns of one dy tile
constexpr int kPad = 8;                     // bf16 per shared row: 16 bytes, conflict-free ldmatrix
constexpr int kTileStride = kTile + kPad;

template <int kRank, int kColumnTiles, int kTokenTiles, int kStages>
constexpr size_t shared_bytes() {
  return sizeof(uint16_t) * (size_t{kStages} * kTile * kTileStride + size_t{kTokenTiles} * kTile * (kRank + kPad) +
                                  size_t{kColumnTiles} * kTile * (kRank + kPad));
}

// Copies `rows` rows of `width` bf16 (global row stride `stride`) into shared rows of
// `shared_stride`; rows at or past `valid_rows` and columns at or past `valid_columns` are zeros.
template <typename T>
__device__ __forceinline__ void load_rows_async(T* target, int shared_stride, const T* source,
                                                int64_t stride, int rows, int width, int64_t valid_rows,
                                                int64_t valid_columns) {
  const int vectors = width / 8;
  for (int chunk = threadIdx.x; chunk < rows * vectors; chunk += kThreads) {
    const int row = chunk / vectors, column = (chunk % vectors) * 8;
    const bool valid = row < valid_rows && column < valid_columns;
    copy_async_16(target + row * shared_stride + column, valid ? source + row * stride + column : source, valid);
  }
}

// A block owns kTokenTiles · 128 tokens × kColumnTiles · 128 columns and walks its dy tiles
// column-fastest through a ring of kStages shared buffers (cp.async, kStages − 1 tiles in flight,
// one barrier per tile). The tile counts are template parameters so that the step loop unrolls
// and every sum stays in registers (a runtime tile index would put them in local memory).
template <int kRank, int kColumnTiles, int kTokenTiles, int kStages, typename T>
__global__ void __launch_bounds__(kThreads)
    low_rank_partials_kernel(float* dx_partials, float* dw_partials, const T* dy, const T* x,
                             const T* weight, int64_t tokens, int64_t columns) {
  constexpr int kRankStride = kRank + kPad;
  constexpr int kRankTiles = kRank / 8;      // n-tiles of the d_x product
  constexpr int kRankBlocks = kRank / 16;    // m-tiles of the d_Wᵀ product
  constexpr int kSteps = kTokenTiles * kColumnTiles;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  T* stages = reinterpret_cast<T*>(shared_raw);      // kStages × [kTile][kTileStride]
  T* x_tile = stages + kStages * kTile * kTileStride;            // [kTokenTiles · kTile][kRankStride]
  T* w_tile = x_tile + kTokenTiles * kTile * kRankStride;        // [kColumnTiles · kTile][kRankStride]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t first_token = int64_t{blockIdx.y} * kTokenTiles * kTile;
  const int64_t first_column = int64_t{blockIdx.x} * kColumnTiles * kTile;

  load_rows_async(x_tile, kRankStride, x + first_token * kRank, kRank, kTokenTiles * kTile, kRank,
                  tokens - first_token, kRank);
  load_rows_async(w_tile, kRankStride, weight + first_column * kRank, kRank, kColumnTiles * kTile, kRank,
                  columns - first_column, kRank);
  // Every step commits one group (empty past the last tile), so "all but the newest kStages − 2
  // groups are complete" always means "this step's tile (and x, W, in the first group) landed".
  auto load_step = [&](int step) {
    if (step < kSteps) {
      const int token_tile = step / kColumnTiles, column_tile = step % kColumnTiles;
      const int64_t row0 = first_token + token_tile * kTile, column0 = first_column + column_tile * kTile;
      load_rows_async(stages + (step % kStages) * kTile * kTileStride, kTileStride, dy + row0 * columns + column0,
                      columns, kTile, kTile, tokens - row0, columns - column0);
    }
    copy_async_commit();
  };
#pragma unroll
  for (int step = 0; step < kStages - 1; ++step) load_step(step);

  float dx_sums[kTokenTiles][kRankTiles][4] = {};
  float dw_sums[kColumnTiles][kRankBlocks][2][4] = {};
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    copy_async_wait<kStages - 2>();
    __syncthreads();  // this step's tile is complete; every warp is done with step − 1's buffer
    load_step(step + kStages - 1);  // into step − 1's buffer
    const T* tile = stages + (step % kStages) * kTile * kTileStride;
    const int token_tile = step / kColumnTiles, column_tile = step % kColumnTiles;

#pragma unroll
    for (int k = 0; k < kTile / 16; ++k) {
      // d_x += dy[16 tokens of this warp, 16 columns] · W[those columns, r]
      uint32_t a[4];
      ldmatrix_x4(a, tile + (warp * 16 + (lane & 15)) * kTileStride + k * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int j = 0; j < kRank / 16; ++j) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, w_tile + (column_tile * kTile + k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kRankStride +
                                 j * 16 + (lane >> 4) * 8);
        mma_16816<T>(dx_sums[token_tile][2 * j], a, b[0], b[1]);
        mma_16816<T>(dx_sums[token_tile][2 * j + 1], a, b[2], b[3]);
      }
      // d_Wᵀ += xᵀ[r, 16 tokens] · dy[those tokens, 16 columns of this warp]
      uint32_t b[4];
      ldmatrix_x4_trans(b, tile + (k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kTileStride + warp * 16 +
                               (lane >> 4) * 8);
#pragma unroll
      for (int m = 0; m < kRankBlocks; ++m) {
        // A = xᵀ (m = r, k = token) from x [token][r] with ldmatrix.trans: matrix j of lane l
        // is tokens (j / 2) · 8 + l % 8, r columns (j % 2) · 8 of the block m.
        uint32_t xa[4];
        ldmatrix_x4_trans(xa, x_tile + (token_tile * kTile + k * 16 + (lane & 7) + (lane >> 4) * 8) * kRankStride +
                                  m * 16 + ((lane >> 3) & 1) * 8);
        mma_16816<T>(dw_sums[column_tile][m][0], xa, b[0], b[1]);
        mma_16816<T>(dw_sums[column_tile][m][1], xa, b[2], b[3]);
      }
    }
  }

  // d_x partials [column block][T][r]: c0, c1 = (token g, r 2t..2t+1), c2, c3 = token g + 8.
#pragma unroll
  for (int token_tile = 0; token_tile < kTokenTiles; ++token_tile) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t token = first_token + token_tile * kTile + warp * 16 + g + 8 * half;
      if (token >= tokens) continue;
      float* row = dx_partials + (int64_t{blockIdx.x} * tokens + token) * kRank;
#pragma unroll
      for (int n = 0; n < kRankTiles; ++n) {
        *reinterpret_cast<float2*>(row + n * 8 + 2 * t) =
            make_float2(dx_sums[token_tile][n][2 * half], dx_sums[token_tile][n][2 * half + 1]);
      }
    }
  }
  // d_Wᵀ partials [token block][r][N]: c0, c1 = (r g, columns 2t..2t+1), c2, c3 = r g + 8.
#pragma unroll
  for (int column_tile = 0; column_tile < kColumnTiles; ++column_tile) {
#pragma unroll
    for (int m = 0; m < kRankBlocks; ++m) {
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int64_t column = first_column + column_tile * kTile + warp * 16 + n * 8 + 2 * t;
        if (column >= columns) continue;  // columns is a multiple of 8: column + 1 is in too
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = m * 16 + g + 8 * half;
          *reinterpret_cast<float2*>(dw_partials + (int64_t{blockIdx.y} * kRank + r) * columns + column) =
              make_float2(dw_sums[column_tile][m][n][2 * half], dw_sums[column_tile][m][n][2 * half + 1]);
        }
      }
    }
  }
}

// Sums the partials in block order, scales, rounds once: d_x first (T·r elements), then d_W
// (N·r, indexed r-major so the partial reads are coalesced).
template <typename T>
__global__ void low_rank_reduce_kernel(T* d_x, T* d_weight, const float* dx_partials,
                                       const float* dw_partials, int64_t tokens, int64_t columns, int rank,
                                       int column_blocks, int token_blocks, float scale, bool accumulate) {
  const int64_t dx_count = tokens * rank, total = dx_count + columns * rank;
  for (int64_t index = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; index < total;
       index += int64_t{gridDim.x} * blockDim.x) {
    float sum = 0.0f;
    if (index < dx_count) {
      for (int block = 0; block < column_blocks; ++block) sum += dx_partials[block * dx_count + index];
      d_x[index] = kernels::from_float<T>(scale * sum);
    } else {
      const int64_t element = index - dx_count;  // r-major: element = r · N + column
      const int64_t r = element / columns, column = element % columns;
      for (int block = 0; block < token_blocks; ++block) sum += dw_partials[(block * int64_t{rank} + r) * columns + column];
      T* target = d_weight + column * rank + r;
      const float product = scale * sum;
      *target = kernels::from_float<T>(accumulate ? product + kernels::to_float(*target) : product);
    }
  }
}

int sm_count() {
  static const int count = [] {
    int device = 0, value = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device));
    return value;
  }();
  return count;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The tiling the launcher takes when the shape names none: 3 stages and the first of these that
// still gives ~one block per SM (measured on H100 at 4096 tokens, docs/cuda.md): 2 column × 4 token
// tiles (N ≥ 4096: 10% faster than 2 token tiles), then 4 × 2, 2 × 2, 1 × 2.
LowRankTiling tiling_for(const LowRankBackwardShape& shape) {
  if (shape.tiling.column_tiles != 0) return shape.tiling;
  constexpr LowRankTiling kCandidates[] = {{2, 4, 3}, {4, 2, 3}, {2, 2, 3}};
  for (const LowRankTiling& tiling : kCandidates) {
    const int64_t blocks = ceil_div(shape.columns, int64_t{tiling.column_tiles} * kTile) *
                           ceil_div(shape.tokens, int64_t{tiling.token_tiles} * kTile);
    if (blocks * 10 >= sm_count() * 9) return tiling;
  }
  return {1, 2, 3};
}

bool valid_tiling(const LowRankTiling& tiling) {
  const bool columns = tiling.column_tiles == 1 || tiling.column_tiles == 2 || tiling.column_tiles == 4;
  const bool tokens = tiling.token_tiles == 1 || tiling.token_tiles == 2 || tiling.token_tiles == 4;
  return columns && tokens && (tiling.stages == 2 || tiling.stages == 3 || tiling.stages == 4);
}

// Everything one launch of the partials kernel takes but its template parameters.
template <typename T>
struct PartialsLaunch {
  float* dx_partials;
  float* dw_partials;
  const T* d_out;
  const T* x;
  const T* weight;
  int64_t tokens, columns;
  dim3 grid;
  cudaStream_t stream;
};

template <int kRank, int kColumnTiles, int kTokenTiles, int kStages, typename T>
void launch_partials(const PartialsLaunch<T>& l) {
  constexpr size_t kShared = shared_bytes<kRank, kColumnTiles, kTokenTiles, kStages>();
  auto kernel = low_rank_partials_kernel<kRank, kColumnTiles, kTokenTiles, kStages, T>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kShared)));
  kernel<<<l.grid, kThreads, kShared, l.stream>>>(l.dx_partials, l.dw_partials, l.d_out, l.x, l.weight, l.tokens,
                                                 l.columns);
  CUDA_CHECK_LAUNCH();
}

// The runtime tiling to the template parameters: column tiles, then token tiles, then stages.
template <int kRank, int kColumnTiles, int kTokenTiles, typename T>
void launch_with_stages(const LowRankTiling& tiling, const PartialsLaunch<T>& l) {
  switch (tiling.stages) {
    case 4: launch_partials<kRank, kColumnTiles, kTokenTiles, 4>(l); break;
    case 3: launch_partials<kRank, kColumnTiles, kTokenTiles, 3>(l); break;
    default: launch_partials<kRank, kColumnTiles, kTokenTiles, 2>(l); break;
  }
}

template <int kRank, int kColumnTiles, typename T>
void launch_with_token_tiles(const LowRankTiling& tiling, const PartialsLaunch<T>& l) {
  switch (tiling.token_tiles) {
    case 4: launch_with_stages<kRank, kColumnTiles, 4>(tiling, l); break;
    case 2: launch_with_stages<kRank, kColumnTiles, 2>(tiling, l); break;
    default: launch_with_stages<kRank, kColumnTiles, 1>(tiling, l); break;
  }
}

template <int kRank, typename T>
void launch(T* d_x, T* d_weight, float* workspace, const T* d_out,
            const T* x, const T* weight, const LowRankBackwardShape& shape, cudaStream_t stream) {
  const LowRankTiling tiling = tiling_for(shape);
  const int64_t column_blocks = ceil_div(shape.columns, int64_t{tiling.column_tiles} * kTile);
  const int64_t token_blocks = ceil_div(shape.tokens, int64_t{tiling.token_tiles} * kTile);
  CUDA_REQUIRE(column_blocks <= 65535 && token_blocks <= 65535, "low_rank_backward: too many tokens or columns");
  float* dx_partials = workspace;
  float* dw_partials = workspace + column_blocks * shape.tokens * kRank;
  const PartialsLaunch<T> partials{dx_partials, dw_partials, d_out, x, weight, shape.tokens, shape.columns,
                                dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(token_blocks)),
                                stream};
  switch (tiling.column_tiles) {
    case 4: launch_with_token_tiles<kRank, 4>(tiling, partials); break;
    case 2: launch_with_token_tiles<kRank, 2>(tiling, partials); break;
    default: launch_with_token_tiles<kRank, 1>(tiling, partials); break;
  }
  const int64_t total = (shape.tokens + shape.columns) * kRank;
  const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(total, 256), 4 * sm_count()));
  low_rank_reduce_kernel<T><<<blocks, 256, 0, stream>>>(d_x, d_weight, dx_partials, dw_partials, shape.tokens,
                                                     shape.columns, kRank, static_cast<int>(column_blocks),
                                                     static_cast<int>(token_blocks), shape.scale, shape.accumulate);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool low_rank_backward_supported(const LowRankBackwardShape& shape, const void* d_out, const void* x,
                                 const void* weight) {
  auto aligned = [](const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; };
  const bool tiling = shape.tiling.column_tiles == 0 || valid_tiling(shape.tiling);
  return (shape.rank == 16 || shape.rank == 32) && shape.columns > 0 && shape.columns % 8 == 0 && shape.tokens > 0 &&
         tiling && aligned(d_out) && aligned(x) && aligned(weight);
}

int64_t low_rank_backward_workspace_floats(const LowRankBackwardShape& shape) {
  // The launcher's choice depends on the GPU's SM count: size for the most partials any of its
  // candidates writes (1 column tile and 2 token tiles per block), so that this needs no device.
  LowRankTiling tiling = shape.tiling;
  if (tiling.column_tiles == 0) tiling = LowRankTiling{.column_tiles = 1, .token_tiles = 2, .stages = 3};
  return (ceil_div(shape.columns, int64_t{tiling.column_tiles} * kTile) * shape.tokens +
          ceil_div(shape.tokens, int64_t{tiling.token_tiles} * kTile) * shape.columns) *
         shape.rank;
}

template <typename T>
void low_rank_backward(T* d_x, T* d_weight, float* workspace, const T* d_out,
                       const T* x, const T* weight, const LowRankBackwardShape& shape,
                       cudaStream_t stream) {
  CUDA_REQUIRE(low_rank_backward_supported(shape, d_out, x, weight),
               "low_rank_backward: rank 16 or 32, columns a multiple of 8 and 16-byte aligned operands");
  if (shape.rank == 16) {
    launch<16, T>(d_x, d_weight, workspace, d_out, x, weight, shape, stream);
  } else {
    launch<32, T>(d_x, d_weight, workspace, d_out, x, weight, shape, stream);
  }
}

#define INSTANTIATE(T)                                                                                    \
  template void low_rank_backward(T*, T*, float*, const T*, const T*, const T*, const LowRankBackwardShape&, \
                                  cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
