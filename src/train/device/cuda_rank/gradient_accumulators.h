// A CUDA rank's gradient accumulators: one flat buffer over a run of the trainable layout
// (trainable_layout.h) — every trainable tensor's, or under ZeRO-2/3 those of the rank's optimizer
// shard only, filled with reduced pieces (sharded_gradients.h) — in fp32, or bf16 with
// gradient_dtype bf16; on the GPU, or in mapped pinned host memory with offload_grads. Each
// micro-batch's 16-bit gradients (the plan's) are added in and zeroed there
// (cuda/kernels/gradient_accumulate.h); the norm (gradient_clip.h) and the optimizer read them.
//
// Deferred zeroing (defer_zeroing): zero() then only marks the accumulators stale, and the next
// add over every tensor overwrites them (no memset before it and no accumulator read in it: 8
// bytes per trained parameter and step); any other reader (data(), a partial add, the norm, the
// step) zeroes them first (zero_stale()).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <span>

#include "core/dtype.h"
#include "cuda/device_buffer.h"
#include "cuda/host_buffer.h"
#include "cuda/kernels/gradient_accumulate.h"
#include "train/device/cuda_rank/trainable_layout.h"

namespace surogate::train {

class CudaGradientAccumulators {
public:
  // Accumulators for `run` of `layout` (`sharded`: ZeRO-2/3, only the run's tensors; else the run
  // is the whole layout), zeroed on `stream`. `gradients`: each trainable tensor's 16-bit gradient
  // in the plan (fp16 with `fp16`, whose accumulators are fp32); `counts`, which must outlive the
  // accumulators, their element counts.
  CudaGradientAccumulators(const CudaTrainableLayout& layout, FlatRun run, bool sharded, bool bf16, bool offloaded,
                           bool write_combined, std::span<__nv_bfloat16* const> gradients, bool fp16,
                           const cuda::GradientCounts& counts, cudaStream_t stream);
  CudaGradientAccumulators(const CudaGradientAccumulators&) = delete;
  CudaGradientAccumulators& operator=(const CudaGradientAccumulators&) = delete;

  DType dtype() const { return bf16_ ? DType::BF16 : DType::F32; }
  // The flat buffer as the kernels and collectives address it (sharded: the run's first element
  // is its start), zeroed first if stale.
  void* data();
  // The accumulator of the tensor at `offset` of the flat layout (one of the run's).
  float* fp32_at(int64_t offset) { return fp32_ + (offset - run_.base); }
  __nv_bfloat16* bf16_at(int64_t offset) { return bf16_data_ + (offset - run_.base); }
  // Their bytes on the device (or in host memory with offload_grads).
  size_t bytes() const;
  // GPU bytes accumulators of `count` elements take (none when offloaded).
  static size_t device_bytes(int64_t count, bool bf16, bool offloaded);

  // The micro-batch's gradients of trainable tensors [first, end) added in (and zeroed in the
  // plan), on the stream. Not with sharded accumulators.
  void add(size_t first, size_t end);
  void zero();
  void defer_zeroing() { defer_zeroing_ = true; }
  bool defers_zeroing() const { return defer_zeroing_; }
  // The memset zero() deferred, if it is still owed.
  void zero_stale();

  // The multi-tensor kernels' tables (one entry per trainable tensor: null where the run has
  // none), for the dtype(); and the tensors' counts.
  float* const* fp32_table() const { return fp32_table_.data(); }
  __nv_bfloat16* const* bf16_table() const { return bf16_table_.data(); }
  const cuda::GradientCounts& counts() const { return *counts_; }

private:
  const CudaTrainableLayout& layout_;
  FlatRun run_;
  bool bf16_, fp16_;
  const cuda::GradientCounts* counts_;
  cudaStream_t stream_;
  cuda::DeviceBuffer<float> fp32_device_;
  cuda::DeviceBuffer<__nv_bfloat16> bf16_device_;
  cuda::PinnedHostBuffer<float> fp32_pinned_;          // offload_grads
  cuda::PinnedHostBuffer<__nv_bfloat16> bf16_pinned_;  // offload_grads with gradient_dtype bf16
  float* fp32_ = nullptr;  // the buffer in use (one of the above, as the kernels address it)
  __nv_bfloat16* bf16_data_ = nullptr;
  cuda::DeviceBuffer<__nv_bfloat16*> gradient_table_;
  cuda::DeviceBuffer<__half*> fp16_gradient_table_;  // fp16 plans: the same addresses
  cuda::DeviceBuffer<float*> fp32_table_;
  cuda::DeviceBuffer<__nv_bfloat16*> bf16_table_;
  bool defer_zeroing_ = false, stale_ = false;
};

}  // namespace surogate::train
