// bf16 kernels for the core ops mul, broadcast and sum (runtime/cuda_core_ops.cpp), which BF16
// graphs use where a loss is a product summed (a pipeline stage's loss Σ sum(t · g_t) over the
// tensors it sends, distributed/pipeline_graph.h, and its gradient: broadcast, then mul). Each
// element is computed in fp32 and rounded once; sum accumulates in double in one block with a
// fixed order (as sum_f32), so it is deterministic. Plain host launchers; no graph headers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::runtime::cuda_kernels {

void mul_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int64_t count, cudaStream_t stream);
// out[i] = scalar[0] (a device pointer).
void broadcast_bf16(const __nv_bfloat16* scalar, __nv_bfloat16* out, int64_t count, cudaStream_t stream);
// out[0] = sum of x, accumulated in double.
void sum_bf16(const __nv_bfloat16* x, __nv_bfloat16* out, int64_t count, cudaStream_t stream);

}  // namespace surogate::runtime::cuda_kernels
