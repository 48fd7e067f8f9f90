// Which packed document a token belongs to, from cu_seqlens (int32, document starts, ascending,
// then the total): shared by the flash attention kernels and the runtime's plain attention.
// The runtime passes cu_seqlens padded with `tokens` to tokens + 1 entries (an upper bound on the
// documents), so the real documents sit at the list's start and a plain bisection over all of it
// costs ~log2(tokens) dependent loads; the search below gallops from its lower bound (1, 2, 4, ...
// entries on) before it bisects, about 2·log2 of the documents it passes.
#pragma once

#include <cstdint>

namespace surogate::cuda {

// Largest d in [low, high] with cu_seqlens[d] ≤ token; needs cu_seqlens[low] ≤ token. Callers
// that search per query narrow [low, high] to the documents their block can touch.
__device__ __forceinline__ int document_index(const int32_t* cu_seqlens, int low, int high, int64_t token) {
  int step = 1;
  while (low + step <= high && cu_seqlens[low + step] <= token) {
    low += step;
    step *= 2;
  }
  high = min(high, low + step - 1);  // cu_seqlens[low + step] > token, or past high
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (cu_seqlens[middle] <= token) low = middle; else high = middle - 1;
  }
  return low;
}

// Lowest key `query` sees: the start of its document (searched in [low, high]), raised by the
// sliding window (window > 0).
__device__ __forceinline__ int64_t lowest_visible_key(const int32_t* cu_seqlens, int low, int high, int window,
                                                      int64_t query) {
  int64_t key = cu_seqlens[document_index(cu_seqlens, low, high, query)];
  if (window > 0 && query - window + 1 > key) key = query - window + 1;
  return key;
}

}  // namespace surogate::cuda
