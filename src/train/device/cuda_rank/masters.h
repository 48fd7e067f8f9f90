// A CUDA rank's fp32 master weights (absent with master_dtype bf16, where the bf16 weight is the
// master): one flat buffer over a run of the trainable layout (trainable_layout.h) — every
// trainable tensor's, or under ZeRO-3 only those of the rank's optimizer shard — on the GPU, or in
// mapped pinned host memory with offload_master (host_offload_plan.h). The optimizer steps them in
// place; this piece moves them between the host copies and the device, and rewrites the plan's
// 16-bit weights from them (fp16 plans after each step, a pipeline group's publish of the other
// ranks' units) or rounds them into ZeRO-1's 16-bit publish buffer and copies the other ranks'
// weights out of it (a data-parallel replica's publish).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <span>

#include "cuda/device_buffer.h"
#include "cuda/host_buffer.h"
#include "cuda/kernels/gradient_accumulate.h"
#include "train/device/cuda_rank/trainable_layout.h"

namespace surogate::train {

class CudaMasters {
public:
  // No masters (master_dtype bf16).
  CudaMasters() = default;
  // Masters for `run` of `layout`; `sharded` (ZeRO-3): only the run's tensors have one (else the
  // run is the whole layout). `weights`: each trainable tensor's 16-bit weight on the device (fp16
  // in an fp16 plan, `fp16`), which refresh_weights() rewrites; `counts` their element counts,
  // which must outlive the masters.
  CudaMasters(const CudaTrainableLayout& layout, FlatRun run, bool sharded, bool offloaded, bool write_combined,
              std::span<__nv_bfloat16* const> weights, bool fp16, const cuda::GradientCounts& counts);
  CudaMasters(CudaMasters&&) = default;
  CudaMasters& operator=(CudaMasters&&) = default;

  bool present() const { return layout_ != nullptr; }
  // The masters as the kernels address them (the mapped host buffer when offloaded); null without.
  float* data() { return data_; }
  // Their host address when offloaded (a staged optimizer copies from there), else data().
  float* host() { return host_; }
  // The master of trainable tensor `index` (device or mapped host address).
  float* master(size_t index);
  // The master of the tensor at `offset` of the flat layout as the kernels address it, or (`host`)
  // at its host address.
  float* at(int64_t offset, bool host) { return (host ? host_ : data_) + (offset - run_.base); }
  // GPU bytes fp32 masters of `count` elements take (none when absent or offloaded).
  static size_t device_bytes(int64_t count, bool bf16_master, bool offloaded);

  // The 16-bit weights of tensors [first, end) rewritten from their masters (round to nearest
  // even, as the optimizer kernels write them), on `stream`. Not with ZeRO-3's run.
  void refresh_weights(size_t first, size_t end, cudaStream_t stream);
  // ZeRO-1's 16-bit publish (train/device/shard_publish.h) goes through `flat`, a bf16 buffer of the
  // whole flat layout (each tensor at its offset). Builds the table the copies address: an
  // allocation, so it is called before any collective, never between a rank's collectives.
  void set_publish_buffer(__nv_bfloat16* flat);
  __nv_bfloat16* publish_buffer() const { return publish_buffer_; }
  // The masters of tensors [first, end) rounded into the publish buffer, padding included (one
  // contiguous run; round to nearest even, as refresh_weights and the optimizer kernels round).
  void round_into_publish_buffer(size_t first, size_t end, cudaStream_t stream);
  // The bf16 weights of tensors [first, end) copied out of the publish buffer.
  void weights_from_publish_buffer(size_t first, size_t end, cudaStream_t stream);

  // Host → device from the trainable tensors' host copies (`weights` in spec order), and back.
  // Enqueued on `stream`; not with ZeRO-3's run.
  void upload(std::span<const WeightView> weights, cudaStream_t stream);
  void download(std::span<const WeightView> weights, cudaStream_t stream);

private:
  const CudaTrainableLayout* layout_ = nullptr;
  FlatRun run_;
  bool sharded_ = false, fp16_ = false;
  const cuda::GradientCounts* counts_ = nullptr;
  cuda::DeviceBuffer<float> device_;
  cuda::PinnedHostBuffer<float> pinned_;  // offload_master
  float* data_ = nullptr;
  float* host_ = nullptr;
  // The refresh kernel's pointer tables, one entry per trainable tensor (null: no master here).
  cuda::DeviceBuffer<float*> master_table_;
  cuda::DeviceBuffer<__nv_bfloat16*> weight_table_;
  cuda::DeviceBuffer<__half*> fp16_weight_table_;  // the same addresses, as fp16 tensors
  __nv_bfloat16* publish_buffer_ = nullptr;
  cuda::DeviceBuffer<const __nv_bfloat16*> publish_table_;  // each tensor's place in it
};

}  // namespace surogate::train
