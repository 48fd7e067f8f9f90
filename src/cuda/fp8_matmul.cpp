// cuBLASLt FP8 plans; see fp8_matmul.h.
#include "cuda/fp8_matmul.h"

#include <fmt/format.h>

#include <utility>

#include "cuda/cuda_check.h"

namespace surogate::cuda {

struct Fp8Matmul::Plan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t first = nullptr;   // cuBLAS "A": our b (the E4M3 weight operand)
  cublasLtMatrixLayout_t second = nullptr;  // cuBLAS "B": our a
  cublasLtMatrixLayout_t output = nullptr;  // D, and C when there is an addend (bf16 [N, M] column-major)
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

Fp8Matmul::Fp8Matmul(size_t workspace_bytes) : workspace_(workspace_bytes) { CUBLAS_CHECK(cublasLtCreate(&handle_)); }

Fp8Matmul::~Fp8Matmul() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

namespace {

uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

template <typename T>
void set(cublasLtMatmulDesc_t operation, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation, attribute, &value, sizeof(value)));
}

}  // namespace

const Fp8Matmul::Plan& Fp8Matmul::plan_for(const PlanKey& key) {
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;
  const Fp8MatmulShape& shape = key.shape;
  CUDA_REQUIRE(shape.m > 0 && shape.n > 0 && shape.k > 0, "fp8 matmul dimensions must be positive");
  CUDA_REQUIRE(shape.k % 16 == 0 && shape.n % 16 == 0,
               "fp8 matmul: K and N must be multiples of 16 (cuBLASLt's FP8 layouts)");
  auto plan = std::make_unique<Plan>();
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major: outᵀ[N, M] = b[N, K] · aᵀ[K, M] — cuBLAS's A = b transposed (stored [N, K] row-major
  // is column-major [K, N]), B = a not transposed: the "TN" layout FP8 requires.
  set(plan->operation, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(plan->operation, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  set<int8_t>(plan->operation, CUBLASLT_MATMUL_DESC_FAST_ACCUM, shape.fast_accumulation ? 1 : 0);
  if (shape.has_bias) {
    set(plan->operation, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set(plan->operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_16BF);
  }
  const uint64_t n = shape.n, m = shape.m, k = shape.k;
  const cudaDataType_t a_type = shape.a_format == Fp8Operand::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->first, CUDA_R_8F_E4M3, k, n, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->second, a_type, k, m, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->output, CUDA_R_16BF, n, m, n));

  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  size_t workspace_bytes = workspace_.bytes();
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignment_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignment_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, shape.has_addend ? key.alignment_addend : key.alignment_out},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignment_out}};
  for (const auto& [attribute, value] : alignments) {
    if (status == CUBLAS_STATUS_SUCCESS) status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->operation, plan->first, plan->second, plan->output,
                                            plan->output, preference, 1, &result, &found_count);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  CUBLAS_CHECK(status);
  if (found_count == 0) {
    throw CudaError(fmt::format("cuBLASLt has no FP8 algorithm for M={} N={} K={} (a {}, bias {}, addend {})", shape.m,
                                shape.n, shape.k, shape.a_format == Fp8Operand::E4M3 ? "E4M3" : "E5M2", shape.has_bias,
                                shape.has_addend));
  }
  plan->algorithm = result.algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void Fp8Matmul::run(const Fp8MatmulShape& shape, __nv_bfloat16* out, const void* a, const float* a_scale_inv,
                    const void* b, const float* b_scale_inv, const __nv_bfloat16* bias, const __nv_bfloat16* addend,
                    cudaStream_t stream) {
  CUDA_REQUIRE(!shape.has_bias || bias != nullptr, "fp8 matmul: has_bias without a bias pointer");
  CUDA_REQUIRE(shape.has_addend == (addend != nullptr), "fp8 matmul: an addend pointer exactly when has_addend");
  CUDA_REQUIRE(addend == nullptr || static_cast<const void*>(addend) != static_cast<const void*>(out),
               "fp8 matmul: the addend must not alias out");
  const PlanKey key{shape, alignment_of(a), alignment_of(b), alignment_of(out), shape.has_addend ? alignment_of(addend) : 0u};
  const Plan& plan = plan_for(key);
  // cuBLAS's A is our b, its B our a: their scale pointers follow.
  set(plan.operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b_scale_inv);
  set(plan.operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a_scale_inv);
  if (shape.has_bias) set(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const float alpha = 1.0f, beta = shape.has_addend ? 1.0f : 0.0f;
  const void* c = shape.has_addend ? static_cast<const void*>(addend) : static_cast<const void*>(out);
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan.operation, &alpha, b, plan.first, a, plan.second, &beta, c, plan.output, out,
                              plan.output, &plan.algorithm, workspace_.data(), workspace_.bytes(), stream));
}

}  // namespace surogate::cuda
