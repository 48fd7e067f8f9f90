// cuBLASLt plans: one operation descriptor, three matrix layouts (C, when it is a separate
// addend, shares D's) and one heuristic-chosen algorithm per MatmulShape, built on first use and reused (see matmul.h for the conventions).
#include "cuda/matmul.h"

#include <fmt/format.h>

#include "cuda/cublaslt_plan.h"

namespace surogate::cuda {

struct Matmul::Plan : CublasLtPlan {};

Matmul::Matmul(size_t workspace_bytes, int heuristic_rank)
    : workspace_(workspace_bytes), heuristic_rank_(heuristic_rank) {
  CUDA_REQUIRE(heuristic_rank >= 0 && heuristic_rank < 16, "matmul: heuristic_rank must be in [0, 16)");
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Matmul::~Matmul() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

const Matmul::Plan& Matmul::plan_for(const PlanKey& key) {
  const MatmulShape& shape = key.shape;
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;
  CUDA_REQUIRE(shape.m > 0 && shape.n > 0 && shape.k > 0, "matmul dimensions must be positive");

  auto plan = std::make_unique<Plan>();
  const cudaDataType_t output_type = shape.output == MatmulOutput::Float32 ? CUDA_R_32F : key.input;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view: outᵀ[N, M] = op(B)ᵀ[N, K] · op(A)ᵀ[K, M].
  cublasOperation_t first_op = shape.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t second_op = shape.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_TRANSA, &first_op, sizeof(first_op)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_TRANSB, &second_op, sizeof(second_op)));
  if (shape.has_bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bias_type = key.input;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                sizeof(bias_type)));
  }
  // B stored row-major [K, N] is column-major [N, K] (ld N); stored [N, K] it is column-major [K, N] (ld K).
  const uint64_t n = shape.n, m = shape.m, k = shape.k;
  if (shape.transpose_b) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->first, key.input, k, n, k));
  } else {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->first, key.input, n, k, n));
  }
  if (shape.transpose_a) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->second, key.input, m, k, m));
  } else {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->second, key.input, k, m, k));
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->output, output_type, n, m, n));

  // cuBLAS "A" is our B.
  const CublasLtAlignments alignments{key.alignment_b, key.alignment_a,
                                      shape.has_addend ? key.alignment_addend : key.alignment_out, key.alignment_out};
  if (!choose_algorithm(handle_, *plan, workspace_.bytes(), alignments, heuristic_rank_)) {
    throw CudaError(fmt::format("cuBLASLt has no algorithm for matmul M={} N={} K={} transpose_a={} transpose_b={}",
                                shape.m, shape.n, shape.k, shape.transpose_a, shape.transpose_b));
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void Matmul::run_typed(cudaDataType_t input, const MatmulShape& shape, void* out, const void* a, const void* b,
                       const void* bias, cudaStream_t stream, float alpha, const void* addend) {
  CUDA_REQUIRE(!shape.has_bias || bias != nullptr, "matmul: has_bias without a bias pointer");
  CUDA_REQUIRE(shape.has_addend == (addend != nullptr), "matmul: an addend pointer exactly when has_addend");
  CUDA_REQUIRE(!(shape.has_addend && shape.accumulate), "matmul: has_addend and accumulate both set");
  CUDA_REQUIRE(addend != out, "matmul: the addend must not alias out (use accumulate)");
  const PlanKey key{shape, input, pointer_alignment(a), pointer_alignment(b), pointer_alignment(out),
                    shape.has_bias ? pointer_alignment(bias) : 0u, shape.has_addend ? pointer_alignment(addend) : 0u};
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
