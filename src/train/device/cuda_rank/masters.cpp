// A CUDA rank's fp32 master weights; see masters.h.
#include "train/device/cuda_rank/masters.h"

#include <vector>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/weights_from_masters.h"

namespace surogate::train {
namespace {

void copy_floats(float* destination, const float* source, int64_t count, cudaStream_t stream) {
  CUDA_CHECK(
      cudaMemcpyAsync(destination, source, static_cast<size_t>(count) * sizeof(float), cudaMemcpyDefault, stream));
}

}  // namespace

CudaMasters::CudaMasters(const CudaTrainableLayout& layout, FlatRun run, bool sharded, bool offloaded,
                         bool write_combined, std::span<__nv_bfloat16* const> weights, bool fp16,
                         const cuda::GradientCounts& counts)
    : layout_(&layout), run_(run), sharded_(sharded), fp16_(fp16), counts_(&counts) {
  SUROGATE_CHECK(weights.size() == layout.entries.size(), "one weight per trainable tensor");
  const auto count = static_cast<size_t>(run.count);
  if (offloaded) {
    pinned_ = cuda::PinnedHostBuffer<float>(count, write_combined);
    host_ = pinned_.data();
    data_ = pinned_.device_data();
  } else {
    device_ = cuda::DeviceBuffer<float>(count);
    host_ = data_ = device_.data();
  }
  std::vector<float*> masters;
  for (size_t i = 0; i < layout.entries.size(); ++i) {
    const bool has_master = !sharded || run.contains(i);  // ZeRO-3: the optimizer's tensors only
    masters.push_back(has_master ? data_ + (layout.entries[i].offset - run.base) : nullptr);
  }
  master_table_ = cuda::to_device(masters);
  if (fp16) {
    std::vector<__half*> fp16_weights;
    for (__nv_bfloat16* pointer : weights) fp16_weights.push_back(reinterpret_cast<__half*>(pointer));
    fp16_weight_table_ = cuda::to_device(fp16_weights);
  } else {
    weight_table_ = cuda::to_device(std::vector<__nv_bfloat16*>(weights.begin(), weights.end()));
  }
}

float* CudaMasters::master(size_t index) {
  SUROGATE_CHECK(present() && index < layout_->entries.size(), "trainable tensors have fp32 masters");
  return host_ + (layout_->entries[index].offset - run_.base);
}

size_t CudaMasters::device_bytes(int64_t count, bool bf16_master, bool offloaded) {
  return bf16_master || offloaded ? 0 : static_cast<size_t>(count) * sizeof(float);
}

void CudaMasters::refresh_weights(size_t first, size_t end, cudaStream_t stream) {
  SUROGATE_CHECK(present() && !sharded_, "weights are refreshed from every fp32 master only without ZeRO-3");
  if (first == end) return;
  const int tensors = static_cast<int>(end - first);
  if (fp16_) {
    cuda::weights_from_masters(fp16_weight_table_.data() + first, master_table_.data() + first,
                               counts_->counts() + first, tensors, stream);
    return;
  }
  cuda::weights_from_masters(weight_table_.data() + first, master_table_.data() + first, counts_->counts() + first,
                             tensors, stream);
}

void CudaMasters::set_publish_buffer(__nv_bfloat16* flat) {
  SUROGATE_CHECK(present() && !sharded_ && !fp16_, "the 16-bit publish rounds every fp32 master into bf16");
  std::vector<const __nv_bfloat16*> sources;
  for (const CudaTrainable& entry : layout_->entries) sources.push_back(flat + entry.offset);
  publish_table_ = cuda::to_device(sources);
  publish_buffer_ = flat;
}

void CudaMasters::round_into_publish_buffer(size_t first, size_t end, cudaStream_t stream) {
  SUROGATE_CHECK(publish_buffer_ != nullptr, "a publish buffer was set");
  const FlatRun run = layout_->run(first, end);
  cuda::round_to_bf16(data_ + (run.base - run_.base), publish_buffer_ + run.base, run.count, stream);
}

void CudaMasters::weights_from_publish_buffer(size_t first, size_t end, cudaStream_t stream) {
  SUROGATE_CHECK(publish_buffer_ != nullptr, "a publish buffer was set");
  if (first == end) return;
  cuda::weights_from_flat(weight_table_.data() + first, publish_table_.data() + first, counts_->counts() + first,
                          static_cast<int>(end - first), stream);
}

void CudaMasters::upload(std::span<const WeightView> weights, cudaStream_t stream) {
  SUROGATE_CHECK(!sharded_, "ZeRO-3 uploads through the data-parallel device");
  for (const CudaTrainable& entry : layout_->entries) {
    copy_floats(host_ + entry.offset, weights[entry.weight].values.data(), entry.count, stream);
  }
}

void CudaMasters::download(std::span<const WeightView> weights, cudaStream_t stream) {
  SUROGATE_CHECK(!sharded_, "ZeRO-3 downloads through the data-parallel device");
  for (const CudaTrainable& entry : layout_->entries) {
    copy_floats(weights[entry.weight].values.data(), host_ + entry.offset, entry.count, stream);
  }
}

}  // namespace surogate::train
