// The sampled choice of sample_tokens.h, one block per row, in passes over the row (in the L2
// after the LM head), each recomputing the processed logits (penalty from a bitmask of the
// context in shared memory, then / temperature) instead of storing them:
//   1. the largest value and its first index, and the NaN / +inf flag (greedy rows stop here);
//   2. top_k only: a radix select (4 passes of 8 bits on the value's order key) of the k-th
//      largest value;
//   3. top_p only: T, then a radix select weighted by the integer weights for the value where the
//      cumulative weight from the top reaches L, then the tie cut among tokens of that value
//      (the highest ids first) by an ordered search;
//   4. the draw: each thread sums a contiguous chunk of ids, a block scan gives every chunk's
//      offset and the total T', the chunk holding the target is searched by one warp.
// Integer sums (core/token_draw.h's weights) make every result independent of the summation order,
// so the CPU op's serial loops and these parallel passes choose the same token.
#include "cuda/kernels/sample_tokens.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/first_max.cuh"

namespace surogate::cuda {
namespace {

using kernels::FirstMax;
using kernels::to_float;

// ops/sample_tokens.h's codes (the CPU op's constants live where nvcc does not look).
constexpr int32_t kSkipped = -3, kNothing = -2, kUnusable = -1;
constexpr int kRadixBins = 256;
constexpr int kSampleThreads = 512, kSampleWarps = kSampleThreads / 32;
constexpr int kSampleUnroll = 4;  // pass 1's loads in flight per thread

// The row as the steps see it: processed values, weights relative to the largest, the filters.
template <typename E>
struct SampledRow {
  const E* row;
  int64_t vocab;
  const uint32_t* context_bits;  // null: no penalty
  RowSampling p;
  float largest = -INFINITY;
  uint32_t top_k_key = 0;         // keep key >= this (0: every key)
  uint32_t top_p_key = 0;         // keep key > this, or == this and id >= top_p_id
  int64_t top_p_id = 0;
  double min_logit = -INFINITY;

  __device__ float raw(int64_t i) const { return to_float(row[i]); }
  __device__ float process(int64_t i, float raw_value) const {
    const bool in_context = context_bits != nullptr && ((context_bits[i >> 5] >> (i & 31)) & 1u) != 0;
    return processed_logit(raw_value, in_context, p.repetition_penalty, p.temperature);
  }
  __device__ float value(int64_t i) const { return process(i, raw(i)); }
  __device__ uint64_t weight_of(float x) const {
    return x == -INFINITY ? 0 : sampling_weight(x == largest ? 0.0f : x - largest);
  }
  __device__ bool top_k_kept(float x) const { return float_order_key(x) >= top_k_key; }
  __device__ bool kept(int64_t i, float x) const {
    const uint32_t key = float_order_key(x);
    return key >= top_k_key && (key > top_p_key || (key == top_p_key && i >= top_p_id)) &&
           static_cast<double>(x) >= min_logit;
  }
};

__device__ uint64_t block_sum(uint64_t value, uint64_t* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  uint64_t total = 0;
  for (int w = 0; w < kSampleWarps; ++w) total += scratch[w];
  return total;
}

// Exclusive prefix of `value` over the block's threads in order; *total gets the sum.
__device__ uint64_t block_exclusive_scan(uint64_t value, uint64_t* scratch, uint64_t* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint64_t inclusive = value;
  for (int offset = 1; offset < 32; offset *= 2) {
    const uint64_t other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  uint64_t before = 0, sum = 0;
  for (int w = 0; w < kSampleWarps; ++w) {
    before += w < warp ? scratch[w] : 0;
    sum += scratch[w];
  }
  *total = sum;
  return before + inclusive - value;
}

// The id of the first token, in ascending id order (descending when `descending`), whose
// inclusive prefix of value(id) exceeds target(total), total being the row's sum; vocab when none
// does. Every thread returns it. Threads sum contiguous chunks; warp 0 then searches the chunk
// that holds the crossing, 32 positions at a time.
template <typename Value, typename Target>
__device__ int64_t find_crossing(int64_t vocab, bool descending, Value value, Target target, uint64_t* scratch) {
  __shared__ int owner;
  __shared__ uint64_t owner_offset;
  __shared__ int64_t found;
  const int64_t chunk = (vocab + kSampleThreads - 1) / kSampleThreads;
  const auto id_at = [&](int64_t position) { return descending ? vocab - 1 - position : position; };
  const auto chunk_begin = [&](int thread) { return min(vocab, chunk * thread); };
  uint64_t mine = 0;
#pragma unroll 8
  for (int64_t position = chunk_begin(threadIdx.x); position < chunk_begin(threadIdx.x + 1); ++position) {
    mine += value(id_at(position));
  }
  if (threadIdx.x == 0) owner = -1;
  uint64_t total = 0;
  const uint64_t offset = block_exclusive_scan(mine, scratch, &total);  // synchronises
  const uint64_t goal = target(total);
  if (offset <= goal && goal - offset < mine) {
    owner = threadIdx.x;
    owner_offset = offset;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int64_t result = vocab;
    if (owner >= 0) {
      uint64_t left = goal - owner_offset;
      for (int64_t base = chunk_begin(owner); base < chunk_begin(owner + 1); base += 32) {
        const int64_t position = base + lane;
        const uint64_t v = position < chunk_begin(owner + 1) ? value(id_at(position)) : 0;
        uint64_t inclusive = v;
        for (int shift = 1; shift < 32; shift *= 2) {
          const uint64_t other = __shfl_up_sync(0xffffffffu, inclusive, shift);
          if (lane >= shift) inclusive += other;
        }
        const unsigned crossing = __ballot_sync(0xffffffffu, inclusive > left && inclusive - v <= left);
        if (crossing != 0) {
          result = id_at(base + __ffs(crossing) - 1);
          break;
        }
        left -= __shfl_sync(0xffffffffu, inclusive, 31);
      }
    }
    if (lane == 0) found = result;
  }
  __syncthreads();
  return found;
}

// weight(id) -> (order key, weight) of each token; the key K, walking keys from the top, where
// the cumulative weight first exceeds `target`: sum over key > K <= target < sum over key >= K
// (*above gets the first sum). Four passes of 8 bits; within a warp, lanes that add to the same
// bin add their weights first (split in 21-bit halves for __reduce_add_sync).
template <typename KeyWeight>
__device__ uint32_t radix_select(int64_t vocab, KeyWeight key_weight, uint64_t target, uint64_t* above) {
  __shared__ unsigned long long bins[kRadixBins];
  __shared__ uint32_t chosen_prefix;
  __shared__ uint64_t chosen_above;
  const int lane = threadIdx.x % 32;
  uint32_t prefix = 0, mask = 0;
  uint64_t sum_above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kRadixBins; b += kSampleThreads) bins[b] = 0;
    __syncthreads();
    for (int64_t base = threadIdx.x - lane; base < vocab; base += kSampleThreads) {
      const int64_t i = base + lane;
      uint32_t key = 0;
      uint64_t weight = 0;
      if (i < vocab) {
        const auto kw = key_weight(i);
        key = kw.key;
        weight = (kw.key & mask) == prefix ? kw.weight : 0;
      }
      const unsigned bin = weight != 0 ? (key >> shift) & 0xffu : kRadixBins;  // kRadixBins: adds nothing
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      const unsigned low = __reduce_add_sync(peers, static_cast<unsigned>(weight & 0x1fffffu));
      const unsigned high = __reduce_add_sync(peers, static_cast<unsigned>(weight >> 21));
      if (bin < kRadixBins && lane == __ffs(peers) - 1) {
        atomicAdd(&bins[bin], (static_cast<unsigned long long>(high) << 21) + low);
      }
#else
      if (bin < kRadixBins) atomicAdd(&bins[bin], static_cast<unsigned long long>(weight));
#endif
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l holds bins 255 - 8l down to 248 - 8l: the keys from the top.
      uint64_t own = 0;
      for (int j = 0; j < 8; ++j) own += bins[255 - 8 * lane - j];
      uint64_t inclusive = own;
      for (int step = 1; step < 32; step *= 2) {
        const uint64_t other = __shfl_up_sync(0xffffffffu, inclusive, step);
        if (lane >= step) inclusive += other;
      }
      const uint64_t before = sum_above + inclusive - own;
      const unsigned crossing = __ballot_sync(0xffffffffu, before <= target && target < sum_above + inclusive);
      if (lane == __ffs(crossing) - 1) {
        uint64_t cumulative = before;
        for (int j = 0; j < 8; ++j) {
          const int b = 255 - 8 * lane - j;
          if (target < cumulative + bins[b]) {
            chosen_prefix = prefix | (static_cast<uint32_t>(b) << shift);
            chosen_above = cumulative;
            break;
          }
          cumulative += bins[b];
        }
      }
    }
    __syncthreads();
    prefix = chosen_prefix;
    sum_above = chosen_above;
    mask |= 0xffu << shift;
  }
  *above = sum_above;
  return prefix;
}

__device__ __forceinline__ float float_of_key(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? key & 0x7fffffffu : ~key);
}

struct KeyWeight {
  uint32_t key;
  uint64_t weight;
};

template <typename E>
__global__ void __launch_bounds__(kSampleThreads)
    sample_tokens_kernel(int32_t* tokens, const E* logits, int64_t vocab, const RowSampling* params,
                         const int32_t* context, int64_t context_width) {
  extern __shared__ uint32_t context_bits[];
  __shared__ uint64_t scratch[kSampleWarps];
  __shared__ FirstMax warp_best[kSampleWarps];
  __shared__ FirstMax best;
  const int64_t r = blockIdx.x;
  SampledRow<E> row{logits + r * vocab, vocab, nullptr, params[r]};
  if (row.p.temperature < 0.0f) {
    if (threadIdx.x == 0) tokens[r] = kSkipped;
    return;
  }
  if (context_width > 0 && row.p.repetition_penalty != 1.0f) {
    for (int64_t w = threadIdx.x; w < (vocab + 31) / 32; w += kSampleThreads) context_bits[w] = 0;
    __syncthreads();
    for (int64_t c = threadIdx.x; c < context_width; c += kSampleThreads) {
      const int32_t id = context[r * context_width + c];
      if (id >= 0 && id < vocab) atomicOr(&context_bits[id >> 5], 1u << (id & 31));
    }
    __syncthreads();
    row.context_bits = context_bits;
  }
  // 1. The largest processed value, its first index, and the flag of the raw values.
  FirstMax mine{-INFINITY, vocab, false};
  for (int64_t start = threadIdx.x; start < vocab; start += kSampleThreads * kSampleUnroll) {
    float raw[kSampleUnroll];  // the loads first, in flight together
#pragma unroll
    for (int u = 0; u < kSampleUnroll; ++u) {
      const int64_t i = start + static_cast<int64_t>(kSampleThreads) * u;
      raw[u] = i < vocab ? row.raw(i) : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kSampleUnroll; ++u) {
      const int64_t i = start + static_cast<int64_t>(kSampleThreads) * u;
      if (i >= vocab) break;
      mine.unusable |= !(raw[u] < INFINITY);
      const float x = row.process(i, raw[u]);
      if (x > mine.value || (x == mine.value && mine.index == vocab)) mine = {x, i, mine.unusable};
    }
  }
  mine = kernels::block_first_max<kSampleWarps>(mine, warp_best, vocab);
  if (threadIdx.x == 0) best = mine;
  __syncthreads();
  const FirstMax top = best;
  if (top.unusable || row.p.temperature == 0.0f || top.value == -INFINITY) {
    if (threadIdx.x == 0) {
      tokens[r] = top.unusable ? kUnusable
                  : row.p.temperature == 0.0f ? static_cast<int32_t>(top.index == vocab ? 0 : top.index)
                                              : kNothing;
    }
    return;
  }
  row.largest = top.value;
  // 2. top_k: the k-th largest value's key.
  uint64_t above = 0;
  if (row.p.top_k > 0 && row.p.top_k < vocab) {
    row.top_k_key = radix_select(vocab, [&](int64_t i) { return KeyWeight{float_order_key(row.value(i)), 1}; },
                                 static_cast<uint64_t>(row.p.top_k - 1), &above);
  }
  // 3. top_p: the value (and among its ties the lowest id) of the last token kept.
  const auto top_k_weight = [&](int64_t i) {
    const float x = row.value(i);
    return row.top_k_kept(x) ? row.weight_of(x) : uint64_t{0};
  };
  if (row.p.top_p < 1.0f) {
    uint64_t kept_total = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) kept_total += top_k_weight(i);
    kept_total = block_sum(kept_total, scratch);
    const auto share = static_cast<uint64_t>(static_cast<double>(row.p.top_p) * static_cast<double>(kept_total));
    const uint64_t limit = share > 0 ? share : 1;
    row.top_p_key = radix_select(vocab, [&](int64_t i) {
      const float x = row.value(i);
      return KeyWeight{float_order_key(x), row.top_k_kept(x) ? row.weight_of(x) : uint64_t{0}};
    }, limit - 1, &above);
    const uint64_t tie_weight = row.weight_of(float_of_key(row.top_p_key));
    const uint64_t ties_kept = (limit - above + tie_weight - 1) / tie_weight;
    const uint32_t tie_key = row.top_p_key;
    const int64_t cut = find_crossing(vocab, true, [&](int64_t i) {
      const float x = row.value(i);
      return static_cast<uint64_t>(row.top_k_kept(x) && float_order_key(x) == tie_key);
    }, [&](uint64_t) { return ties_kept - 1; }, scratch);
    row.top_p_id = cut == vocab ? 0 : cut;
  }
  // 4. min_p, then the draw over the kept tokens.
  row.min_logit = static_cast<double>(row.largest) + static_cast<double>(row.p.log_min_p);
  const uint64_t bits = token_draw_bits(row.p.seed, row.p.draw);
  const int64_t chosen = find_crossing(vocab, false, [&](int64_t i) {
    const float x = row.value(i);
    return row.kept(i, x) ? row.weight_of(x) : uint64_t{0};
  }, [&](uint64_t total) { return scale_draw(bits, total); }, scratch);
  if (threadIdx.x == 0) tokens[r] = chosen == vocab ? kNothing : static_cast<int32_t>(chosen);
}

}  // namespace

template <typename E>
void sample_tokens(int32_t* tokens, const E* logits, int64_t rows, int64_t vocab, const RowSampling* params,
                   const int32_t* context, int64_t context_width, cudaStream_t stream) {
  if (rows <= 0) return;
  if (vocab < 1 || vocab > kMaxSampledVocab) throw std::invalid_argument("sample_tokens: the vocabulary is empty or over 2^23");
  const size_t shared = context_width > 0 ? static_cast<size_t>((vocab + 31) / 32) * sizeof(uint32_t) : 0;
  if (shared > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(sample_tokens_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(shared)));
  }
  sample_tokens_kernel<E><<<static_cast<unsigned>(rows), kSampleThreads, shared, stream>>>(
      tokens, logits, vocab, params, context, context_width);
  CUDA_CHECK_LAUNCH();
}

template void sample_tokens(int32_t*, const float*, int64_t, int64_t, const RowSampling*, const int32_t*, int64_t,
                            cudaStream_t);
template void sample_tokens(int32_t*, const __nv_bfloat16*, int64_t, int64_t, const RowSampling*, const int32_t*,
                            int64_t, cudaStream_t);
template void sample_tokens(int32_t*, const __half*, int64_t, int64_t, const RowSampling*, const int32_t*, int64_t,
                            cudaStream_t);

}  // namespace surogate::cuda
