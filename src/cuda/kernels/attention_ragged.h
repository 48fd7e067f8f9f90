// The ragged-layout description of packed documents that cuDNN's fused attention reads
// (cuda/cudnn_attention.h), built on the device from cu_seqlens (kernels/plain_attention.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

// For slot i < slots: lengths[i] = cu_seqlens[i + 1] − cu_seqlens[i] (0 past the last document);
// for i ≤ slots: q_offsets[i] = cu_seqlens[i] · q_row, kv_offsets[i] = cu_seqlens[i] · kv_row,
// stats_offsets[i] = cu_seqlens[i] · stats_row (element offsets of each document's first token).
// cu_seqlens holds slots + 1 entries; every product must fit in int32 (the caller checks).
void ragged_attention_offsets(int32_t* lengths, int32_t* q_offsets, int32_t* kv_offsets, int32_t* stats_offsets,
                              const int32_t* cu_seqlens, int64_t slots, int32_t q_row, int32_t kv_row,
                              int32_t stats_row, cudaStream_t stream);

}  // namespace surogate::cuda
