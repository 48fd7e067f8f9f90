// FP8 transposes: fp8_transpose and fp8_quantize_weight (declared in fp8_quantize.h).
//
// fp8_hybrid's weight gradients take both operands K-major with K = the micro-batch's tokens, so
// every trained projection transposes its input's and its output gradient's codes each micro-batch
// (runtime/cuda_fp8_ops.cpp): for Qwen3-1.7B full fine-tuning 9 transposes per layer, 134 MB read
// and as much written per 4,096 tokens. Three paths, the first that fits:
//   - kRows × 128-byte tiles (kRows 128 or 64; columns a multiple of 128, rows of kRows): every
//     thread issues its four 16-byte loads before it waits on any, the tile goes to shared memory
//     once (16-byte chunks XOR-swizzled by row group, so that both the stores and the transposing
//     reads see 32 distinct banks), and each thread then assembles 16 rows × 4 columns in
//     registers (__byte_perm) and writes 4 × 16 bytes: global memory sees whole 128-byte lines
//     both ways. On an H200 (bench/fp8_transpose_bench.cpp, between CUDA events) 4,096 × 6,144
//     codes take 15.8 µs, 3.2 TB/s, where a copy of the same bytes takes 14.9 µs and the
//     64 × 64-byte tiles (one load per thread, a second shared round trip) 2.8 TB/s;
//   - 64 × 64-byte tiles (both sizes multiples of 64);
//   - one byte per thread through a 32 × 32 tile (any shape).
// Unaligned pointers take the byte-per-thread kernel.
#include <cuda_fp8.h>

#include <cstdint>
#include <initializer_list>

#include "cuda/cuda_check.h"
#include "cuda/kernels/fp8_epilogue.cuh"
#include "cuda/kernels/fp8_quantize.h"

namespace surogate::cuda {
namespace {

using fp8::scale_for;

constexpr int kThreads = 256;

// ---- the general kernels: one byte per thread, 32 × 32 tiles ----

constexpr int kTile = 32;

__device__ __forceinline__ uint8_t weight_code(__nv_bfloat16 w, float scale) {
  return __nv_cvt_float_to_fp8(__fmul_rn(__bfloat162float(w), scale), __NV_SATFINITE, __NV_E4M3);
}

// The weight's codes and their transpose: codes are written row by row, the tile goes through
// shared memory and is written transposed. `w == nullptr`: a plain transpose of `in`.
__global__ void transpose_bytes(const __nv_bfloat16* w, const uint8_t* in, int64_t rows, int64_t columns,
                                const float* amax, uint8_t* codes, uint8_t* transposed, float* scale_inv) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const float scale = w != nullptr ? scale_for(*amax, 448.0f) : 1.0f;
  if (w != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
    *scale_inv = __fdiv_rn(1.0f, scale);
  }
  const int64_t row0 = int64_t{blockIdx.y} * kTile, column0 = int64_t{blockIdx.x} * kTile;
  for (int y = threadIdx.y; y < kTile; y += blockDim.y) {
    const int64_t row = row0 + y, column = column0 + threadIdx.x;
    if (row < rows && column < columns) {
      const int64_t at = row * columns + column;
      uint8_t code;
      if (w != nullptr) {
        code = weight_code(w[at], scale);
        codes[at] = code;
      } else {
        code = in[at];
      }
      tile[y][threadIdx.x] = code;
    }
  }
  __syncthreads();
  for (int y = threadIdx.y; y < kTile; y += blockDim.y) {
    const int64_t column = column0 + y, row = row0 + threadIdx.x;
    if (row < rows && column < columns) transposed[column * rows + row] = tile[threadIdx.x][y];
  }
}

// ---- the fast path: 64 × 64-byte tiles, 256 threads, 16-byte accesses ----

constexpr int kWide = 64;                // tile rows and bytes per tile row
constexpr int kWords = kWide / 4 + 1;    // 32-bit words per shared row, one of padding (bank spread)

// The 4 × 4 bytes of words a[0..3] (row i = a[i]) transposed: result j holds byte j of each row.
__device__ __forceinline__ void transpose_4x4(const uint32_t a[4], uint32_t out[4]) {
  const uint32_t low01 = __byte_perm(a[0], a[1], 0x5140), high01 = __byte_perm(a[0], a[1], 0x7362);
  const uint32_t low23 = __byte_perm(a[2], a[3], 0x5140), high23 = __byte_perm(a[2], a[3], 0x7362);
  out[0] = __byte_perm(low01, low23, 0x5410);
  out[1] = __byte_perm(low01, low23, 0x7632);
  out[2] = __byte_perm(high01, high23, 0x5410);
  out[3] = __byte_perm(high01, high23, 0x7632);
}

// `tile` holds the block's 64 × 64 input bytes (row r, word c = bytes 4c..4c+3); writes the tile
// transposed to out [columns, rows] at (column0, row0). Ends with the block's stores issued.
__device__ __forceinline__ void store_transposed(uint32_t (*tile)[kWords], uint32_t (*flipped)[kWords], int64_t rows,
                                                 int64_t row0, int64_t column0, uint8_t* out) {
  const int t = threadIdx.x;
  {
    const int block_row = t % 16, block_column = t / 16;  // 4 × 4-byte blocks of the tile
    uint32_t a[4], b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = tile[4 * block_row + i][block_column];
    transpose_4x4(a, b);
#pragma unroll
    for (int j = 0; j < 4; ++j) flipped[4 * block_column + j][block_row] = b[j];
  }
  __syncthreads();
  const int r = t / 4, c = t % 4;  // output row r of the tile, its 16 bytes c
  const uint4 value{flipped[r][4 * c], flipped[r][4 * c + 1], flipped[r][4 * c + 2], flipped[r][4 * c + 3]};
  *reinterpret_cast<uint4*>(out + (column0 + r) * rows + row0 + 16 * c) = value;
}

__global__ void __launch_bounds__(kThreads) transpose_wide(const uint8_t* in, int64_t rows, int64_t columns, uint8_t* out) {
  __shared__ uint32_t tile[kWide][kWords], flipped[kWide][kWords];
  const int64_t row0 = int64_t{blockIdx.y} * kWide, column0 = int64_t{blockIdx.x} * kWide;
  const int t = threadIdx.x, r = t / 4, c = t % 4;
  const uint4 value = *reinterpret_cast<const uint4*>(in + (row0 + r) * columns + column0 + 16 * c);
  tile[r][4 * c] = value.x;
  tile[r][4 * c + 1] = value.y;
  tile[r][4 * c + 2] = value.z;
  tile[r][4 * c + 3] = value.w;
  __syncthreads();
  store_transposed(tile, flipped, rows, row0, column0, out);
}

// Four E4M3 codes of w[at..at+3] at `scale`, byte i = element at + i.
__device__ __forceinline__ uint32_t weight_codes4(const __nv_bfloat16* values, float scale) {
  uint32_t word = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) word |= uint32_t{weight_code(values[i], scale)} << (8 * i);
  return word;
}

__global__ void __launch_bounds__(kThreads) quantize_weight_wide(const __nv_bfloat16* w, int64_t rows, int64_t columns,
                                                                 const float* amax, uint8_t* codes, uint8_t* transposed,
                                                                 float* scale_inv) {
  __shared__ uint32_t tile[kWide][kWords], flipped[kWide][kWords];
  const float scale = scale_for(*amax, 448.0f);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = __fdiv_rn(1.0f, scale);
  const int64_t row0 = int64_t{blockIdx.y} * kWide, column0 = int64_t{blockIdx.x} * kWide;
  const int t = threadIdx.x;
  // 64 rows × 64 bf16 = 512 loads of 8 values: two per thread, each 8 codes (2 words) of one row.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int index = t + half * kThreads, r = index / 8, c = index % 8;
    const int64_t at = (row0 + r) * columns + column0 + 8 * c;
    const uint4 packed = *reinterpret_cast<const uint4*>(w + at);
    const __nv_bfloat16* values = reinterpret_cast<const __nv_bfloat16*>(&packed);
    const uint32_t first = weight_codes4(values, scale), second = weight_codes4(values + 4, scale);
    *reinterpret_cast<uint2*>(codes + at) = make_uint2(first, second);
    tile[r][2 * c] = first;
    tile[r][2 * c + 1] = second;
  }
  __syncthreads();
  store_transposed(tile, flipped, rows, row0, column0, transposed);
}

// ---- the line path: kRows × 128-byte tiles, 2 · kRows threads ----

constexpr int kLine = 128;          // tile bytes per row: one cache line
constexpr int kChunks = kLine / 16;  // 16-byte chunks per tile row

// Where chunk c of tile row r sits in shared memory (in chunks). The transposing reads take 16
// rows of one 4-byte column per thread, the kRows / 16 row groups and 32 / groups columns of a
// warp side by side; XOR-ing the chunk with the row group spreads them over 32 banks.
template <int kRows>
__device__ __forceinline__ int swizzled_chunk(int r, int c) {
  constexpr int kGroups = kRows / 16;
  return r * kChunks + (c ^ ((r / 16) * (kChunks / kGroups)));
}

// The tile (kRows × 128 bytes in `tile`, swizzled) written transposed to out [columns, rows] at
// (column0, row0): thread (row group a, 4-byte column w) reads rows 16a..16a+15 of column w,
// transposes 4 × 4 blocks in registers and stores 16 rows of each of its 4 byte columns.
template <int kRows>
__device__ __forceinline__ void store_line_tile(const uint4* tile, int64_t rows, int64_t row0, int64_t column0,
                                                uint8_t* out) {
  constexpr int kGroups = kRows / 16;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int a = lane % kGroups, w = lane / kGroups + (32 / kGroups) * warp;
  const uint32_t* words = reinterpret_cast<const uint32_t*>(tile);
  uint32_t column[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) column[i] = words[4 * swizzled_chunk<kRows>(16 * a + i, w / 4) + w % 4];
  uint32_t flipped[4][4];  // [row block][byte column k]: rows 16a + 4·block .. +3 of column 4w + k
#pragma unroll
  for (int block = 0; block < 4; ++block) transpose_4x4(column + 4 * block, flipped[block]);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    *reinterpret_cast<uint4*>(out + (column0 + 4 * w + k) * rows + row0 + 16 * a) =
        uint4{flipped[0][k], flipped[1][k], flipped[2][k], flipped[3][k]};
  }
}

template <int kRows>
__global__ void __launch_bounds__(2 * kRows) transpose_lines(const uint8_t* in, int64_t rows, int64_t columns,
                                                              uint8_t* out) {
  constexpr int kLoads = kRows * kChunks / (2 * kRows);
  __shared__ uint4 tile[kRows * kChunks];
  const int64_t row0 = int64_t{blockIdx.y} * kRows, column0 = int64_t{blockIdx.x} * kLine;
  uint4 value[kLoads];
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int index = threadIdx.x + j * 2 * kRows, r = index / kChunks, c = index % kChunks;
    value[j] = *reinterpret_cast<const uint4*>(in + (row0 + r) * columns + column0 + 16 * c);
  }
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int index = threadIdx.x + j * 2 * kRows;
    tile[swizzled_chunk<kRows>(index / kChunks, index % kChunks)] = value[j];
  }
  __syncthreads();
  store_line_tile<kRows>(tile, rows, row0, column0, out);
}

// The weight's codes row by row and their transpose, kRows × 128 weights per block: each of the
// 16 loads of 8 bf16 per tile row gives 8 codes, stored at once and into half a shared chunk.
template <int kRows>
__global__ void __launch_bounds__(2 * kRows) quantize_weight_lines(const __nv_bfloat16* w, int64_t rows, int64_t columns,
                                                                    const float* amax, uint8_t* codes,
                                                                    uint8_t* transposed, float* scale_inv) {
  constexpr int kLoads = kRows * kChunks * 2 / (2 * kRows);
  __shared__ uint4 tile[kRows * kChunks];
  const float scale = scale_for(*amax, 448.0f);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = __fdiv_rn(1.0f, scale);
  const int64_t row0 = int64_t{blockIdx.y} * kRows, column0 = int64_t{blockIdx.x} * kLine;
  uint4 packed[kLoads];
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int index = threadIdx.x + j * 2 * kRows, r = index / (2 * kChunks), c = index % (2 * kChunks);
    packed[j] = *reinterpret_cast<const uint4*>(w + (row0 + r) * columns + column0 + 8 * c);
  }
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int index = threadIdx.x + j * 2 * kRows, r = index / (2 * kChunks), c = index % (2 * kChunks);
    const __nv_bfloat16* values = reinterpret_cast<const __nv_bfloat16*>(&packed[j]);
    const uint2 eight{weight_codes4(values, scale), weight_codes4(values + 4, scale)};
    *reinterpret_cast<uint2*>(codes + (row0 + r) * columns + column0 + 8 * c) = eight;
    reinterpret_cast<uint2*>(tile + swizzled_chunk<kRows>(r, c / 2))[c % 2] = eight;
  }
  __syncthreads();
  store_line_tile<kRows>(tile, rows, row0, column0, transposed);
}

// The line path's tile height for this shape, or 0 when it does not apply.
int line_rows(int64_t rows, int64_t columns, std::initializer_list<const void*> pointers) {
  if (columns % kLine != 0) return 0;
  for (const void* pointer : pointers) {
    if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0) return 0;
  }
  return rows % 128 == 0 ? 128 : rows % 64 == 0 ? 64 : 0;
}

bool wide(int64_t rows, int64_t columns, std::initializer_list<const void*> pointers) {
  if (rows % kWide != 0 || columns % kWide != 0) return false;
  for (const void* pointer : pointers) {
    if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0) return false;
  }
  return true;
}

// The grid of tiles `tile_rows` high and `tile_columns` wide over [rows, columns].
dim3 tiles_for(int64_t rows, int64_t columns, int tile_rows, int tile_columns) {
  return dim3(static_cast<unsigned>((columns + tile_columns - 1) / tile_columns),
              static_cast<unsigned>((rows + tile_rows - 1) / tile_rows));
}

}  // namespace

void fp8_quantize_weight(const __nv_bfloat16* w, int64_t rows, int64_t columns, float* amax, uint8_t* codes,
                         uint8_t* transposed, float* scale_inv, cudaStream_t stream) {
  if (rows == 0 || columns == 0) return;
  CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  fp8_record_amax(w, rows * columns, nullptr, amax, stream);
  const int lines = line_rows(rows, columns, {w, codes, transposed});
  if (lines == 128) {
    quantize_weight_lines<128><<<tiles_for(rows, columns, 128, kLine), 256, 0, stream>>>(w, rows, columns, amax, codes,
                                                                                         transposed, scale_inv);
  } else if (lines == 64) {
    quantize_weight_lines<64><<<tiles_for(rows, columns, 64, kLine), 128, 0, stream>>>(w, rows, columns, amax, codes,
                                                                                       transposed, scale_inv);
  } else if (wide(rows, columns, {w, codes, transposed})) {
    quantize_weight_wide<<<tiles_for(rows, columns, kWide, kWide), kThreads, 0, stream>>>(w, rows, columns, amax, codes,
                                                                                  transposed, scale_inv);
  } else {
    transpose_bytes<<<tiles_for(rows, columns, kTile, kTile), dim3(kTile, 8), 0, stream>>>(w, nullptr, rows, columns, amax,
                                                                                  codes, transposed, scale_inv);
  }
  CUDA_CHECK(cudaGetLastError());
}

void fp8_transpose(const uint8_t* in, int64_t rows, int64_t columns, uint8_t* out, cudaStream_t stream) {
  if (rows == 0 || columns == 0) return;
  const int lines = line_rows(rows, columns, {in, out});
  if (lines == 128) {
    transpose_lines<128><<<tiles_for(rows, columns, 128, kLine), 256, 0, stream>>>(in, rows, columns, out);
  } else if (lines == 64) {
    transpose_lines<64><<<tiles_for(rows, columns, 64, kLine), 128, 0, stream>>>(in, rows, columns, out);
  } else if (wide(rows, columns, {in, out})) {
    transpose_wide<<<tiles_for(rows, columns, kWide, kWide), kThreads, 0, stream>>>(in, rows, columns, out);
  } else {
    transpose_bytes<<<tiles_for(rows, columns, kTile, kTile), dim3(kTile, 8), 0, stream>>>(nullptr, in, rows, columns, nullptr,
                                                                                  nullptr, out, nullptr);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace surogate::cuda
