// A CUDA rank's kept outputs; see output_readback.h.
#include "train/device/cuda_rank/output_readback.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "cuda/cuda_check.h"

namespace surogate::train {
namespace {

std::vector<size_t> output_sizes(const compiler::ExecutionPlan& plan, const std::vector<graph::TensorId>& tensors) {
  std::vector<size_t> sizes;
  for (graph::TensorId tensor : tensors) {
    const graph::TensorType& type = plan.graph.tensor(tensor).type;
    SUROGATE_CHECK(type.dtype == DType::F32, "a kept output is F32 ({})", plan.graph.tensor(tensor).name);
    sizes.push_back(static_cast<size_t>(type.numel()));
  }
  return sizes;
}

}  // namespace

CudaOutputReadback::CudaOutputReadback(const compiler::ExecutionPlan& plan, std::vector<graph::TensorId> tensors,
                                       int64_t max_micro_batches)
    : tensors_(std::move(tensors)),
      sizes_(output_sizes(plan, tensors_)),
      floats_(std::accumulate(sizes_.begin(), sizes_.end(), size_t{0})),
      max_micro_batches_(max_micro_batches),
      values_(std::max<size_t>(1, floats_ * static_cast<size_t>(max_micro_batches))) {}

void CudaOutputReadback::record(runtime::CudaBackend& backend) {
  if (micro_batches_ >= max_micro_batches_) {
    fail_user("internal: more micro-batches than gradient_accumulation_steps ({}) in one step", max_micro_batches_);
  }
  float* at = values_.data + static_cast<size_t>(micro_batches_) * floats_;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    CUDA_CHECK(cudaMemcpyAsync(at, backend.device_address(tensors_[i]), sizes_[i] * sizeof(float),
                               cudaMemcpyDeviceToHost, backend.stream()));
    at += sizes_[i];
  }
  ++micro_batches_;
}

std::vector<KeptOutputs> CudaOutputReadback::take(cudaStream_t stream) {
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<KeptOutputs> kept(static_cast<size_t>(micro_batches_));
  const float* at = values_.data;
  for (KeptOutputs& outputs : kept) {
    for (size_t size : sizes_) {
      outputs.emplace_back(at, at + size);
      at += size;
    }
  }
  micro_batches_ = 0;
  return kept;
}

}  // namespace surogate::train
