// A GPU rank's plans, for both strategies of the parallel device (rank_backend.h): the rank's
// CudaRankState (its training plan — a replica's whole model, or a pipeline stage's — with bf16
// weights, fp32 masters, gradient accumulators and the optimizer for the rank's tensors) and, on
// every stage but the last, the stage's forward plan on a second CudaBackend that reads the
// training backend's parameters in place (CudaBackend::share_parameters_with: nothing to refresh
// after an update but the last stage's bf16 copies of the tied tensors).
//   A replica drives it as its ReplicaRunner: each micro-batch enqueued (its gradients added by
//     the state, or by the reduction's observers under ZeRO-2/3), its losses read back, fp8_hybrid's
//     state and the kept outputs (cuda_rank/output_readback.h).
//   A stage drives it as its StageDevice (stage_device.h, under pipeline_stage.h): everything is
//     enqueued on the training backend's stream; the forward backend's stream joins it by events
//     around each forward, so the two plans run in one order and a send (on the training stream)
//     reads a plan's output before the next run overwrites it. A round's transfers are one NCCL
//     group. Nothing waits on the host but CudaBackend's input staging (for the previous execute's
//     upload, of an earlier round).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cuda/device_buffer.h"
#include "runtime/cuda_backend.h"
#include "train/device/cuda_rank/output_readback.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/parallel/rank_backend.h"
#include "train/device/parallel/stage_device.h"

namespace surogate::train {

class CudaRankPlans final : public ReplicaRunner, public StageDevice {
public:
  // A replica's, over `state` (made on the rank's GPU). `plan`: the one the rank runs;
  // `max_micro_batches`: a rank's in one step; `observers_add` (ZeRO-2/3): every micro-batch's
  // gradients are added by the reduction's observer, not only the last one's.
  CudaRankPlans(std::unique_ptr<CudaRankState> state, const compiler::ExecutionPlan& plan, int64_t max_micro_batches,
                bool observers_add);
  // A pipeline stage's, over `state` (its training plan, on the current CUDA device): `plan` is the
  // stage's (it must outlive the plans), `boundary` stage_boundary(plan), and the stage's own
  // trainable entries start at `first_entry` (a later stage holds the tied tensors before them).
  // The forward backend binds its kernels from `forward_ops` (null: the built-in table; with
  // sequence parallelism it has its own group).
  CudaRankPlans(std::unique_ptr<CudaRankState> state, const TrainingDeviceSetup& setup, const PipelineStagePlan& plan,
                StageBoundary boundary, size_t first_entry, const runtime::CudaOpTable* forward_ops = nullptr);
  ~CudaRankPlans() override;
  CudaRankPlans(const CudaRankPlans&) = delete;
  CudaRankPlans& operator=(const CudaRankPlans&) = delete;

  CudaRankState& state() { return *state_; }
  // Releases the state (a replica's, on the rank's thread, in the host's order).
  void release_state() { state_.reset(); }
  // A stage's forward backend's stream (null on the last stage and a replica, which have none).
  cudaStream_t forward_stream() const { return forward_ ? forward_->stream() : nullptr; }

  // A replica's (ReplicaRunner).
  void set_step_observer(runtime::StepObserverList* observers) override {
    state_->backend().set_step_observer(observers);
  }
  void run(const MicroBatch& batch, bool last) override;
  RankMeasure losses() override;
  bool has_router_aux_loss() const override { return state_->router_aux_loss_sum().has_value(); }
  void refresh_fp8_weight_copies() override { state_->refresh_fp8_weight_copies(); }
  float* fp8_state(const Fp8State& fp8) override;
  void roll_fp8_history(const Fp8State& fp8, int64_t step, float headroom = 1.0f) override;
  void drop_fp8_amaxes(const Fp8State& fp8) override;
  // surogate dpo's per-sequence outputs, copied after each micro-batch (made on the rank's thread).
  void keep_outputs(std::span<const graph::TensorId> tensors) override;
  std::vector<KeptOutputs> take_outputs() override {
    return outputs_ ? outputs_->take(state_->stream()) : std::vector<KeptOutputs>{};
  }

  // A stage's (StageDevice).
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
  std::unique_ptr<CudaRankState> state_;
  const compiler::ExecutionPlan& plan_;  // the training plan
  // A replica's.
  int64_t max_micro_batches_ = 1;
  bool observers_add_ = false;
  std::unique_ptr<CudaOutputReadback> outputs_;  // keep_outputs()'s, when asked for
  // A stage's.
  StageBoundary boundary_;
  size_t first_entry_ = 0;
  bool refreshes_tied_ = false;                  // every stage but the first
  std::optional<runtime::CudaBackend> forward_;  // every stage but the last
  std::optional<cuda::Event> training_ready_, forward_done_;
  std::vector<cuda::DeviceBuffer<std::byte>> buffers_;  // allocate()'s (moving one keeps its memory)
};

}  // namespace surogate::train
