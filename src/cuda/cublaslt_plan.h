// What the bf16 and FP8 cuBLASLt wrappers (cuda/matmul.h, cuda/fp8_matmul.h) share: a plan's
// descriptors (one operation, the layouts of cuBLAS's A, B and D — C, when it is a separate addend,
// shares D's) owned and destroyed together, the alignment rule for pointers, and the heuristic
// query that picks an algorithm for them.
#pragma once

#include <cublasLt.h>

#include <cstdint>

namespace surogate::cuda {

struct CublasLtPlan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t first = nullptr;   // cuBLAS "A"
  cublasLtMatrixLayout_t second = nullptr;  // cuBLAS "B"
  cublasLtMatrixLayout_t output = nullptr;  // D (and C)
  cublasLtMatmulAlgo_t algorithm{};

  CublasLtPlan() = default;
  CublasLtPlan(const CublasLtPlan&) = delete;
  CublasLtPlan& operator=(const CublasLtPlan&) = delete;
  ~CublasLtPlan();
};

// Largest power of two (up to 256) dividing the address: cuBLASLt assumes 256-byte aligned operands
// unless told otherwise, and chunked callers pass offset pointers.
uint32_t pointer_alignment(const void* pointer);

// The minimum alignments (bytes) of cuBLAS's A, B, C and D a plan is chosen for.
struct CublasLtAlignments {
  uint32_t a = 256, b = 256, c = 256, d = 256;
};

// Sets plan.algorithm to the heuristic's choice number `rank` (0: its first; the last one found when
// it offers fewer) for the plan's descriptors, the workspace size and the alignments. Returns false
// when cuBLASLt has no algorithm for them; cuBLAS errors throw (CudaError).
bool choose_algorithm(cublasLtHandle_t handle, CublasLtPlan& plan, size_t workspace_bytes,
                      const CublasLtAlignments& alignments, int rank = 0);

}  // namespace surogate::cuda
