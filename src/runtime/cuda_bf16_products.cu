// bf16 mul, broadcast and sum; see runtime/cuda_bf16_products.h.
#include "runtime/cuda_bf16_products.h"

#include "cuda/cuda_check.h"
#include "runtime/cuda_launch.cuh"

namespace surogate::runtime::cuda_kernels {
namespace {

constexpr int kSumThreads = 1024;

struct MulOp {
  const __nv_bfloat16* a; const __nv_bfloat16* b; __nv_bfloat16* out;
  __device__ void operator()(int64_t i) const {
    out[i] = __float2bfloat16_rn(__fmul_rn(__bfloat162float(a[i]), __bfloat162float(b[i])));
  }
};
struct BroadcastOp {
  const __nv_bfloat16* scalar; __nv_bfloat16* out;
  __device__ void operator()(int64_t i) const { out[i] = *scalar; }
};

// One block: each thread sums a strided slice in double, then a fixed shared-memory tree.
__global__ void sum_kernel(const __nv_bfloat16* x, __nv_bfloat16* out, int64_t count) {
  __shared__ double partial[kSumThreads];
  double total = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) total += static_cast<double>(__bfloat162float(x[i]));
  partial[threadIdx.x] = total;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = __float2bfloat16_rn(static_cast<float>(partial[0]));
}

}  // namespace

void mul_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int64_t count, cudaStream_t stream) {
  launch(MulOp{a, b, out}, count, stream);
}
void broadcast_bf16(const __nv_bfloat16* scalar, __nv_bfloat16* out, int64_t count, cudaStream_t stream) {
  launch(BroadcastOp{scalar, out}, count, stream);
}
void sum_bf16(const __nv_bfloat16* x, __nv_bfloat16* out, int64_t count, cudaStream_t stream) {
  sum_kernel<<<1, kSumThreads, 0, stream>>>(x, out, count);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::runtime::cuda_kernels
