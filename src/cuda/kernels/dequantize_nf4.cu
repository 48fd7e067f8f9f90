// NF4 dequantization kernels; see dequantize_nf4.h.
#include "cuda/kernels/dequantize_nf4.h"

#include <algorithm>

#include "cuda/cuda_check.h"
#include "quant/dynamic_map.h"

namespace surogate::cuda {
namespace {

// quant::kNf4Levels and quant::kDynamicMap, copied into shared memory by each CTA (their indices
// differ across a warp, which constant memory would serialise).
__constant__ float kLevels[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f};
__constant__ float kDynamicMapDevice[256];

constexpr int kThreads = 256;

struct SharedTables {
  float levels[16];
  float map[256];
};

__device__ void load_tables(SharedTables& tables, bool double_quant) {
  for (int i = threadIdx.x; i < 16; i += blockDim.x) tables.levels[i] = kLevels[i];
  if (double_quant) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) tables.map[i] = kDynamicMapDevice[i];
  }
  __syncthreads();
}

__device__ float block_absmax(const Nf4DeviceView& view, const SharedTables& tables, int64_t block) {
  if (view.absmax != nullptr) return view.absmax[block];
  return __fadd_rn(__fmul_rn(tables.map[view.absmax_codes[block]], view.absmax2[block / 256]), *view.offset);
}

__global__ void dequantize_vector8(Nf4DeviceView view, __nv_bfloat16* out) {
  __shared__ SharedTables tables;
  load_tables(tables, view.absmax == nullptr);
  const int64_t groups = view.numel / 8;
  for (int64_t group = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; group < groups;
       group += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t bytes = reinterpret_cast<const uint32_t*>(view.packed)[group];
    const float scale = block_absmax(view, tables, group * 8 / view.block_size);
    __align__(16) __nv_bfloat16 values[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t byte = (bytes >> (8 * i)) & 0xFF;
      values[2 * i] = __float2bfloat16_rn(__fmul_rn(tables.levels[byte >> 4], scale));
      values[2 * i + 1] = __float2bfloat16_rn(__fmul_rn(tables.levels[byte & 0x0F], scale));
    }
    reinterpret_cast<uint4*>(out)[group] = *reinterpret_cast<const uint4*>(values);
  }
}

__global__ void dequantize_scalar(Nf4DeviceView view, __nv_bfloat16* out) {
  __shared__ SharedTables tables;
  load_tables(tables, view.absmax == nullptr);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < view.numel;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint8_t byte = view.packed[i / 2];
    const float scale = block_absmax(view, tables, i / view.block_size);
    out[i] = __float2bfloat16_rn(__fmul_rn(tables.levels[(i % 2 == 0) ? byte >> 4 : byte & 0x0F], scale));
  }
}

}  // namespace

void prepare_dequantize_nf4() {
  CUDA_CHECK(cudaMemcpyToSymbol(kDynamicMapDevice, quant::kDynamicMap.data(), sizeof(float) * quant::kDynamicMap.size()));
}

void dequantize_nf4_bf16(const Nf4DeviceView& view, __nv_bfloat16* out, cudaStream_t stream) {
  const bool vectorised = view.numel % 8 == 0 && view.block_size % 8 == 0 &&
                          reinterpret_cast<uintptr_t>(view.packed) % 4 == 0 &&
                          reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const int64_t work = vectorised ? view.numel / 8 : view.numel;
  const int blocks = static_cast<int>(std::min<int64_t>((work + kThreads - 1) / kThreads, 132 * 16));
  if (work == 0) return;
  if (vectorised) {
    dequantize_vector8<<<blocks, kThreads, 0, stream>>>(view, out);
  } else {
    dequantize_scalar<<<blocks, kThreads, 0, stream>>>(view, out);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace surogate::cuda
