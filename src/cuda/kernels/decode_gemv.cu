// The decode GEMVs of decode_gemv.h. A block owns R rows of W (the rows of up to three weights laid
// end to end; for SwiGLU R/2 gate rows and the R/2 up rows of the same columns). Thread t reads
// 16-byte chunks t, t + 256, ... of every one of its R rows, kLoadsInFlight loads issued before
// the first is used, and keeps R × M fp32 sums; each warp's shuffle and then the block's fixed-order
// sum over its warps (shared memory) finish them, and threads 0.. write the epilogue. With a norm,
// the block first writes T(x · rstd · w) of its M rows to shared memory and reads x from there.
// x (the previous kernel's output) is read with __ldca, never __ldg: a non-coherent load promises
// memory no one writes while the kernel lives, so the compiler may move it above the programmatic
// wait — and did, at 8 rows a block (2026-11-30: the captured decode step read the previous x and
// chose other tokens; the SASS had x's LDG.E.128.CONSTANT before the ACQBULK).
#include "cuda/kernels/decode_gemv.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/programmatic_launch.cuh"

namespace surogate::cuda {
namespace {

using kernels::ElementTraits;
using kernels::from_float;
using kernels::to_float;

constexpr int kGemvWarps = kDecodeGemvThreads / 32;
constexpr int kLoadsInFlight = 8;  // per thread: 128 bytes, 32 KiB per block
constexpr int kGemvChunk = 8;      // 16 bytes of 16-bit values

template <typename T>
struct GemvParams {
  DecodeGemvWeight<T> weights[kDecodeGemvMaxWeights];
  int count = 0;
  int64_t total = 0;   // rows of all weights together (plain) or F (SwiGLU)
  int64_t chunks = 0;  // K / 8
  float alpha = 1.0f;
  const T* norm_weight = nullptr;  // [K], or null: no norm
  float epsilon = 0.0f;
};

template <typename T>
__device__ __forceinline__ void chunk_floats(const uint4& chunk, float (&values)[kGemvChunk]) {
  const auto* pairs = reinterpret_cast<const typename ElementTraits<T>::Pair*>(&chunk);
#pragma unroll
  for (int i = 0; i < kGemvChunk / 2; ++i) {
    const float2 pair = ElementTraits<T>::to_float2(pairs[i]);
    values[2 * i] = pair.x;
    values[2 * i + 1] = pair.y;
  }
}

template <typename T>
__device__ __forceinline__ uint4 floats_chunk(const float (&values)[kGemvChunk]) {
  uint4 chunk;
  chunk.x = kernels::pack_pair<T>(values[0], values[1]);
  chunk.y = kernels::pack_pair<T>(values[2], values[3]);
  chunk.z = kernels::pack_pair<T>(values[4], values[5]);
  chunk.w = kernels::pack_pair<T>(values[6], values[7]);
  return chunk;
}

// rmsnorm.h's forward of x's M rows into `normed` (M × chunks 16-byte chunks of shared memory):
// the sums of squares in a fixed order (thread, then warp), then T(x · rstd · w).
template <typename T, int M>
__device__ void normalise_x(const GemvParams<T>& p, const T* x, uint4* normed) {
  __shared__ float squares[kGemvWarps][M];
  const uint4* x_chunks = reinterpret_cast<const uint4*>(x);
  const uint4* w_chunks = reinterpret_cast<const uint4*>(p.norm_weight);
  float sums[M];
#pragma unroll
  for (int m = 0; m < M; ++m) sums[m] = 0.0f;
  for (int64_t chunk = threadIdx.x; chunk < p.chunks; chunk += kDecodeGemvThreads) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float values[kGemvChunk];
      chunk_floats<T>(__ldca(x_chunks + m * p.chunks + chunk), values);
#pragma unroll
      for (int i = 0; i < kGemvChunk; ++i) sums[m] = fmaf(values[i], values[i], sums[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sums[m] += __shfl_down_sync(0xffffffffu, sums[m], offset);
    if (threadIdx.x % 32 == 0) squares[threadIdx.x / 32][m] = sums[m];
  }
  __syncthreads();
  float rstd[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kGemvWarps; ++w) total += squares[w][m];
    rstd[m] = rsqrtf(total / static_cast<float>(p.chunks * kGemvChunk) + p.epsilon);
  }
  for (int64_t chunk = threadIdx.x; chunk < p.chunks; chunk += kDecodeGemvThreads) {
    float w[kGemvChunk];
    chunk_floats<T>(__ldg(w_chunks + chunk), w);  // read-only: the norm weight, a parameter
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float values[kGemvChunk];
      chunk_floats<T>(__ldca(x_chunks + m * p.chunks + chunk), values);
#pragma unroll
      for (int i = 0; i < kGemvChunk; ++i) values[i] = values[i] * rstd[m] * w[i];
      normed[m * p.chunks + chunk] = floats_chunk<T>(values);
    }
  }
  __syncthreads();
}

// The weight global row `row` (< total) belongs to, `row` made its row within it. Constant indices
// only: a dynamic index into the kernel's parameters would copy them to local memory.
template <typename T>
__device__ __forceinline__ DecodeGemvWeight<T> weight_of(const GemvParams<T>& p, int64_t& row) {
  if (p.count == 1 || row < p.weights[0].rows) return p.weights[0];
  row -= p.weights[0].rows;
  if (p.count == 2 || row < p.weights[1].rows) return p.weights[1];
  row -= p.weights[1].rows;
  return p.weights[2];
}

template <typename T, int M, int R, bool kSwiglu>
__global__ void __launch_bounds__(kDecodeGemvThreads) decode_gemv_kernel(const GemvParams<T> p, const T* x) {
  constexpr int kUnroll = kLoadsInFlight / R > 0 ? kLoadsInFlight / R : 1;
  constexpr int kColumns = kSwiglu ? R / 2 : R;  // outputs per block (and per x row)
  __shared__ float partial[kGemvWarps][R][M];
  extern __shared__ uint4 normed_x[];  // M × chunks when normed, else empty
  const bool normed = p.norm_weight != nullptr;
  // Nothing the previous kernel writes (x, bias, addend) is read before the wait; W is.
  bool waited = normed;
  if (normed) {
    wait_for_previous_grid();
    normalise_x<T, M>(p, x, normed_x);
  }
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kColumns;
  const int64_t chunks = p.chunks;
  const uint4* w_rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    // A row past the end re-reads the last one (its sum is never written): no branch in the loop.
    int64_t row = first + (kSwiglu ? r % kColumns : r);
    row = row < p.total ? row : p.total - 1;
    const T* base;
    if constexpr (kSwiglu) {
      base = p.weights[r < kColumns ? 0 : 1].weight;
    } else {
      base = weight_of(p, row).weight;
    }
    w_rows[r] = reinterpret_cast<const uint4*>(base + row * chunks * kGemvChunk);
  }
  float sums[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) sums[r][m] = 0.0f;
  }
  const uint4* x_chunks = reinterpret_cast<const uint4*>(x);
  for (int64_t start = threadIdx.x; start < chunks; start += kDecodeGemvThreads * kUnroll) {
    uint4 w[R][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t chunk = start + kDecodeGemvThreads * u;
#pragma unroll
      for (int r = 0; r < R; ++r) w[r][u] = chunk < chunks ? __ldcs(w_rows[r] + chunk) : make_uint4(0, 0, 0, 0);
    }
    if (!waited) {  // the first loads are in flight
      wait_for_previous_grid();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t chunk = start + kDecodeGemvThreads * u;
      if (chunk >= chunks) break;
      float xf[M][kGemvChunk];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        chunk_floats<T>(normed ? normed_x[m * chunks + chunk] : __ldca(x_chunks + m * chunks + chunk), xf[m]);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float wf[kGemvChunk];
        chunk_floats<T>(w[r][u], wf);
#pragma unroll
        for (int m = 0; m < M; ++m) {
#pragma unroll
          for (int i = 0; i < kGemvChunk; ++i) sums[r][m] = fmaf(wf[i], xf[m][i], sums[r][m]);
        }
      }
    }
  }
  if (!waited) wait_for_previous_grid();  // a thread past K's chunks may still write (bias, addend)
  allow_next_grid();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float value = sums[r][m];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
      if (lane == 0) partial[warp][r][m] = value;
    }
  }
  __syncthreads();
  if (threadIdx.x >= kColumns * M) return;
  const int column = static_cast<int>(threadIdx.x) / M, m = static_cast<int>(threadIdx.x) % M;
  int64_t row = first + column;
  if (row >= p.total) return;
  // The block's sum of row r in warp order: the same order, hence the same bits, every run.
  const auto row_sum = [&](int r) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kGemvWarps; ++w) total += partial[w][r][m];
    return p.alpha * total;
  };
  if constexpr (kSwiglu) {
    const float gate = to_float(from_float<T>(row_sum(column))), up = to_float(from_float<T>(row_sum(column + kColumns)));
    // swiglu.cu's expression: g · sigmoid(g) · u.
    p.weights[0].out[m * p.total + row] = from_float<T>(gate * (1.0f / (1.0f + __expf(-gate))) * up);
  } else {
    const DecodeGemvWeight<T> weight = weight_of(p, row);
    float value = row_sum(column);
    if (weight.bias != nullptr) value += to_float(weight.bias[row]);
    if (weight.addend != nullptr) value += to_float(weight.addend[m * weight.rows + row]);
    weight.out[m * weight.rows + row] = from_float<T>(value);
  }
}

template <typename T, int M, int R, bool kSwiglu>
void launch_gemv(const GemvParams<T>& p, const T* x, bool overlap_previous, cudaStream_t stream) {
  constexpr int kColumns = kSwiglu ? R / 2 : R;
  const int64_t blocks = (p.total + kColumns - 1) / kColumns;
  const size_t shared = p.norm_weight != nullptr ? static_cast<size_t>(M * p.chunks) * sizeof(uint4) : 0;
  launch_programmatic(decode_gemv_kernel<T, M, R, kSwiglu>, dim3(static_cast<unsigned>(blocks)), dim3(kDecodeGemvThreads),
                      shared, stream, overlap_previous, p, x);
}

// Plain GEMVs take 1, 2, 4 or 8 rows per block, SwiGLU 2, 4, 8 or 16 (1, 2, 4 or 8 columns).
template <typename T, int M, bool kSwiglu>
void launch_rows(const GemvParams<T>& p, const T* x, int rows_per_block, bool overlap, cudaStream_t stream) {
  constexpr int kLeast = kSwiglu ? 2 : 1;
  if (rows_per_block == kLeast) launch_gemv<T, M, kLeast, kSwiglu>(p, x, overlap, stream);
  else if (rows_per_block == 2 * kLeast) launch_gemv<T, M, 2 * kLeast, kSwiglu>(p, x, overlap, stream);
  else if (rows_per_block == 4 * kLeast) launch_gemv<T, M, 4 * kLeast, kSwiglu>(p, x, overlap, stream);
  else if (rows_per_block == 8 * kLeast) launch_gemv<T, M, 8 * kLeast, kSwiglu>(p, x, overlap, stream);
  else CUDA_REQUIRE(false, "decode_gemv: rows_per_block must be 1, 2, 4 or 8 (SwiGLU: 2, 4, 8 or 16)");
}

template <typename T, bool kSwiglu>
void launch_decode_gemv(GemvParams<T>& p, const T* x, const DecodeGemvShape& shape, const DecodeGemvNorm<T>& norm,
                        cudaStream_t stream) {
  if (norm.weight != nullptr) {
    CUDA_REQUIRE(shape.rows * shape.in * 2 <= kDecodeGemvMaxNormBytes, "decode_gemv: M · K too large for the norm");
    CUDA_REQUIRE(reinterpret_cast<uintptr_t>(norm.weight) % 16 == 0, "decode_gemv: the norm weight is not 16-byte aligned");
    p.norm_weight = norm.weight;
    p.epsilon = norm.epsilon;
  }
  const int64_t w_rows = kSwiglu ? 2 * p.total : p.total;
  const int rows_per_block = shape.rows_per_block != 0 ? shape.rows_per_block : (w_rows >= 8192 ? 4 : 2);
  if (shape.rows == 1) launch_rows<T, 1, kSwiglu>(p, x, rows_per_block, shape.overlap_previous, stream);
  else launch_rows<T, 2, kSwiglu>(p, x, rows_per_block, shape.overlap_previous, stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool decode_gemv_supported(const DecodeGemvShape& shape, const void* x, const void* const* weights, int count,
                           bool normed) {
  const auto aligned = [](const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; };
  if (shape.rows < 1 || shape.rows > kDecodeGemvMaxRows || shape.in <= 0 || shape.in % kGemvChunk != 0) return false;
  if (count < 1 || count > kDecodeGemvMaxWeights || !aligned(x)) return false;
  if (normed && shape.rows * shape.in * 2 > kDecodeGemvMaxNormBytes) return false;
  for (int i = 0; i < count; ++i) {
    if (!aligned(weights[i])) return false;
  }
  return true;
}

template <typename T>
void decode_gemv(const DecodeGemvWeight<T>* weights, int count, const T* x, const DecodeGemvShape& shape,
                 cudaStream_t stream, const DecodeGemvNorm<T>& norm) {
  CUDA_REQUIRE(count >= 1 && count <= kDecodeGemvMaxWeights, "decode_gemv: 1 to 3 weights");
  CUDA_REQUIRE(shape.rows >= 1 && shape.rows <= kDecodeGemvMaxRows && shape.in > 0 && shape.in % kGemvChunk == 0,
               "decode_gemv: M must be 1 or 2 and K a positive multiple of 8");
  GemvParams<T> p;
  p.count = count;
  p.chunks = shape.in / kGemvChunk;
  p.alpha = shape.alpha;
  for (int i = 0; i < count; ++i) {
    CUDA_REQUIRE(weights[i].rows >= 1, "decode_gemv: every weight needs at least one row");
    p.weights[i] = weights[i];
    p.total += weights[i].rows;
  }
  launch_decode_gemv<T, false>(p, x, shape, norm, stream);
}

template <typename T>
void decode_gemv_swiglu(T* out, const T* x, const T* gate, const T* up, int64_t ffn, const DecodeGemvShape& shape,
                        cudaStream_t stream, const DecodeGemvNorm<T>& norm) {
  CUDA_REQUIRE(shape.rows >= 1 && shape.rows <= kDecodeGemvMaxRows && shape.in > 0 && shape.in % kGemvChunk == 0 &&
                   ffn >= 1,
               "decode_gemv_swiglu: M must be 1 or 2, K a positive multiple of 8 and F positive");
  GemvParams<T> p;
  p.count = 2;
  p.weights[0] = {.weight = gate, .out = out, .rows = ffn};
  p.weights[1] = {.weight = up, .out = out, .rows = ffn};
  p.total = ffn;
  p.chunks = shape.in / kGemvChunk;
  p.alpha = shape.alpha;
  launch_decode_gemv<T, true>(p, x, shape, norm, stream);
}

template void decode_gemv(const DecodeGemvWeight<__nv_bfloat16>*, int, const __nv_bfloat16*, const DecodeGemvShape&,
                          cudaStream_t, const DecodeGemvNorm<__nv_bfloat16>&);
template void decode_gemv(const DecodeGemvWeight<__half>*, int, const __half*, const DecodeGemvShape&, cudaStream_t,
                          const DecodeGemvNorm<__half>&);
template void decode_gemv_swiglu(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                 int64_t, const DecodeGemvShape&, cudaStream_t, const DecodeGemvNorm<__nv_bfloat16>&);
template void decode_gemv_swiglu(__half*, const __half*, const __half*, const __half*, int64_t, const DecodeGemvShape&,
                                 cudaStream_t, const DecodeGemvNorm<__half>&);

}  // namespace surogate::cuda
