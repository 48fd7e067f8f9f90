// MoE routing kernels; see moe_routing.h.
#include "cuda/kernels/moe_routing.h"

#include <cuda_bf16.h>

#include <cmath>

#include "cuda/cuda_check.h"

namespace surogate::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = 256;
constexpr int kVector = 8;  // bf16 values per 16-byte vector

__device__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

int grid_for(int64_t count, int threads = kThreads) {
  const int64_t blocks = (count + threads - 1) / threads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

// ---- router top-k ----

__global__ void router_topk_forward_kernel(const bf16* logits, RouterShape shape, float* weights, int32_t* indices,
                                           float* probs) {
  const int lane = threadIdx.x % 32;
  const int64_t token = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (token >= shape.tokens) return;
  const int experts = shape.experts;
  const bf16* row = logits + token * experts;
  float value[kMaxExpertsPerLane];
  float max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    const int expert = lane + 32 * i;
    value[i] = expert < experts ? __bfloat162float(row[expert]) : -INFINITY;
    max = fmaxf(max, value[i]);
  }
  max = warp_max(max);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    value[i] = lane + 32 * i < experts ? expf(value[i] - max) : 0.0f;
    sum += value[i];
  }
  sum = warp_sum(sum);
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    const int expert = lane + 32 * i;
    if (expert < experts) {
      value[i] /= sum;
      probs[token * experts + expert] = value[i];
    } else {
      value[i] = -2.0f;  // never chosen
    }
  }
  float chosen_sum = 0.0f;
  float chosen_value[kMaxTopK];
  int chosen_index[kMaxTopK];
  for (int j = 0; j < shape.top_k; ++j) {
    float best = -1.0f;
    int best_index = 1 << 30;
#pragma unroll
    for (int i = 0; i < kMaxExpertsPerLane; ++i) {
      if (value[i] > best) {  // ascending expert order: the first of equals wins
        best = value[i];
        best_index = lane + 32 * i;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
      if (other > best || (other == best && other_index < best_index)) {
        best = other;
        best_index = other_index;
      }
    }
    if (best_index % 32 == lane) {
#pragma unroll
      for (int i = 0; i < kMaxExpertsPerLane; ++i) {
        if (lane + 32 * i == best_index) value[i] = -1.0f;  // taken
      }
    }
    if (j < kMaxTopK) {
      chosen_value[j] = best;
      chosen_index[j] = best_index;
    }
    chosen_sum += best;
  }
  if (lane == 0) {
    for (int j = 0; j < shape.top_k; ++j) {
      weights[token * shape.top_k + j] = shape.normalize ? chosen_value[j] / chosen_sum : chosen_value[j];
      indices[token * shape.top_k + j] = chosen_index[j];
    }
  }
}

__global__ void router_topk_backward_kernel(const float* d_weights, const float* d_probs, const float* probs,
                                            const int32_t* indices, const float* weights, RouterShape shape,
                                            bf16* d_logits) {
  const int lane = threadIdx.x % 32;
  const int64_t token = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (token >= shape.tokens) return;
  const int experts = shape.experts, top_k = shape.top_k;
  const float* p = probs + token * experts;
  float gradient[kMaxExpertsPerLane], probability[kMaxExpertsPerLane];
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    const int expert = lane + 32 * i;
    probability[i] = expert < experts ? p[expert] : 0.0f;
    gradient[i] = expert < experts && d_probs != nullptr ? d_probs[token * experts + expert] : 0.0f;
  }
  float weighted = 0.0f, chosen_sum = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    weighted += d_weights[token * top_k + j] * weights[token * top_k + j];
    chosen_sum += p[indices[token * top_k + j]];
  }
  for (int j = 0; j < top_k; ++j) {
    const int expert = indices[token * top_k + j];
    const float dw = d_weights[token * top_k + j];
    const float add = shape.normalize ? (dw - weighted) / chosen_sum : dw;
#pragma unroll
    for (int i = 0; i < kMaxExpertsPerLane; ++i) {
      if (lane + 32 * i == expert) gradient[i] += add;
    }
  }
  float dot = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) dot += gradient[i] * probability[i];
  dot = warp_sum(dot);
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    const int expert = lane + 32 * i;
    if (expert < experts) d_logits[token * experts + expert] = __float2bfloat16(probability[i] * (gradient[i] - dot));
  }
}

// ---- dispatch: stable counting sort by expert ----

constexpr int kDispatchWarps = kDispatchChunk / 32;

__global__ void dispatch_histogram_kernel(const int32_t* indices, int64_t assignments, int experts, int32_t* counts) {
  __shared__ int histogram[kMaxExperts];
  for (int e = threadIdx.x; e < experts; e += blockDim.x) histogram[e] = 0;
  __syncthreads();
  const int64_t a = static_cast<int64_t>(blockIdx.x) * kDispatchChunk + threadIdx.x;
  if (a < assignments) atomicAdd(&histogram[indices[a]], 1);
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) counts[static_cast<int64_t>(blockIdx.x) * experts + e] = histogram[e];
}

// One block: per expert, the chunk counts become each chunk's first sorted row of that expert.
__global__ void dispatch_scan_kernel(int32_t* counts, int64_t chunks, int experts, int64_t assignments, int32_t* offsets) {
  __shared__ int32_t totals[kMaxExperts];
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    int32_t running = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      const int32_t count = counts[c * experts + e];
      counts[c * experts + e] = running;
      running += count;
    }
    totals[e] = running;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t running = 0;
    for (int e = 0; e < experts; ++e) {
      const int32_t total = totals[e];
      totals[e] = running;
      offsets[e] = running;
      running += total;
    }
    offsets[experts] = static_cast<int32_t>(assignments);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    for (int64_t c = 0; c < chunks; ++c) counts[c * experts + e] += totals[e];
  }
}

__global__ void dispatch_scatter_kernel(const int32_t* indices, int64_t assignments, int experts, const int32_t* bases,
                                        int32_t* order, int32_t* position) {
  __shared__ int32_t warp_counts[kDispatchWarps][kMaxExperts];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < kDispatchWarps * experts; i += blockDim.x) warp_counts[i / experts][i % experts] = 0;
  __syncthreads();
  const int64_t a = static_cast<int64_t>(blockIdx.x) * kDispatchChunk + threadIdx.x;
  const bool valid = a < assignments;
  const int expert = valid ? indices[a] : -1;
  const unsigned same = __match_any_sync(0xffffffffu, expert);
  const int rank = __popc(same & ((1u << lane) - 1u));
  if (valid && rank == 0) warp_counts[warp][expert] = __popc(same);
  __syncthreads();
  if (!valid) return;
  int32_t row = bases[static_cast<int64_t>(blockIdx.x) * experts + expert] + rank;
  for (int w = 0; w < warp; ++w) row += warp_counts[w][expert];
  order[row] = static_cast<int32_t>(a);
  position[a] = row;
}

// ---- row movement ----

struct Vector {
  float value[kVector];
};

__device__ Vector load(const bf16* pointer) {
  const uint4 raw = *reinterpret_cast<const uint4*>(pointer);
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
  Vector v;
#pragma unroll
  for (int i = 0; i < kVector / 2; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    v.value[2 * i] = f.x;
    v.value[2 * i + 1] = f.y;
  }
  return v;
}

__device__ void store(bf16* pointer, const Vector& v) {
  uint4 raw;
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < kVector / 2; ++i) pairs[i] = __floats2bfloat162_rn(v.value[2 * i], v.value[2 * i + 1]);
  *reinterpret_cast<uint4*>(pointer) = raw;
}

__global__ void permute_kernel(const bf16* x, const int32_t* order, int64_t assignments, int top_k, int64_t width,
                               bf16* out) {
  const int64_t vectors = width / kVector, count = assignments * vectors;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / vectors, column = (i % vectors) * kVector;
    const int64_t token = order[row] / top_k;
    *reinterpret_cast<uint4*>(out + row * width + column) = *reinterpret_cast<const uint4*>(x + token * width + column);
  }
}

// out[t] = Σ_j scale_j · rows[position[t, j]], scale_j = weights[t, j] (or 1 without weights).
__global__ void gather_sum_kernel(const bf16* rows, const float* weights, const int32_t* position, int64_t tokens,
                                  int top_k, int64_t width, bf16* out) {
  const int64_t vectors = width / kVector, count = tokens * vectors;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t token = i / vectors, column = (i % vectors) * kVector;
    Vector sum{};
    for (int j = 0; j < top_k; ++j) {
      const float scale = weights != nullptr ? weights[token * top_k + j] : 1.0f;
      const Vector v = load(rows + static_cast<int64_t>(position[token * top_k + j]) * width + column);
#pragma unroll
      for (int c = 0; c < kVector; ++c) sum.value[c] += scale * v.value[c];
    }
    store(out + token * width + column, sum);
  }
}

__global__ void unpermute_backward_rows_kernel(const bf16* d_out, const float* weights, const int32_t* position,
                                               int64_t tokens, int top_k, int64_t width, bf16* d_y) {
  const int64_t vectors = width / kVector, count = tokens * top_k * vectors;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t assignment = i / vectors, column = (i % vectors) * kVector, token = assignment / top_k;
    Vector v = load(d_out + token * width + column);
    const float weight = weights[assignment];
#pragma unroll
    for (int c = 0; c < kVector; ++c) v.value[c] *= weight;
    store(d_y + static_cast<int64_t>(position[assignment]) * width + column, v);
  }
}

// One warp per assignment: d_weights[a] = <d_out[token], y[position[a]]>.
__global__ void unpermute_backward_weights_kernel(const bf16* d_out, const bf16* y, const int32_t* position,
                                                  int64_t assignments, int top_k, int64_t width, float* d_weights) {
  const int lane = threadIdx.x % 32;
  const int64_t assignment = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (assignment >= assignments) return;
  const bf16* gradient = d_out + (assignment / top_k) * width;
  const bf16* row = y + static_cast<int64_t>(position[assignment]) * width;
  float dot = 0.0f;
  for (int64_t column = lane * kVector; column < width; column += 32 * kVector) {
    const Vector a = load(gradient + column), b = load(row + column);
#pragma unroll
    for (int c = 0; c < kVector; ++c) dot += a.value[c] * b.value[c];
  }
  dot = warp_sum(dot);
  if (lane == 0) d_weights[assignment] = dot;
}

// ---- router loss statistics ----

__global__ void router_statistics_kernel(const float* probs, const int32_t* indices, RouterShape shape,
                                         float* probability_sum, float* counts) {
  __shared__ float sums[kThreads], hits[kThreads];
  const int expert = blockIdx.x;
  float sum = 0.0f, hit = 0.0f;
  for (int64_t t = threadIdx.x; t < shape.tokens; t += blockDim.x) {
    sum += probs[t * shape.experts + expert];
    for (int j = 0; j < shape.top_k; ++j) hit += indices[t * shape.top_k + j] == expert ? 1.0f : 0.0f;
  }
  sums[threadIdx.x] = sum;
  hits[threadIdx.x] = hit;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      sums[threadIdx.x] += sums[threadIdx.x + stride];
      hits[threadIdx.x] += hits[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    probability_sum[expert] = sums[0];
    counts[expert] = hits[0];
  }
}

__global__ void router_statistics_backward_kernel(const float* d_sum, int64_t count, int experts, float* d_probs) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    d_probs[i] = d_sum[i % experts];
  }
}

__global__ void router_aux_loss_kernel(const float* probability_sum, const float* counts, int experts, float scale,
                                       float* out) {
  float sum = 0.0f;
  for (int e = threadIdx.x; e < experts; e += 32) sum += counts[e] * probability_sum[e];
  sum = warp_sum(sum);
  if (threadIdx.x == 0) out[0] = scale * sum;
}

__global__ void router_aux_loss_backward_kernel(const float* d_loss, const float* counts, int experts, float scale,
                                                float* d_sum) {
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < experts; e += gridDim.x * blockDim.x) {
    d_sum[e] = scale * d_loss[0] * counts[e];
  }
}

// ---- shared expert gate ----

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void sigmoid_gated_add_kernel(const bf16* base, const bf16* x, const bf16* gate, int64_t rows,
                                         int64_t width, bf16* out) {
  const int64_t vectors = width / kVector, count = rows * vectors;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / vectors, offset = row * width + (i % vectors) * kVector;
    const float scale = sigmoid(__bfloat162float(gate[row]));
    Vector a = load(base + offset);
    const Vector b = load(x + offset);
#pragma unroll
    for (int c = 0; c < kVector; ++c) a.value[c] += scale * b.value[c];
    store(out + offset, a);
  }
}

// One warp per row: d_x = σ·d_out, d_gate = σ(1 − σ)·<d_out, x>.
__global__ void sigmoid_gated_add_backward_kernel(const bf16* d_out, const bf16* x, const bf16* gate, int64_t rows,
                                                  int64_t width, bf16* d_x, bf16* d_gate) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const float scale = sigmoid(__bfloat162float(gate[row]));
  float dot = 0.0f;
  for (int64_t column = lane * kVector; column < width; column += 32 * kVector) {
    const int64_t offset = row * width + column;
    Vector g = load(d_out + offset);
    const Vector v = load(x + offset);
#pragma unroll
    for (int c = 0; c < kVector; ++c) {
      dot += g.value[c] * v.value[c];
      g.value[c] *= scale;
    }
    store(d_x + offset, g);
  }
  dot = warp_sum(dot);
  if (lane == 0) d_gate[row] = __float2bfloat16(dot * scale * (1.0f - scale));
}

int warp_blocks(int64_t warps) { return static_cast<int>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }

}  // namespace

void router_topk_forward(const bf16* logits, const RouterShape& shape, float* weights, int32_t* indices, float* probs,
                         cudaStream_t stream) {
  if (shape.tokens == 0) return;
  router_topk_forward_kernel<<<warp_blocks(shape.tokens), 32 * kWarpsPerBlock, 0, stream>>>(logits, shape, weights,
                                                                                            indices, probs);
  CUDA_CHECK_LAUNCH();
}

void router_topk_backward(const float* d_weights, const float* d_probs, const float* probs, const int32_t* indices,
                          const float* weights, const RouterShape& shape, bf16* d_logits, cudaStream_t stream) {
  if (shape.tokens == 0) return;
  router_topk_backward_kernel<<<warp_blocks(shape.tokens), 32 * kWarpsPerBlock, 0, stream>>>(
      d_weights, d_probs, probs, indices, weights, shape, d_logits);
  CUDA_CHECK_LAUNCH();
}

int64_t moe_dispatch_scratch_elements(int64_t assignments, int experts) {
  return (assignments + kDispatchChunk - 1) / kDispatchChunk * experts;
}

void moe_dispatch(const int32_t* indices, int64_t assignments, int experts, int32_t* order, int32_t* position,
                  int32_t* offsets, int32_t* scratch, cudaStream_t stream) {
  const int64_t chunks = (assignments + kDispatchChunk - 1) / kDispatchChunk;
  if (chunks == 0) {
    CUDA_CHECK(cudaMemsetAsync(offsets, 0, sizeof(int32_t) * (experts + 1), stream));
    return;
  }
  dispatch_histogram_kernel<<<static_cast<unsigned>(chunks), kDispatchChunk, 0, stream>>>(indices, assignments,
                                                                                            experts, scratch);
  CUDA_CHECK_LAUNCH();
  dispatch_scan_kernel<<<1, kMaxExperts, 0, stream>>>(scratch, chunks, experts, assignments, offsets);
  CUDA_CHECK_LAUNCH();
  dispatch_scatter_kernel<<<static_cast<unsigned>(chunks), kDispatchChunk, 0, stream>>>(indices, assignments, experts,
                                                                                          scratch, order, position);
  CUDA_CHECK_LAUNCH();
}

void moe_permute(const bf16* x, const int32_t* order, int64_t assignments, int top_k, int64_t width, bf16* out,
                 cudaStream_t stream) {
  const int64_t count = assignments * (width / kVector);
  if (count == 0) return;
  permute_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, order, assignments, top_k, width, out);
  CUDA_CHECK_LAUNCH();
}

void moe_permute_backward(const bf16* d_out, const int32_t* position, int64_t tokens, int top_k, int64_t width,
                          bf16* d_x, cudaStream_t stream) {
  const int64_t count = tokens * (width / kVector);
  if (count == 0) return;
  gather_sum_kernel<<<grid_for(count), kThreads, 0, stream>>>(d_out, nullptr, position, tokens, top_k, width, d_x);
  CUDA_CHECK_LAUNCH();
}

void moe_unpermute(const bf16* y, const float* weights, const int32_t* position, int64_t tokens, int top_k,
                   int64_t width, bf16* out, cudaStream_t stream) {
  const int64_t count = tokens * (width / kVector);
  if (count == 0) return;
  gather_sum_kernel<<<grid_for(count), kThreads, 0, stream>>>(y, weights, position, tokens, top_k, width, out);
  CUDA_CHECK_LAUNCH();
}

void moe_unpermute_backward(const bf16* d_out, const bf16* y, const float* weights, const int32_t* position,
                            int64_t tokens, int top_k, int64_t width, bf16* d_y, float* d_weights, cudaStream_t stream) {
  const int64_t assignments = tokens * top_k, count = assignments * (width / kVector);
  if (count == 0) return;
  unpermute_backward_rows_kernel<<<grid_for(count), kThreads, 0, stream>>>(d_out, weights, position, tokens, top_k,
                                                                           width, d_y);
  CUDA_CHECK_LAUNCH();
  unpermute_backward_weights_kernel<<<warp_blocks(assignments), 32 * kWarpsPerBlock, 0, stream>>>(
      d_out, y, position, assignments, top_k, width, d_weights);
  CUDA_CHECK_LAUNCH();
}

void router_statistics(const float* probs, const int32_t* indices, const RouterShape& shape, float* probability_sum,
                       float* counts, cudaStream_t stream) {
  router_statistics_kernel<<<shape.experts, kThreads, 0, stream>>>(probs, indices, shape, probability_sum, counts);
  CUDA_CHECK_LAUNCH();
}

void router_statistics_backward(const float* d_probability_sum, int64_t tokens, int experts, float* d_probs,
                                cudaStream_t stream) {
  const int64_t count = tokens * experts;
  if (count == 0) return;
  router_statistics_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(d_probability_sum, count, experts, d_probs);
  CUDA_CHECK_LAUNCH();
}

void router_aux_loss(const float* probability_sum, const float* counts, int experts, float scale, float* out,
                     cudaStream_t stream) {
  router_aux_loss_kernel<<<1, 32, 0, stream>>>(probability_sum, counts, experts, scale, out);
  CUDA_CHECK_LAUNCH();
}

void router_aux_loss_backward(const float* d_loss, const float* counts, int experts, float scale, float* d_sum,
                              cudaStream_t stream) {
  router_aux_loss_backward_kernel<<<grid_for(experts), kThreads, 0, stream>>>(d_loss, counts, experts, scale, d_sum);
  CUDA_CHECK_LAUNCH();
}

void sigmoid_gated_add(const bf16* base, const bf16* x, const bf16* gate, int64_t rows, int64_t width, bf16* out,
                       cudaStream_t stream) {
  const int64_t count = rows * (width / kVector);
  if (count == 0) return;
  sigmoid_gated_add_kernel<<<grid_for(count), kThreads, 0, stream>>>(base, x, gate, rows, width, out);
  CUDA_CHECK_LAUNCH();
}

void sigmoid_gated_add_backward(const bf16* d_out, const bf16* x, const bf16* gate, int64_t rows, int64_t width,
                                bf16* d_x, bf16* d_gate, cudaStream_t stream) {
  if (rows == 0) return;
  sigmoid_gated_add_backward_kernel<<<warp_blocks(rows), 32 * kWarpsPerBlock, 0, stream>>>(d_out, x, gate, rows, width,
                                                                                          d_x, d_gate);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda
