// A pipeline stage's plans on a GPU rank; see cuda_stage_device.h.
#include "train/device/parallel/cuda_stage_device.h"

#include <cuda_bf16.h>

#include "cuda/cuda_check.h"
#include "cuda/kernels/core_ops.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "distributed/nccl_group.h"

namespace surogate::train {

CudaStageDevice::CudaStageDevice(const TrainingDeviceSetup& setup, const PipelineStagePlan& plan,
                                 StageBoundary boundary, const CudaTrainableLayout& layout, size_t first, size_t end,
                                 size_t first_entry, const runtime::CudaOpTable* forward_ops)
    : boundary_(std::move(boundary)), first_entry_(first_entry), first_stage_(plan.graph.stage == 0) {
  state_ = std::make_unique<CudaRankState>(setup, layout, first, end);
  if (plan.graph.sent.empty()) return;  // the last stage has no forward plan
  forward_.emplace(forward_ops != nullptr ? *forward_ops : runtime::builtin_cuda_ops());
  forward_->share_parameters_with(state_->backend());  // the weights, read in place
  forward_->load(plan.forward, *setup.registry);
  training_ready_.emplace();
  forward_done_.emplace();
}

CudaStageDevice::~CudaStageDevice() {
  // The slots and the forward plan's memory may still be read by transfers in flight.
  if (state_) cudaStreamSynchronize(state_->stream());
  if (forward_) cudaStreamSynchronize(forward_->stream());
}

void CudaStageDevice::run_forward(const StageMicroBatch& batch, std::span<void* const> received) {
  cudaStream_t stream = forward_->stream();
  training_ready_->record(state_->stream());
  CUDA_CHECK(cudaStreamWaitEvent(stream, training_ready_->get(), 0));
  for (size_t k = 0; k < received.size(); ++k) {
    CUDA_CHECK(cudaMemcpyAsync(forward_->device_address(boundary_.received_forward[k]), received[k],
                               boundary_.received_types[k].size_bytes(), cudaMemcpyDeviceToDevice, stream));
  }
  forward_->execute(batch.forward.bindings());
  forward_done_->record(stream);
  CUDA_CHECK(cudaStreamWaitEvent(state_->stream(), forward_done_->get(), 0));
}

void CudaStageDevice::copy(void* destination, const void* source, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, state_->stream()));
}

void CudaStageDevice::add(void* destination, const void* source, const graph::TensorType& type) {
  if (type.dtype == DType::BF16) {
    cuda::accumulate_16bit(static_cast<const __nv_bfloat16*>(source), static_cast<__nv_bfloat16*>(destination),
                           type.numel(), state_->stream());
  } else {
    cuda::accumulate_f32(static_cast<const float*>(source), static_cast<float*>(destination), type.numel(),
                         state_->stream());
  }
}

void CudaStageDevice::zero(void* destination, size_t bytes) {
  CUDA_CHECK(cudaMemsetAsync(destination, 0, bytes, state_->stream()));
}

// One group: the round's sends and receives progress independently (pipeline_rounds.h).
void CudaStageDevice::exchange(const std::function<void()>& post) {
  distributed::NcclGroup group;
  post();
  group.close();
}

void CudaStageDevice::refresh_weights() {
  if (!first_stage_) state_->masters().refresh_weights(0, first_entry_, state_->stream());
}

}  // namespace surogate::train
