// Shared cuBLASLt plan pieces; see cublaslt_plan.h.
#include "cuda/cublaslt_plan.h"

#include <algorithm>
#include <utility>

#include "cuda/cuda_check.h"

namespace surogate::cuda {

CublasLtPlan::~CublasLtPlan() {
  if (output) cublasLtMatrixLayoutDestroy(output);
  if (second) cublasLtMatrixLayoutDestroy(second);
  if (first) cublasLtMatrixLayoutDestroy(first);
  if (operation) cublasLtMatmulDescDestroy(operation);
}

uint32_t pointer_alignment(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

bool choose_algorithm(cublasLtHandle_t handle, CublasLtPlan& plan, size_t workspace_bytes,
                      const CublasLtAlignments& alignments, int rank) {
  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> values[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignments.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignments.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignments.c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignments.d}};
  for (const auto& [attribute, value] : values) {
    if (status == CUBLAS_STATUS_SUCCESS) status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value));
  }
  cublasLtMatmulHeuristicResult_t results[16]{};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle, plan.operation, plan.first, plan.second, plan.output, plan.output,
                                            preference, std::min(rank + 1, 16), results, &found);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  CUBLAS_CHECK(status);
  if (found == 0) return false;
  plan.algorithm = results[std::min(rank, found - 1)].algo;
  return true;
}

}  // namespace surogate::cuda
