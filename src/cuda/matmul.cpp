// cuBLASLt plans: one operation descriptor, three matrix layouts (C, when it is a separate
// addend, shares D's) and one heuristic-chosen algorithm per MatmulShape, built on first use and reused (see matmul.h for the conventions).
#include "cuda/matmul.h"

#include <algorithm>

#include <fmt/format.h>

#include <cstdint>
#include <utility>

namespace surogate::cuda {

struct Matmul::Plan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t first = nullptr;   // cuBLAS "A": our B
  cublasLtMatrixLayout_t second = nullptr;  // cuBLAS "B": our A
  cublasLtMatrixLayout_t output = nullptr;
  cublasLtMatmulAlgo_t algorithm{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (output) cublasLtMatrixLayoutDestroy(output);
    if (second) cublasLtMatrixLayoutDestroy(second);
    if (first) cublasLtMatrixLayoutDestroy(first);
    if (operation) cublasLtMatmulDescDestroy(operation);
  }
};

Matmul::Matmul(size_t workspace_bytes, int heuristic_rank)
    : workspace_(workspace_bytes), heuristic_rank_(heuristic_rank) {
  CUDA_REQUIRE(heuristic_rank >= 0 && heuristic_rank < 16, "matmul: heuristic_rank must be in [0, 16)");
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Matmul::~Matmul() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

namespace {

// Largest power of two (up to 256) dividing the address.
uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace

const Matmul::Plan& Matmul::plan_for(const PlanKey& key) {
  const MatmulShape& shape = key.shape;
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;
  CUDA_REQUIRE(shape.m > 0 && shape.n > 0 && shape.k > 0, "matmul dimensions must be positive");

  auto plan = std::make_unique<Plan>();
  const cudaDataType_t output_type = shape.output == MatmulOutput::Float32 ? CUDA_R_32F : CUDA_R_16BF;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view: outᵀ[N, M] = op(B)ᵀ[N, K] · op(A)ᵀ[K, M].
  cublasOperation_t first_op = shape.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t second_op = shape.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_TRANSA, &first_op, sizeof(first_op)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_TRANSB, &second_op, sizeof(second_op)));
  if (shape.has_bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bias_type = CUDA_R_16BF;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                sizeof(bias_type)));
  }
  // B stored row-major [K, N] is column-major [N, K] (ld N); stored [N, K] it is column-major [K, N] (ld K).
  const uint64_t n = shape.n, m = shape.m, k = shape.k;
  if (shape.transpose_b) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->first, CUDA_R_16BF, k, n, k));
  } else {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->first, CUDA_R_16BF, n, k, n));
  }
  if (shape.transpose_a) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->second, CUDA_R_16BF, m, k, m));
  } else {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->second, CUDA_R_16BF, k, m, k));
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->output, output_type, n, m, n));

  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  size_t workspace_bytes = workspace_.bytes();
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
  cublasLtMatmulHeuristicResult_t results[16]{};
  int found_count = 0;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignment_b},  // cuBLAS "A" is our B
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignment_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, shape.has_addend ? key.alignment_addend : key.alignment_out},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignment_out}};
  for (const auto& [attribute, value] : alignments) {
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value));
  }
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->operation, plan->first, plan->second, plan->output,
                                            plan->output, preference, heuristic_rank_ + 1, results, &found_count);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  CUBLAS_CHECK(status);
  if (found_count == 0) {
    throw CudaError(fmt::format("cuBLASLt has no algorithm for matmul M={} N={} K={} transpose_a={} transpose_b={}",
                                shape.m, shape.n, shape.k, shape.transpose_a, shape.transpose_b));
  }
  plan->algorithm = results[std::min(heuristic_rank_, found_count - 1)].algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void Matmul::run(const MatmulShape& shape, void* out, const __nv_bfloat16* a, const __nv_bfloat16* b,
                 const __nv_bfloat16* bias, cudaStream_t stream, float alpha, const void* addend) {
  CUDA_REQUIRE(!shape.has_bias || bias != nullptr, "matmul: has_bias without a bias pointer");
  CUDA_REQUIRE(shape.has_addend == (addend != nullptr), "matmul: an addend pointer exactly when has_addend");
  CUDA_REQUIRE(!(shape.has_addend && shape.accumulate), "matmul: has_addend and accumulate both set");
  CUDA_REQUIRE(addend != out, "matmul: the addend must not alias out (use accumulate)");
  const PlanKey key{shape, alignment_of(a), alignment_of(b), alignment_of(out),
                    shape.has_bias ? alignment_of(bias) : 0u, shape.has_addend ? alignment_of(addend) : 0u};
  const Plan& plan = plan_for(key);
  if (shape.has_bias) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  const float beta = shape.accumulate || shape.has_addend ? 1.0f : 0.0f;
  const void* c = shape.has_addend ? addend : out;  // C has D's layout and type
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan.operation, &alpha, b, plan.first, a, plan.second, &beta, c, plan.output,
                              out, plan.output, &plan.algorithm, workspace_.data(), workspace_.bytes(), stream));
}

}  // namespace surogate::cuda
