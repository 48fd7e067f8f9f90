// The bf16 weights rewritten from their fp32 masters, for many tensors in one launch (grid.y =
// tensor): weight = bf16(master), rounded to nearest even as the optimizer kernels write it. A
// ZeRO-2 replica or a pipeline stage's rank calls it after the all-gather of the masters, for the
// tensors other ranks updated (train/device/shard_publish.h); a ZeRO-1 replica all-gathers the
// rounded weights instead and copies them out with weights_from_flat; under ZeRO-3 a rank rounds
// the weights it keeps as they are uploaded. fp16 training (torch_dtype: float16) rewrites its fp16 weights the same way after
// every optimizer step (weight = fp16(master), round to nearest even, ±inf past 65504). Plain host
// launcher; no fmt or graph headers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

// For t < tensor_count: weights[t][i] = bf16(masters[t][i]). The arrays live on the device.
void weights_from_masters(__nv_bfloat16* const* weights, const float* const* masters, const int64_t* counts,
                          int tensor_count, cudaStream_t stream);
// For t < tensor_count: weights[t][i] = fp16(masters[t][i]).
void weights_from_masters(__half* const* weights, const float* const* masters, const int64_t* counts,
                          int tensor_count, cudaStream_t stream);
// For t < tensor_count: weights[t][i] = sources[t][i], a plain copy (ZeRO-1's 16-bit publish: the
// weights other ranks stepped, out of the all-gathered flat buffer).
void weights_from_flat(__nv_bfloat16* const* weights, const __nv_bfloat16* const* sources, const int64_t* counts,
                       int tensor_count, cudaStream_t stream);
// One tensor: weight[i] = bf16(master[i]) for i < count (ZeRO-3's upload into a rank's own copy;
// ZeRO-1's publish of a rank's own run of masters).
void round_to_bf16(const float* master, __nv_bfloat16* weight, int64_t count, cudaStream_t stream);

}  // namespace surogate::cuda
