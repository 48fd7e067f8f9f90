// A CUDA rank's gradient accumulators; see gradient_accumulators.h.
#include "train/device/cuda_rank/gradient_accumulators.h"

#include <vector>

#include "core/error.h"
#include "cuda/cuda_check.h"

namespace surogate::train {

CudaGradientAccumulators::CudaGradientAccumulators(const CudaTrainableLayout& layout, FlatRun run, bool sharded,
                                                   bool bf16, bool offloaded, bool write_combined,
                                                   std::span<__nv_bfloat16* const> gradients, bool fp16,
                                                   const cuda::GradientCounts& counts, cudaStream_t stream)
    : layout_(layout), run_(run), bf16_(bf16), fp16_(fp16), counts_(&counts), stream_(stream) {
  SUROGATE_CHECK(gradients.size() == layout.entries.size(), "one gradient per trainable tensor");
  const auto total = static_cast<size_t>(run.count);
  if (bf16 && offloaded) {
    bf16_pinned_ = cuda::PinnedHostBuffer<__nv_bfloat16>(total, write_combined);
    bf16_data_ = bf16_pinned_.device_data();
  } else if (bf16) {
    bf16_device_ = cuda::DeviceBuffer<__nv_bfloat16>(total);
    bf16_data_ = bf16_device_.data();
  } else if (offloaded) {
    fp32_pinned_ = cuda::PinnedHostBuffer<float>(total, write_combined);
    fp32_ = fp32_pinned_.device_data();
  } else {
    fp32_device_ = cuda::DeviceBuffer<float>(total);
    fp32_ = fp32_device_.data();
  }
  zero();
  std::vector<__nv_bfloat16*> bf16_accumulators;
  std::vector<float*> fp32_accumulators;
  for (size_t i = 0; i < layout.entries.size(); ++i) {
    const bool has_accumulator = !sharded || run.contains(i);  // ZeRO-2/3: the optimizer's tensors only
    const int64_t offset = layout.entries[i].offset - run.base;
    if (bf16) bf16_accumulators.push_back(has_accumulator ? bf16_data_ + offset : nullptr);
    else fp32_accumulators.push_back(has_accumulator ? fp32_ + offset : nullptr);
  }
  gradient_table_ = cuda::to_device(std::vector<__nv_bfloat16*>(gradients.begin(), gradients.end()));
  if (bf16) bf16_table_ = cuda::to_device(bf16_accumulators);
  else fp32_table_ = cuda::to_device(fp32_accumulators);
  if (fp16) {  // the same addresses, as the fp16 tensors they are
    std::vector<__half*> fp16_gradients;
    for (__nv_bfloat16* pointer : gradients) fp16_gradients.push_back(reinterpret_cast<__half*>(pointer));
    fp16_gradient_table_ = cuda::to_device(fp16_gradients);
  }
}

void* CudaGradientAccumulators::data() {
  zero_stale();
  return bf16_ ? static_cast<void*>(bf16_data_) : static_cast<void*>(fp32_);
}

size_t CudaGradientAccumulators::bytes() const { return static_cast<size_t>(run_.count) * dtype_size_bytes(dtype()); }

size_t CudaGradientAccumulators::device_bytes(int64_t count, bool bf16, bool offloaded) {
  return offloaded ? 0 : static_cast<size_t>(count) * (bf16 ? sizeof(__nv_bfloat16) : sizeof(float));
}

void CudaGradientAccumulators::add(size_t first, size_t end) {
  SUROGATE_CHECK(first <= end && end <= layout_.entries.size(), "gradients of trainable tensors");
  SUROGATE_CHECK(run_.count == layout_.total, "sharded accumulators take reduced pieces only (sharded_gradients.h)");
  if (first == end) return;
  // Stale accumulators (deferred zeroing) are overwritten when every tensor is added at once.
  const bool overwrite = stale_ && first == 0 && end == layout_.entries.size();
  if (!overwrite) zero_stale();
  stale_ = false;
  if (fp16_) {
    cuda::accumulate_fp16_gradients(fp16_gradient_table_.data(), fp32_table_.data(), *counts_, first, end, stream_,
                                    overwrite);
  } else if (bf16_) {
    cuda::accumulate_bf16_gradients(gradient_table_.data(), bf16_table_.data(), *counts_, first, end, stream_,
                                    overwrite);
  } else {
    cuda::accumulate_bf16_gradients(gradient_table_.data(), fp32_table_.data(), *counts_, first, end, stream_,
                                    overwrite);
  }
}

void CudaGradientAccumulators::zero() {
  stale_ = true;
  if (!defer_zeroing_) zero_stale();
}

void CudaGradientAccumulators::zero_stale() {
  if (!stale_) return;
  stale_ = false;
  // The mapped host accumulators too (offload_grads): the memset runs on the GPU, over the link.
  const size_t total = static_cast<size_t>(run_.count);
  if (fp32_) CUDA_CHECK(cudaMemsetAsync(fp32_, 0, total * sizeof(float), stream_));
  if (bf16_data_) CUDA_CHECK(cudaMemsetAsync(bf16_data_, 0, total * sizeof(__nv_bfloat16), stream_));
}

}  // namespace surogate::train
