// The weight reads of a one-request decode step at HBM bandwidth: out [M, N] = alpha · x [M, K] · Wᵀ
// for M = 1 or 2 rows, W [N, K] row-major 16-bit (bf16 or fp16), fp32 accumulation, in one launch
// that may cover several weights at once:
//   * decode_gemv: up to three weights read against the same x, each with its own output (q, k
//     and v of an attention layer in one launch; one weight is the plain linear layer), with an
//     optional bias [N_i] or addend [M, N_i] per weight;
//   * decode_gemv_swiglu: the MLP's gate and up weights [F, K] read together, writing
//     silu(gate) · up [M, F] — the gate and up products each rounded to T first, as the unfused
//     linear, linear, swiglu chain rounds them, so the two routes agree to one rounding.
// Either form may normalise x first (DecodeGemvNorm: the RMSNorm before q/k/v and before gate/up
// folded into the product): every block recomputes rmsnorm(x) · w of its M rows into shared memory
// from x in the L2 — T(x · rstd · w), rstd = rsqrt(mean(x²) + eps), rmsnorm.h's forward and its
// rounding (rstd's fp32 sum in another order: it may differ in the last bit). The residual add
// belongs in the previous product's addend (o_proj's, down_proj's), so no norm kernel remains.
// Unlike small_m_linear.h (a warp per few columns), a block of kDecodeGemvThreads threads shares
// a few rows of W, every thread issuing 8 independent 16-byte loads before it uses one, so the
// whole GPU keeps megabytes of W in flight; the warps' partial sums meet in shared memory in a
// fixed order (deterministic: the same bits every run). Every block lets the next launch begin
// (programmatic_launch.cuh) once its W is read (DecodeGemvShape::overlap_previous). Requires K a positive multiple of 8 and
// x and every W 16-byte aligned (decode_gemv_supported).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

inline constexpr int64_t kDecodeGemvMaxRows = 2;
inline constexpr int kDecodeGemvMaxWeights = 3;
inline constexpr int kDecodeGemvThreads = 256;

// One weight of a decode_gemv launch: W [out, K] and its output [M, out] (out rows of it per x row).
template <typename T>
struct DecodeGemvWeight {
  const T* weight = nullptr;
  T* out = nullptr;
  int64_t rows = 0;          // N of this weight
  const T* bias = nullptr;   // [N] or null
  const T* addend = nullptr; // [M, N] or null (not both with bias; may not alias out)
};

// RMSNorm of x applied before the product (weight [K]); a null weight: x as it is.
template <typename T>
struct DecodeGemvNorm {
  const T* weight = nullptr;
  float epsilon = 1e-6f;
};

// The normalised x lives in shared memory: M · K · 2 bytes, at most 32 KiB (K ≤ 8192 for M = 2),
// well inside the 48 KiB a block may take without opting in, beside the block's static sums.
inline constexpr int64_t kDecodeGemvMaxNormBytes = 32 * 1024;

struct DecodeGemvShape {
  int64_t rows = 0;  // M, 1..kDecodeGemvMaxRows
  int64_t in = 0;    // K, a positive multiple of 8
  float alpha = 1.0f;
  // Rows of W per block (1, 2, 4 or 8; SwiGLU twice that); 0 picks by the total N (4 from 8192 rows, 2 below). The bench
  // compares them; more rows per block means fewer, longer blocks.
  int rows_per_block = 0;
  // Programmatic dependent launch (Hopper PDL): on sm_90+ and only while the stream is being captured
  // into a graph, the launch may begin before the previous kernel ends; each thread issues its first
  // W loads and then waits (griddepcontrol.wait) for that kernel before it reads x, the bias or the
  // addend. Set it only when no kernel of the graph writes W (a parameter, not a dequantized copy).
  // Outside a capture (eager code, where an optimizer may just have written W) it does nothing.
  bool overlap_previous = false;
};

// The shape rule and the 16-byte alignment of x and of every weight in [weights, weights + count);
// with `normed`, also the norm's shared-memory bound.
bool decode_gemv_supported(const DecodeGemvShape& shape, const void* x, const void* const* weights, int count,
                           bool normed = false);

// `count` weights (1..kDecodeGemvMaxWeights), each with rows ≥ 1. T: __nv_bfloat16 or __half.
template <typename T>
void decode_gemv(const DecodeGemvWeight<T>* weights, int count, const T* x, const DecodeGemvShape& shape,
                 cudaStream_t stream, const DecodeGemvNorm<T>& norm = {});

// out [M, F] = silu(T(alpha · x · gateᵀ)) · T(alpha · x · upᵀ); gate and up [F, K].
template <typename T>
void decode_gemv_swiglu(T* out, const T* x, const T* gate, const T* up, int64_t ffn, const DecodeGemvShape& shape,
                        cudaStream_t stream, const DecodeGemvNorm<T>& norm = {});

}  // namespace surogate::cuda
