// Many device-to-device copies of unrelated ranges in one launch (Backend::copy_within on CUDA:
// a prompt's keys and values handed from one KV cache slot to many, every layer's caches at once).
// One cudaMemcpyAsync each costs a few µs of host time; thousands of them would cost more than
// the prefill they replace.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace surogate::cuda {

// Up to kMaxRanges copies of one launch, passed by value (under the 4 KB of kernel parameters).
struct RangeCopyBatch {
  static constexpr int kMaxRanges = 128;
  int count = 0;
  int64_t largest = 0;  // the most bytes of one range (sets the launch's width)
  const void* from[kMaxRanges] = {};
  void* to[kMaxRanges] = {};
  int64_t bytes[kMaxRanges] = {};
};

// Copies every range of `batch` on `stream`; the ranges must not overlap one another's
// destinations. In 16-byte units where a range's addresses and size allow, else bytes.
void copy_ranges(const RangeCopyBatch& batch, cudaStream_t stream);

}  // namespace surogate::cuda
