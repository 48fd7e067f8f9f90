// A pipeline stage's plans on a GPU rank (stage_device.h; the algorithm is pipeline_stage.h): the
// stage's training plan in a CudaRankState (bf16 weights, fp32 masters, gradient accumulators, the
// optimizer for the rank's tensors) and, on every stage but the last, its forward plan on a second
// CudaBackend that reads the training backend's parameters in place
// (CudaBackend::share_parameters_with: nothing to refresh after an update but the last stage's
// bf16 copies of the tied tensors). Everything is enqueued on the training backend's stream; the
// forward backend's stream joins it by events around each forward, so the two plans run in one
// order and a send (on the training stream) reads a plan's output before the next run overwrites
// it. A round's transfers are one NCCL group. Nothing waits on the host but CudaBackend's input
// staging (for the previous execute's upload, of an earlier round).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cuda/device_buffer.h"
#include "runtime/cuda_backend.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/parallel/stage_device.h"

namespace surogate::train {

class CudaStageDevice final : public StageDevice {
public:
  // On the current CUDA device. `setup` is the stage's (its training plan and its parameters'
  // specs, in `layout`'s order); the optimizer steps the trainable tensors [first, end) of `layout`,
  // and the stage's own ones start at `first_entry` (a later stage holds the tied tensors before
  // them). The training backend binds its kernels from setup.cuda_ops, the forward backend from
  // `forward_ops` (null: the built-in table; with sequence parallelism each has its own group).
  // `layout` and `plan` must outlive the device.
  CudaStageDevice(const TrainingDeviceSetup& setup, const PipelineStagePlan& plan, StageBoundary boundary,
                  const CudaTrainableLayout& layout, size_t first, size_t end, size_t first_entry,
                  const runtime::CudaOpTable* forward_ops = nullptr);
  ~CudaStageDevice() override;
  CudaStageDevice(const CudaStageDevice&) = delete;
  CudaStageDevice& operator=(const CudaStageDevice&) = delete;

  CudaRankState& state() { return *state_; }
  // The forward backend's stream (null on the last stage, which has none).
  cudaStream_t forward_stream() const { return forward_ ? forward_->stream() : nullptr; }

  void* allocate(size_t bytes) override { return buffers_.emplace_back(bytes).data(); }
  void run_forward(const StageMicroBatch& batch, std::span<void* const> received) override;
  const void* sent(size_t k) override { return forward_->device_address(boundary_.sent_forward[k]); }
  void* sent_gradient(size_t k) override { return state_->backend().device_address(boundary_.sent_gradient_inputs[k]); }
  void* received_parameter(size_t k) override {
    return state_->backend().device_address(boundary_.received_training[k]);
  }
  void* received_gradient(size_t k) override {
    return state_->backend().device_address(boundary_.received_gradients[k]);
  }
  void run_training(const StageMicroBatch& batch) override { state_->accumulate(batch.training.bindings()); }
  void copy(void* destination, const void* source, size_t bytes) override;
  void add(void* destination, const void* source, const graph::TensorType& type) override;
  void zero(void* destination, size_t bytes) override;
  const void* outgoing(const void* data, size_t) override { return data; }
  void exchange(const std::function<void()>& post) override;
  double loss() override { return state_->loss_sum(); }
  // The last stage's bf16 copies of the tied tensors, from the masters the first stage sent.
  void refresh_weights() override;

private:
  StageBoundary boundary_;
  size_t first_entry_;
  bool first_stage_;
  std::unique_ptr<CudaRankState> state_;
  std::optional<runtime::CudaBackend> forward_;  // every stage but the last
  std::optional<cuda::Event> training_ready_, forward_done_;
  std::vector<cuda::DeviceBuffer<std::byte>> buffers_;  // allocate()'s (moving one keeps its memory)
};

}  // namespace surogate::train
