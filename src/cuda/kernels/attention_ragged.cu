#include "cuda/cuda_check.h"
#include "cuda/kernels/attention_ragged.h"

namespace surogate::cuda {
namespace {

__global__ void ragged_attention_offsets_kernel(int32_t* lengths, int32_t* q_offsets, int32_t* kv_offsets,
                                                int32_t* stats_offsets, const int32_t* cu_seqlens, int64_t slots,
                                                int32_t q_row, int32_t kv_row, int32_t stats_row) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i > slots) return;
  const int32_t start = cu_seqlens[i];
  if (i < slots) lengths[i] = cu_seqlens[i + 1] - start;
  q_offsets[i] = start * q_row;
  kv_offsets[i] = start * kv_row;
  stats_offsets[i] = start * stats_row;
}

}  // namespace

void ragged_attention_offsets(int32_t* lengths, int32_t* q_offsets, int32_t* kv_offsets, int32_t* stats_offsets,
                              const int32_t* cu_seqlens, int64_t slots, int32_t q_row, int32_t kv_row,
                              int32_t stats_row, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((slots + 1 + kThreads - 1) / kThreads);
  ragged_attention_offsets_kernel<<<blocks, kThreads, 0, stream>>>(lengths, q_offsets, kv_offsets, stats_offsets,
                                                                   cu_seqlens, slots, q_row, kv_row, stats_row);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda
