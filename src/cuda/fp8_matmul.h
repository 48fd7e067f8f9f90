// FP8 matrix products through cuBLASLt (Hopper / Ada tensor cores), in row-major terms:
//
//   out[M, N] = (a[M, K] · b[N, K]ᵀ) · a_scale_inv · b_scale_inv (+ bias[N]) (+ addend[M, N]) (+ out)
//
// a and b are FP8 codes, both K-major (the only layout FP8 tensor-core products take): b is
// E4M3 (a weight, or a weight's stored transpose), a is E4M3 (an activation) or E5M2 (a
// gradient). The scales are device pointers to one fp32 each (cuBLASLt's A / B scale pointers,
// read when the product runs: delayed scaling's values never round-trip through the host).
// Accumulation is fp32; out, bias and addend are bf16. fast_accumulation is cuBLASLt's
// CUBLASLT_MATMUL_DESC_FAST_ACCUM (partial sums not promoted to full fp32 each K-step: faster,
// what forward products usually use; gradients keep it off). accumulate adds the product to what
// out holds (beta = 1 with C = out: a weight gradient written into the persistent gradient).
// Plans are cached per shape and operand alignment as in cuda/matmul.h. Not thread-safe.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "cuda/device_buffer.h"

namespace surogate::cuda {

enum class Fp8Operand : uint8_t { E4M3, E5M2 };

struct Fp8MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  Fp8Operand a_format = Fp8Operand::E4M3;  // b is always E4M3
  bool has_bias = false;
  bool has_addend = false;
  bool fast_accumulation = false;
  bool accumulate = false;  // excludes has_addend

  auto key() const { return std::tie(m, n, k, a_format, has_bias, has_addend, fast_accumulation, accumulate); }
  bool operator<(const Fp8MatmulShape& other) const { return key() < other.key(); }
};

class Fp8Matmul {
public:
  explicit Fp8Matmul(size_t workspace_bytes = size_t{32} << 20);
  ~Fp8Matmul();
  Fp8Matmul(const Fp8Matmul&) = delete;
  Fp8Matmul& operator=(const Fp8Matmul&) = delete;

  void run(const Fp8MatmulShape& shape, __nv_bfloat16* out, const void* a, const float* a_scale_inv, const void* b,
           const float* b_scale_inv, const __nv_bfloat16* bias, const __nv_bfloat16* addend, cudaStream_t stream);

private:
  struct Plan;
  struct PlanKey {
    Fp8MatmulShape shape;
    uint32_t alignment_a = 0, alignment_b = 0, alignment_out = 0, alignment_addend = 0;
    auto key() const { return std::tuple_cat(shape.key(), std::tie(alignment_a, alignment_b, alignment_out, alignment_addend)); }
    bool operator<(const PlanKey& other) const { return key() < other.key(); }
  };
  const Plan& plan_for(const PlanKey& key);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<std::byte> workspace_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

}  // namespace surogate::cuda
