// See gradient_accumulate.h. Memory-bound: one block per chunk of a tensor, 16-bit read,
// accumulator read-modify-write, 16-bit zero, four elements at a time where aligned.
#include "cuda/kernels/gradient_accumulate.h"

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda {
namespace {

__device__ __forceinline__ void add_into(float& accumulator, float gradient) { accumulator += gradient; }
__device__ __forceinline__ void add_into(__nv_bfloat16& accumulator, float gradient) {
  accumulator = __float2bfloat16(__bfloat162float(accumulator) + gradient);
}

// add_into, or with kOverwrite the same sum with a zero accumulator, which is never read.
template <bool kOverwrite, typename Accumulator>
__device__ __forceinline__ void add_or_store(Accumulator& accumulator, float gradient) {
  if constexpr (kOverwrite) {
    Accumulator zero;
    if constexpr (sizeof(Accumulator) == 4) zero = 0.0f;
    else zero = __float2bfloat16(0.0f);
    add_into(zero, gradient);
    accumulator = zero;
  } else {
    add_into(accumulator, gradient);
  }
}

constexpr int kAccumulateThreads = 256;

// Four elements at a time where both pointers allow it: the gradient 8 bytes (4 × 16-bit), the
// accumulator 16 bytes (fp32) or 8 (bf16); each element exactly as add_into.
template <bool kOverwrite, typename Gradient, typename Accumulator>
__device__ __forceinline__ void add_four(Gradient* gradient, Accumulator* accumulator) {
  const uint2 gradient_bits = *reinterpret_cast<const uint2*>(gradient);
  const Gradient* g = reinterpret_cast<const Gradient*>(&gradient_bits);
  if constexpr (sizeof(Accumulator) == 4) {
    float4 sum = kOverwrite ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : *reinterpret_cast<const float4*>(accumulator);
    sum.x += surogate::cuda::kernels::to_float(g[0]);
    sum.y += surogate::cuda::kernels::to_float(g[1]);
    sum.z += surogate::cuda::kernels::to_float(g[2]);
    sum.w += surogate::cuda::kernels::to_float(g[3]);
    *reinterpret_cast<float4*>(accumulator) = sum;
  } else {
    uint2 sum_bits = kOverwrite ? make_uint2(0u, 0u) : *reinterpret_cast<const uint2*>(accumulator);  // bf16 +0 is 0x0000
    Accumulator* a = reinterpret_cast<Accumulator*>(&sum_bits);
    for (int k = 0; k < 4; ++k) add_into(a[k], surogate::cuda::kernels::to_float(g[k]));
    *reinterpret_cast<uint2*>(accumulator) = sum_bits;
  }
  *reinterpret_cast<uint2*>(gradient) = make_uint2(0u, 0u);
}

// One block per chunk of kAccumulateChunk elements of tensors [first, end): the chunk's tensor is
// the last t with chunk_starts[t] <= the chunk (a tensor of no elements has no chunks).
template <bool kOverwrite, typename Gradient, typename Accumulator>
__global__ void accumulate_kernel(Gradient* const* gradients, Accumulator* const* accumulators,
                                  const int64_t* counts, const int64_t* chunk_starts, int first, int end) {
  const int64_t chunk = chunk_starts[first] + blockIdx.x;
  int low = first, high = end - 1;
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (chunk_starts[middle] <= chunk) low = middle;
    else high = middle - 1;
  }
  const int64_t begin = (chunk - chunk_starts[low]) * kAccumulateChunk;
  const int64_t count = min(kAccumulateChunk, counts[low] - begin);
  Gradient* gradient = gradients[low] + begin;
  Accumulator* accumulator = accumulators[low] + begin;
  const Gradient zero = surogate::cuda::kernels::from_float<Gradient>(0.0f);
  const bool vectors = reinterpret_cast<uintptr_t>(gradient) % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(accumulator) % (4 * sizeof(Accumulator)) == 0;
  int64_t i = 0;
  if (vectors) {
    for (i = 4 * threadIdx.x; i + 4 <= count; i += 4 * kAccumulateThreads) add_four<kOverwrite>(gradient + i, accumulator + i);
    i = count / 4 * 4;  // the tail, at most 3 elements, element by element below
  }
  for (int64_t j = i + threadIdx.x; j < count; j += kAccumulateThreads) {
    add_or_store<kOverwrite>(accumulator[j], surogate::cuda::kernels::to_float(gradient[j]));
    gradient[j] = zero;
  }
}

__device__ __forceinline__ float widen(float value) { return value; }
__device__ __forceinline__ float widen(__nv_bfloat16 value) { return __bfloat162float(value); }

template <typename Accumulator>
__global__ void add_reduced_kernel(const Accumulator* values, Accumulator* accumulators, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    add_into(accumulators[i], widen(values[i]));
  }
}

template <typename Accumulator>
void launch_add_reduced(const Accumulator* values, Accumulator* accumulators, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const int64_t blocks = (count + 255) / 256;
  add_reduced_kernel<<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), 256, 0, stream>>>(values, accumulators,
                                                                                              count);
  CUDA_CHECK_LAUNCH();
}

template <typename Gradient, typename Accumulator>
void launch(Gradient* const* gradients, Accumulator* const* accumulators, const GradientCounts& counts, size_t first,
            size_t end, cudaStream_t stream, bool overwrite) {
  const int64_t chunks = counts.chunks(first, end);
  if (chunks == 0) return;
  // gridDim.x holds up to 2^31 − 1 blocks: 8.8e12 elements.
  auto kernel = overwrite ? accumulate_kernel<true, Gradient, Accumulator> : accumulate_kernel<false, Gradient, Accumulator>;
  kernel<<<static_cast<unsigned>(chunks), kAccumulateThreads, 0, stream>>>(
      gradients, accumulators, counts.counts(), counts.chunk_starts(), static_cast<int>(first), static_cast<int>(end));
  CUDA_CHECK_LAUNCH();
}

}  // namespace

GradientCounts::GradientCounts(const std::vector<int64_t>& counts) : host_chunk_starts_{0} {
  for (int64_t count : counts) {
    host_chunk_starts_.push_back(host_chunk_starts_.back() + (count + kAccumulateChunk - 1) / kAccumulateChunk);
  }
  counts_ = cuda::to_device(counts);
  chunk_starts_ = cuda::to_device(host_chunk_starts_);
}

void accumulate_bf16_gradients(__nv_bfloat16* const* gradients, float* const* accumulators, const GradientCounts& counts,
                               size_t first, size_t end, cudaStream_t stream, bool overwrite) {
  launch(gradients, accumulators, counts, first, end, stream, overwrite);
}

void accumulate_bf16_gradients(__nv_bfloat16* const* gradients, __nv_bfloat16* const* accumulators,
                               const GradientCounts& counts, size_t first, size_t end, cudaStream_t stream,
                               bool overwrite) {
  launch(gradients, accumulators, counts, first, end, stream, overwrite);
}

void accumulate_fp16_gradients(__half* const* gradients, float* const* accumulators, const GradientCounts& counts,
                               size_t first, size_t end, cudaStream_t stream, bool overwrite) {
  launch(gradients, accumulators, counts, first, end, stream, overwrite);
}

void add_reduced_gradients(const float* values, float* accumulators, int64_t count, cudaStream_t stream) {
  launch_add_reduced(values, accumulators, count, stream);
}

void add_reduced_gradients(const __nv_bfloat16* values, __nv_bfloat16* accumulators, int64_t count,
                           cudaStream_t stream) {
  launch_add_reduced(values, accumulators, count, stream);
}

}  // namespace surogate::cuda
