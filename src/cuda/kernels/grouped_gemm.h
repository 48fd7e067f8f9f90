// Grouped bf16 GEMMs over the experts of an MoE layer: one launch computes every expert's product
// over its own range of expert-sorted rows, with the ranges read on the device from the offsets
// moe_dispatch wrote (cuda/kernels/moe_routing.h). Nothing is sized on the host, so a step can be
// captured in a CUDA graph and no expert loop of launches exists.
//
// Implementation: CUTLASS's SM90 pointer-array grouped GEMM (TMA, warp-specialised cooperative
// WGMMA, fp32 accumulation), headers from PyPI's nvidia-cutlass at build time. A small kernel
// turns the offsets into the per-expert problem sizes and operand pointers before each launch;
// strides are fixed and written once. Experts without rows are empty problems (no tiles).
//
// The three products of expert_linear (ops/expert_linear.h), W stacked [E, out, in]:
//   Forward         y[r]  = x[r] · W_eᵀ        x [M, in],  y [M, out]
//   BackwardInput   dx[r] = dy[r] · W_e        dy [M, out], dx [M, in]
//   BackwardWeight  dW_e  = dy_eᵀ · x_e        (beta 1: added to dW, the persistent gradient)
// Requires an SM90 GPU (H100 / H200) and in, out multiples of 8 (16-byte TMA rows).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

namespace surogate::cuda {

enum class GroupedGemmKind { Forward, BackwardInput, BackwardWeight };

// Whether this build and the current device run the grouped GEMMs (compiled for sm_90a, SM 9.0).
bool grouped_gemm_supported();

class GroupedGemm {
public:
  // Allocates the per-expert argument arrays and prepares the kernel (host work, at bind time).
  // `accumulate` (BackwardWeight only): add into d_weight (beta 1) instead of overwriting it.
  GroupedGemm(GroupedGemmKind kind, int experts, int64_t out_features, int64_t in_features, bool accumulate = false);
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  // Forward: run(offsets, x, weight, y); BackwardInput: run(offsets, dy, weight, dx);
  // BackwardWeight: run(offsets, dy, x, d_weight) (overwritten, experts without rows zeroed, unless
  // accumulating). Enqueues work on `stream` only.
  void run(const int32_t* offsets, const __nv_bfloat16* first, const __nv_bfloat16* second, __nv_bfloat16* out,
           cudaStream_t stream);

  struct Impl;  // the CUTLASS kernel of one kind (grouped_gemm.cu)

private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace surogate::cuda
