// One-launch copies of many ranges; see range_copy.h.
#include "cuda/kernels/range_copy.h"

#include <algorithm>

#include "cuda/cuda_check.h"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kBytesPerBlock = 64 * 1024;  // a long range is shared by several blocks

// Block (x, y) copies range x's y-th share, in 16-byte units when the range allows.
__global__ void copy_ranges_kernel(RangeCopyBatch batch) {
  const int range = static_cast<int>(blockIdx.x);
  const auto* from = static_cast<const unsigned char*>(batch.from[range]);
  auto* to = static_cast<unsigned char*>(batch.to[range]);
  const int64_t bytes = batch.bytes[range];
  const int64_t start = int64_t{threadIdx.x} + int64_t{blockIdx.y} * kThreads;
  const int64_t stride = int64_t{kThreads} * gridDim.y;
  const bool wide = ((reinterpret_cast<uintptr_t>(from) | reinterpret_cast<uintptr_t>(to) |
                      static_cast<uint64_t>(bytes)) % 16) == 0;
  if (wide) {
    const auto* source = reinterpret_cast<const uint4*>(from);
    auto* target = reinterpret_cast<uint4*>(to);
    for (int64_t unit = start; unit < bytes / 16; unit += stride) target[unit] = source[unit];
  } else {
    for (int64_t byte = start; byte < bytes; byte += stride) to[byte] = from[byte];
  }
}

}  // namespace

void copy_ranges(const RangeCopyBatch& batch, cudaStream_t stream) {
  if (batch.count == 0) return;
  const auto shares = static_cast<unsigned>(std::clamp<int64_t>((batch.largest + kBytesPerBlock - 1) / kBytesPerBlock, 1, 1024));
  copy_ranges_kernel<<<dim3(static_cast<unsigned>(batch.count), shares), kThreads, 0, stream>>>(batch);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace surogate::cuda
