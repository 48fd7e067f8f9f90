// bf16 or fp16 matrix products through cuBLASLt, in row-major terms.
//
//   out[M, N] = alpha * op(A) · op(B) (+ bias[N]) (+ out when accumulate) (+ addend when has_addend)
//
// A is stored row-major [M, K] (or [K, M] when transpose_a), B row-major [K, N] (or [N, K] when
// transpose_b); A, B (and the bias) are all bf16 or all fp16 (CUDA_R_16BF / CUDA_R_16F, picked by
// the overload of run()); accumulation is fp32; out is the inputs' 16-bit type or fp32. The three
// products of a linear layer
// y = x·Wᵀ with W stored [N, K] as in PyTorch:
//   forward      y[M,N]  = x[M,K]  · W[N,K]ᵀ   transpose_b = true
//   input grad   dx[M,K] = dy[M,N] · W[N,K]     (no transposes; K and N swap roles)
//   weight grad  dW[N,K] = dy[M,N]ᵀ · x[M,K]    transpose_a = true, fp32 out, beta = 1 to accumulate
// has_addend reads a separate [M, N] tensor of out's type as cuBLASLt's C (beta = 1, C ≠ D): the
// product plus an existing tensor in one pass (linear_add, linear_backward_input_add), rounded once.
//
// cuBLASLt is column-major, so the call computes outᵀ = op(B)ᵀ·op(A)ᵀ: B becomes its first
// operand. Descriptors, layouts and the heuristic's chosen algorithm are cached per shape
// (first use of a shape asks the heuristic once; later calls reuse it), the handle and the
// workspace belong to the Matmul object. One Matmul per stream/thread; it is not thread-safe.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "cuda/device_buffer.h"

namespace surogate::cuda {

// Input: the inputs' 16-bit type (bf16 or fp16).
enum class MatmulOutput { Input, Float32 };

struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false;
  bool transpose_b = false;
  MatmulOutput output = MatmulOutput::Input;
  bool has_bias = false;       // bias is [N] in the inputs' type, added to every row (epilogue)
  bool accumulate = false;     // beta = 1: out += product (for gradient accumulation)
  bool has_addend = false;     // beta = 1 with C = addend [M, N] (out's dtype), not out; excludes accumulate

  auto key() const { return std::tie(m, n, k, transpose_a, transpose_b, output, has_bias, accumulate, has_addend); }
  bool operator<(const MatmulShape& other) const { return key() < other.key(); }
};

class Matmul {
public:
  // heuristic_rank picks which of cuBLASLt's ranked algorithms a new plan uses (0: its first
  // choice; the last one found when it offers fewer); the measurement tool compares them.
  explicit Matmul(size_t workspace_bytes = size_t{32} << 20, int heuristic_rank = 0);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // `out` is of the inputs' type or float* as shape.output says. `bias` may be null unless has_bias;
  // `addend` (out's dtype, [M, N], not aliasing out) must be given exactly when has_addend.
  void run(const MatmulShape& shape, void* out, const __nv_bfloat16* a, const __nv_bfloat16* b,
           const __nv_bfloat16* bias, cudaStream_t stream, float alpha = 1.0f, const void* addend = nullptr) {
    run_typed(CUDA_R_16BF, shape, out, a, b, bias, stream, alpha, addend);
  }
  void run(const MatmulShape& shape, void* out, const __half* a, const __half* b, const __half* bias,
           cudaStream_t stream, float alpha = 1.0f, const void* addend = nullptr) {
    run_typed(CUDA_R_16F, shape, out, a, b, bias, stream, alpha, addend);
  }

  size_t cached_plans() const { return plans_.size(); }

private:
  struct Plan;
  // A plan depends on the shape and on the pointers' alignments (cuBLASLt assumes 256-byte
  // aligned operands unless told otherwise; chunked callers pass offset pointers).
  void run_typed(cudaDataType_t input, const MatmulShape& shape, void* out, const void* a, const void* b,
                 const void* bias, cudaStream_t stream, float alpha, const void* addend);
  struct PlanKey {
    MatmulShape shape;
    cudaDataType_t input = CUDA_R_16BF;
    uint32_t alignment_a = 0, alignment_b = 0, alignment_out = 0, alignment_bias = 0, alignment_addend = 0;
    auto key() const {
      return std::tuple_cat(shape.key(),
                            std::tie(input, alignment_a, alignment_b, alignment_out, alignment_bias, alignment_addend));
    }
    bool operator<(const PlanKey& other) const { return key() < other.key(); }
  };
  const Plan& plan_for(const PlanKey& key);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<std::byte> workspace_;
  int heuristic_rank_ = 0;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

}  // namespace surogate::cuda
