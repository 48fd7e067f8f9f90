// Kernels of low_rank_products.h.
//
// Both products read their operands straight from global memory into mma.sync fragments, 16 or
// 8 bytes a thread: lane (g, t) loads elements 8t..8t+7 of a 32-wide slice of K (4t..4t+3 of a
// 16-wide one) of its rows and uses them as the fragment's k = {2t, 2t+1, 2t+8, 2t+9} (and the
// next k-step's). The A and B operands of a product are permuted alike, so each output is the same
// sum of the same terms, only in another order (fp32 either way).
#include "cuda/kernels/low_rank_products.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

#include "cuda/cublaslt_plan.h"
#include "cuda/kernels/attention_tiles.cuh"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/programmatic_launch.cuh"

namespace surogate::cuda {
namespace {

using attention::mma_16816;

constexpr int kDownWarps = 8;       // kernel 1: warps over one 16-row tile
constexpr int kSlicesPerWarp = 2;   // 32-wide slices of K a warp takes, all loads issued before the products
constexpr int64_t kBlockK = 32 * kSlicesPerWarp * kDownWarps;  // elements of K a block sums (512)
constexpr int kMaxSteps = 4;        // kernel 2: k-steps of 16 (rank ≤ 64)
constexpr int kUpRows = 64, kUpColumns = 64, kUpWarps = kUpRows / 16;

int64_t k_blocks(int64_t in) { return (in + kBlockK - 1) / kBlockK; }
size_t partial_bytes(int64_t rows, int64_t total_rank, int64_t in) {
  return static_cast<size_t>(k_blocks(in) * rows * total_rank) * sizeof(float);
}

template <typename T>
struct DownParams {
  const T* tile_rows[kLowRankMaxTotalRank / 8];  // row 8j of [A_1; A_2; ...]: the adapter's A at that row
  int total_rank = 0;
  int k_blocks = 0;
  int64_t rows = 0, in = 0;
  const T* x = nullptr;
  float* partial = nullptr;  // [k blocks, rows, Σ r_i]
  T* u = nullptr;            // [rows, Σ r_i]
  int* counters = nullptr;   // one per 16-row tile, zero between launches
};

template <typename T>
struct UpParams {
  LowRankAdapter<T> adapters[kLowRankMaxAdapters];
  int64_t u_column[kLowRankMaxAdapters] = {};     // where adapter i's r_i columns of u start
  int chunk_start[kLowRankMaxAdapters + 1] = {};  // adapter i's 64-column chunks: blockIdx.y in [start_i, start_{i+1})
  int count = 0;
  int total_rank = 0;
  int64_t rows = 0;
  float scale = 1.0f;
  const T* u = nullptr;
};

// Block (row tile, k block): the 16 rows' sums x · [A_1; ...]ᵀ over 512 columns of K into
// partial[k block]; warp w takes two 32-wide slices of them and issues every load of both before
// its products. The row tile's last block to finish (a counter, its increment after a fence) adds
// the k blocks' sums in order into u = T(...) and sets the counter back to zero.
template <typename T, int kTiles>
__global__ void __launch_bounds__(kDownWarps * 32) low_rank_down_kernel(const DownParams<T> p) {
  wait_for_previous_grid();
  allow_next_grid();
  constexpr int kRank = 8 * kTiles;
  __shared__ float sums[kDownWarps][16][kRank];
  __shared__ bool last;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * 16;
  const bool low_valid = row0 + g < p.rows, high_valid = row0 + g + 8 < p.rows;
  const T* x_low = p.x + (row0 + g) * p.in + 8 * t;
  const T* x_high = x_low + 8 * p.in;
  const int64_t first_k = static_cast<int64_t>(blockIdx.y) * kBlockK + warp * (32 * kSlicesPerWarp);
  uint4 low[kSlicesPerWarp], high[kSlicesPerWarp], w[kSlicesPerWarp][kTiles];
#pragma unroll
  for (int slice = 0; slice < kSlicesPerWarp; ++slice) {
    const int64_t k = first_k + 32 * slice;
    const bool inside = k < p.in;
    low[slice] = inside && low_valid ? *reinterpret_cast<const uint4*>(x_low + k) : make_uint4(0, 0, 0, 0);
    high[slice] = inside && high_valid ? *reinterpret_cast<const uint4*>(x_high + k) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      w[slice][j] = inside ? *reinterpret_cast<const uint4*>(p.tile_rows[j] + g * p.in + k + 8 * t) : make_uint4(0, 0, 0, 0);
    }
  }
  float acc[kTiles][4] = {};
#pragma unroll
  for (int slice = 0; slice < kSlicesPerWarp; ++slice) {
    const uint32_t first[4] = {low[slice].x, high[slice].x, low[slice].y, high[slice].y};
    const uint32_t second[4] = {low[slice].z, high[slice].z, low[slice].w, high[slice].w};
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      mma_16816<T>(acc[j], first, w[slice][j].x, w[slice][j].y);
      mma_16816<T>(acc[j], second, w[slice][j].z, w[slice][j].w);
    }
  }
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    sums[warp][g][8 * j + 2 * t] = acc[j][0];
    sums[warp][g][8 * j + 2 * t + 1] = acc[j][1];
    sums[warp][g + 8][8 * j + 2 * t] = acc[j][2];
    sums[warp][g + 8][8 * j + 2 * t + 1] = acc[j][3];
  }
  __syncthreads();
  const int64_t slab = p.rows * kRank;
  float* partial = p.partial + row0 * kRank;
  for (int e = static_cast<int>(threadIdx.x); e < 16 * kRank; e += kDownWarps * 32) {
    const int row = e / kRank, column = e % kRank;
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kDownWarps; ++v) sum += sums[v][row][column];  // fixed order
    if (row0 + row < p.rows) partial[blockIdx.y * slab + row * kRank + column] = sum;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(p.counters + blockIdx.x, 1) == p.k_blocks - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int e = static_cast<int>(threadIdx.x); e < 16 * kRank; e += kDownWarps * 32) {
    const int row = e / kRank, column = e % kRank;
    if (row0 + row >= p.rows) continue;
    float sum = 0.0f;
    for (int block = 0; block < p.k_blocks; ++block) sum += __ldcg(partial + block * slab + row * kRank + column);  // in order
    p.u[(row0 + row) * kRank + column] = kernels::from_float<T>(sum);
  }
  if (threadIdx.x == 0) p.counters[blockIdx.x] = 0;
}

// out_i [64 rows, 64 columns a block] = T(scale · u_i · B_iᵀ); warp w takes rows 16w..16w+15 and
// issues the B loads of all its 8 column tiles at once. kSteps = r_i / 16.
template <typename T, int kSteps>
__global__ void __launch_bounds__(kUpWarps * 32) low_rank_up_kernel(const UpParams<T> p) {
  wait_for_previous_grid();
  allow_next_grid();
  constexpr int kRank = 16 * kSteps;
  int adapter = 0;
  while (adapter + 1 < p.count && static_cast<int>(blockIdx.y) >= p.chunk_start[adapter + 1]) ++adapter;
  const T* b = p.adapters[adapter].b;
  T* out = p.adapters[adapter].out;
  const int64_t width = p.adapters[adapter].width;
  const int64_t column0 = static_cast<int64_t>(static_cast<int>(blockIdx.y) - p.chunk_start[adapter]) * kUpColumns;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t low_row = static_cast<int64_t>(blockIdx.x) * kUpRows + warp * 16 + g, high_row = low_row + 8;
  const bool low_valid = low_row < p.rows, high_valid = high_row < p.rows;
  const T* u = p.u + p.u_column[adapter] + 4 * t;
  uint32_t a[kSteps][4];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const uint2 low = low_valid ? *reinterpret_cast<const uint2*>(u + low_row * p.total_rank + 16 * s) : make_uint2(0, 0);
    const uint2 high = high_valid ? *reinterpret_cast<const uint2*>(u + high_row * p.total_rank + 16 * s) : make_uint2(0, 0);
    a[s][0] = low.x;
    a[s][1] = high.x;
    a[s][2] = low.y;
    a[s][3] = high.y;
  }
  constexpr int kTiles = kUpColumns / 8;
  const int tiles = static_cast<int>(min(static_cast<int64_t>(kUpColumns), width - column0) / 8);
  uint2 w[kTiles][kSteps];
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      w[tile][s] = tile < tiles ? *reinterpret_cast<const uint2*>(b + (column0 + 8 * tile + g) * kRank + 16 * s + 4 * t)
                                : make_uint2(0, 0);
    }
  }
  // The warp's 16 × 64 outputs go through shared memory, then out as whole 16-byte vectors (four
  // 128-byte rows a store instruction) rather than 4 bytes a lane.
  constexpr int kStride = kUpColumns + 8;
  __shared__ T staged[kUpWarps][16 * kStride];
  T* tile_out = staged[warp];
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
    float acc[4] = {};
#pragma unroll
    for (int s = 0; s < kSteps; ++s) mma_16816<T>(acc, a[s], w[tile][s].x, w[tile][s].y);
    kernels::store_pair(tile_out + g * kStride + 8 * tile + 2 * t, p.scale * acc[0], p.scale * acc[1]);
    kernels::store_pair(tile_out + (g + 8) * kStride + 8 * tile + 2 * t, p.scale * acc[2], p.scale * acc[3]);
  }
  __syncwarp();
  const int64_t warp_row = static_cast<int64_t>(blockIdx.x) * kUpRows + warp * 16;
#pragma unroll
  for (int i = 0; i < 16 * kTiles / 32; ++i) {
    const int vector = lane + 32 * i, row = vector / kTiles, column = 8 * (vector % kTiles);
    if (warp_row + row < p.rows && column < 8 * tiles) {
      *reinterpret_cast<uint4*>(out + (warp_row + row) * width + column0 + column) =
          *reinterpret_cast<const uint4*>(tile_out + row * kStride + column);
    }
  }
}

bool aligned_to(const void* pointer, uint32_t bytes) { return pointer_alignment(pointer) >= bytes; }

}  // namespace

size_t low_rank_products_scratch_bytes(int64_t rows, int64_t total_rank, int64_t in) {
  return partial_bytes(rows, total_rank, in) + (static_cast<size_t>(rows * total_rank) * 2 + 15) / 16 * 16;
}

int64_t low_rank_products_counters(int64_t rows) { return (rows + 15) / 16; }

bool low_rank_products_supported(int64_t rows, int64_t in, const int64_t* ranks, const int64_t* widths, int count) {
  if (rows > kLowRankMaxRows || count < 1 || count > kLowRankMaxAdapters || in <= 0 || in % 32 != 0) return false;
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    if (ranks[i] <= 0 || ranks[i] % 16 != 0 || ranks[i] > 16 * kMaxSteps || widths[i] <= 0 || widths[i] % 8 != 0) {
      return false;
    }
    total += ranks[i];
  }
  return total <= kLowRankMaxTotalRank;
}

template <typename T>
bool low_rank_products_aligned(const LowRankAdapter<T>* adapters, int count, const T* x, const void* scratch) {
  if (!aligned_to(x, 16) || !aligned_to(scratch, 16)) return false;
  for (int i = 0; i < count; ++i) {
    if (!aligned_to(adapters[i].a, 16) || !aligned_to(adapters[i].b, 8) || !aligned_to(adapters[i].out, 16)) return false;
  }
  return true;
}

template <typename T>
void low_rank_products(const LowRankAdapter<T>* adapters, int count, const T* x, const LowRankShape& shape,
                       void* scratch, int* counters, cudaStream_t stream) {
  if (shape.rows == 0) return;
  DownParams<T> down;
  UpParams<T> up;
  down.rows = up.rows = shape.rows;
  down.in = shape.in;
  down.x = x;
  down.k_blocks = static_cast<int>(k_blocks(shape.in));
  int64_t total = 0;
  for (int i = 0; i < count; ++i) total += adapters[i].rank;
  down.partial = static_cast<float*>(scratch);
  down.u = reinterpret_cast<T*>(static_cast<std::byte*>(scratch) + partial_bytes(shape.rows, total, shape.in));
  down.counters = counters;
  up.u = down.u;
  up.count = count;
  up.scale = shape.scale;
  int tiles = 0;
  int64_t column = 0;
  int chunks = 0;
  for (int i = 0; i < count; ++i) {
    for (int64_t row = 0; row < adapters[i].rank; row += 8) down.tile_rows[tiles++] = adapters[i].a + row * shape.in;
    up.adapters[i] = adapters[i];
    up.u_column[i] = column;
    up.chunk_start[i] = chunks;
    column += adapters[i].rank;
    chunks += static_cast<int>((adapters[i].width + kUpColumns - 1) / kUpColumns);
  }
  up.chunk_start[count] = chunks;
  down.total_rank = up.total_rank = static_cast<int>(column);
  const auto row_blocks = [&](int64_t rows_a_block) { return static_cast<unsigned>((shape.rows + rows_a_block - 1) / rows_a_block); };
  const dim3 down_grid(row_blocks(16), static_cast<unsigned>(down.k_blocks)), down_block(kDownWarps * 32);
  switch (tiles) {
    case 2: launch_programmatic(low_rank_down_kernel<T, 2>, down_grid, down_block, 0, stream, true, down); break;
    case 4: launch_programmatic(low_rank_down_kernel<T, 4>, down_grid, down_block, 0, stream, true, down); break;
    case 6: launch_programmatic(low_rank_down_kernel<T, 6>, down_grid, down_block, 0, stream, true, down); break;
    case 8: launch_programmatic(low_rank_down_kernel<T, 8>, down_grid, down_block, 0, stream, true, down); break;
    case 10: launch_programmatic(low_rank_down_kernel<T, 10>, down_grid, down_block, 0, stream, true, down); break;
    default: launch_programmatic(low_rank_down_kernel<T, 12>, down_grid, down_block, 0, stream, true, down); break;
  }
  // One rank for every adapter of a launch (each r_i picks the kernel's unrolling): adapters of
  // different ranks get a launch each, over the same u.
  const dim3 up_block(kUpWarps * 32);
  for (int i = 0; i < count;) {
    int next = i + 1;
    while (next < count && adapters[next].rank == adapters[i].rank) ++next;
    UpParams<T> part = up;
    part.count = next - i;
    for (int j = i; j < next; ++j) {
      part.adapters[j - i] = up.adapters[j];
      part.u_column[j - i] = up.u_column[j];
      part.chunk_start[j - i] = up.chunk_start[j] - up.chunk_start[i];
    }
    part.chunk_start[next - i] = up.chunk_start[next] - up.chunk_start[i];
    const dim3 grid(row_blocks(kUpRows), static_cast<unsigned>(part.chunk_start[next - i]));
    switch (adapters[i].rank / 16) {
      case 1: launch_programmatic(low_rank_up_kernel<T, 1>, grid, up_block, 0, stream, true, part); break;
      case 2: launch_programmatic(low_rank_up_kernel<T, 2>, grid, up_block, 0, stream, true, part); break;
      case 3: launch_programmatic(low_rank_up_kernel<T, 3>, grid, up_block, 0, stream, true, part); break;
      default: launch_programmatic(low_rank_up_kernel<T, 4>, grid, up_block, 0, stream, true, part); break;
    }
    i = next;
  }
}

#define SUROGATE_INSTANTIATE_LOW_RANK(T)                                                                          \
  template bool low_rank_products_aligned<T>(const LowRankAdapter<T>*, int, const T*, const void*);               \
  template void low_rank_products<T>(const LowRankAdapter<T>*, int, const T*, const LowRankShape&, void*, int*, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(SUROGATE_INSTANTIATE_LOW_RANK)
#undef SUROGATE_INSTANTIATE_LOW_RANK

}  // namespace surogate::cuda
