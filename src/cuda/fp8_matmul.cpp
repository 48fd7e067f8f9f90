// cuBLASLt FP8 plans; see fp8_matmul.h.
#include "cuda/fp8_matmul.h"

#include <fmt/format.h>

#include <utility>

#include "cuda/cublaslt_plan.h"
#include "cuda/cuda_check.h"

namespace surogate::cuda {

struct Fp8Matmul::Plan : CublasLtPlan {};  // cuBLAS "A" is our b (the E4M3 weight operand), "B" our a

Fp8Matmul::Fp8Matmul(size_t workspace_bytes) : workspace_(workspace_bytes) { CUBLAS_CHECK(cublasLtCreate(&handle_)); }

Fp8Matmul::~Fp8Matmul() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

namespace {

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

  const CublasLtAlignments alignments{key.alignment_b, key.alignment_a,
                                      shape.has_addend ? key.alignment_addend : key.alignment_out, key.alignment_out};
  if (!choose_algorithm(handle_, *plan, workspace_.bytes(), alignments)) {
    throw CudaError(fmt::format("cuBLASLt has no FP8 algorithm for M={} N={} K={} (a {}, bias {}, addend {})", shape.m,
                                shape.n, shape.k, shape.a_format == Fp8Operand::E4M3 ? "E4M3" : "E5M2", shape.has_bias,
                                shape.has_addend));
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void Fp8Matmul::run(const Fp8MatmulShape& shape, __nv_bfloat16* out, const void* a, const float* a_scale_inv,
                    const void* b, const float* b_scale_inv, const __nv_bfloat16* bias, const __nv_bfloat16* addend,
                    cudaStream_t stream) {
  CUDA_REQUIRE(!shape.has_bias || bias != nullptr, "fp8 matmul: has_bias without a bias pointer");
  CUDA_REQUIRE(shape.has_addend == (addend != nullptr), "fp8 matmul: an addend pointer exactly when has_addend");
  CUDA_REQUIRE(!(shape.has_addend && shape.accumulate), "fp8 matmul: has_addend and accumulate both set");
  CUDA_REQUIRE(addend == nullptr || static_cast<const void*>(addend) != static_cast<const void*>(out),
               "fp8 matmul: the addend must not alias out");
  const PlanKey key{shape, pointer_alignment(a), pointer_alignment(b), pointer_alignment(out), shape.has_addend ? pointer_alignment(addend) : 0u};
  const Plan& plan = plan_for(key);
  // cuBLAS's A is our b, its B our a: their scale pointers follow.
  set(plan.operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b_scale_inv);
  set(plan.operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a_scale_inv);
  if (shape.has_bias) set(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const float alpha = 1.0f, beta = shape.has_addend || shape.accumulate ? 1.0f : 0.0f;
  const void* c = shape.has_addend ? static_cast<const void*>(addend) : static_cast<const void*>(out);
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan.operation, &alpha, b, plan.first, a, plan.second, &beta, c, plan.output, out,
                              plan.output, &plan.algorithm, workspace_.data(), workspace_.bytes(), stream));
}

}  // namespace surogate::cuda
