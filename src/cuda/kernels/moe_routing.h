// Mixture-of-experts routing on the GPU, the kernels of the MoE graph ops (ops/moe_routing.h is
// the CPU reference and says what each computes). N tokens, E experts, k per token, M = N·k.
// Activations are bf16, router weights / probabilities fp32, indices and offsets int32.
//
//   router_topk_*: one warp per token; each lane holds up to kMaxExpertsPerLane of the E values.
//       Top-k by k warp arg-max rounds (ties: the lower expert, as the CPU reference).
//   moe_dispatch: a stable counting sort without any host synchronisation, in three kernels:
//       per chunk of kDispatchChunk assignments a shared-memory histogram; one block scans the
//       chunk counts per expert and the expert totals (→ offsets); per chunk each assignment's
//       rank among the chunk's earlier assignments of its expert (__match_any_sync within a warp,
//       per-warp counts across warps) gives its sorted row. Deterministic.
//   moe_permute / moe_permute_backward / moe_unpermute(_backward): row copies and weighted row
//       sums, fp32 accumulation, one block per token (or sorted row), 8-wide bf16 vectors.
//   router_statistics: one block per expert, a fixed-order tree sum over tokens (deterministic).
// Sizes: E ≤ kMaxExperts, k ≤ kMaxTopK, H a multiple of 8 (the binders check).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

inline constexpr int kMaxExpertsPerLane = 16;
inline constexpr int kMaxExperts = 32 * kMaxExpertsPerLane;  // 512
inline constexpr int kMaxTopK = 16;
inline constexpr int kDispatchChunk = 512;

struct RouterShape {
  int64_t tokens = 0;
  int experts = 0;
  int top_k = 0;
  bool normalize = false;
};

void router_topk_forward(const __nv_bfloat16* logits, const RouterShape& shape, float* weights, int32_t* indices,
                         float* probs, cudaStream_t stream);
// d_probs may be null.
void router_topk_backward(const float* d_weights, const float* d_probs, const float* probs, const int32_t* indices,
                          const float* weights, const RouterShape& shape, __nv_bfloat16* d_logits, cudaStream_t stream);

// Scratch of moe_dispatch: int32 counts for every (chunk, expert).
int64_t moe_dispatch_scratch_elements(int64_t assignments, int experts);
void moe_dispatch(const int32_t* indices, int64_t assignments, int experts, int32_t* order, int32_t* position,
                  int32_t* offsets, int32_t* scratch, cudaStream_t stream);

void moe_permute(const __nv_bfloat16* x, const int32_t* order, int64_t assignments, int top_k, int64_t width,
                 __nv_bfloat16* out, cudaStream_t stream);
void moe_permute_backward(const __nv_bfloat16* d_out, const int32_t* position, int64_t tokens, int top_k,
                          int64_t width, __nv_bfloat16* d_x, cudaStream_t stream);
void moe_unpermute(const __nv_bfloat16* y, const float* weights, const int32_t* position, int64_t tokens, int top_k,
                   int64_t width, __nv_bfloat16* out, cudaStream_t stream);
void moe_unpermute_backward(const __nv_bfloat16* d_out, const __nv_bfloat16* y, const float* weights,
                            const int32_t* position, int64_t tokens, int top_k, int64_t width, __nv_bfloat16* d_y,
                            float* d_weights, cudaStream_t stream);

void router_statistics(const float* probs, const int32_t* indices, const RouterShape& shape, float* probability_sum,
                       float* counts, cudaStream_t stream);
void router_statistics_backward(const float* d_probability_sum, int64_t tokens, int experts, float* d_probs,
                                cudaStream_t stream);
// out[0] = scale · Σ_e counts_e · probability_sum_e; backward: d_sum = scale · d_loss[0] · counts.
void router_aux_loss(const float* probability_sum, const float* counts, int experts, float scale, float* out,
                     cudaStream_t stream);
void router_aux_loss_backward(const float* d_loss, const float* counts, int experts, float scale,
                              float* d_probability_sum, cudaStream_t stream);

// out = base + sigmoid(gate) · x over rows of `width` (gate one value per row), and its backward.
void sigmoid_gated_add(const __nv_bfloat16* base, const __nv_bfloat16* x, const __nv_bfloat16* gate, int64_t rows,
                       int64_t width, __nv_bfloat16* out, cudaStream_t stream);
void sigmoid_gated_add_backward(const __nv_bfloat16* d_out, const __nv_bfloat16* x, const __nv_bfloat16* gate,
                                int64_t rows, int64_t width, __nv_bfloat16* d_x, __nv_bfloat16* d_gate,
                                cudaStream_t stream);

}  // namespace surogate::cuda
