// A GPU rank's plans; see cuda_rank_plans.h.
#include "train/device/parallel/cuda_rank_plans.h"

#include <cuda_bf16.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/core_ops.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "cuda/kernels/fp8_quantize.h"
#include "distributed/nccl_group.h"

namespace surogate::train {

CudaRankPlans::CudaRankPlans(std::unique_ptr<CudaRankState> state, const compiler::ExecutionPlan& plan,
                             int64_t max_micro_batches, bool observers_add)
    : state_(std::move(state)), plan_(plan), max_micro_batches_(max_micro_batches), observers_add_(observers_add) {}

CudaRankPlans::CudaRankPlans(std::unique_ptr<CudaRankState> state, const TrainingDeviceSetup& setup,
                             const PipelineStagePlan& plan, StageBoundary boundary, size_t first_entry,
                             const runtime::CudaOpTable* forward_ops)
    : state_(std::move(state)), plan_(plan.training), boundary_(std::move(boundary)), first_entry_(first_entry),
      refreshes_tied_(plan.graph.stage != 0) {
  if (plan.graph.sent.empty()) return;  // the last stage has no forward plan
  forward_.emplace(forward_ops != nullptr ? *forward_ops : runtime::builtin_cuda_ops());
  forward_->share_parameters_with(state_->backend());  // the weights, read in place
  forward_->load(plan.forward, *setup.registry);
  training_ready_.emplace();
  forward_done_.emplace();
}

CudaRankPlans::~CudaRankPlans() {
  // A stage's slots and forward plan's memory may still be read by transfers in flight.
  if (state_) cudaStreamSynchronize(state_->stream());
  if (forward_) cudaStreamSynchronize(forward_->stream());
}

// Only enqueued: the last micro-batch's backward reduces the gradient buckets on the side stream
// (and under ZeRO-3 every micro-batch gathers its weights there).
void CudaRankPlans::run(const MicroBatch& batch, bool last) {
  state_->accumulate(batch.bindings(), !last && !observers_add_);
  if (outputs_) outputs_->record(state_->backend());
}

RankMeasure CudaRankPlans::losses() {
  RankMeasure measure{state_->loss_sum(), 0.0, 0.0};
  measure.router_aux_loss = state_->router_aux_loss_sum().value_or(0.0);  // after loss_sum()
  return measure;
}

float* CudaRankPlans::fp8_state(const Fp8State& fp8) {
  return static_cast<float*>(state_->backend().device_address(fp8.tensor));
}

void CudaRankPlans::roll_fp8_history(const Fp8State& fp8, int64_t step, float headroom) {
  cuda::fp8_roll_history(fp8_state(fp8), fp8.shape.sites, fp8.shape.history, step, state_->stream(), headroom);
}

void CudaRankPlans::drop_fp8_amaxes(const Fp8State& fp8) {
  cuda::fp8_drop_current_amaxes(fp8_state(fp8), fp8.shape.sites, fp8.shape.history, state_->stream());
}

void CudaRankPlans::keep_outputs(std::span<const graph::TensorId> tensors) {
  outputs_.reset();
  if (tensors.empty()) return;
  outputs_ = std::make_unique<CudaOutputReadback>(plan_, std::vector<graph::TensorId>(tensors.begin(), tensors.end()),
                                                  max_micro_batches_);
}

void CudaRankPlans::run_forward(const StageMicroBatch& batch, std::span<void* const> received) {
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

void CudaRankPlans::copy(void* destination, const void* source, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, state_->stream()));
}

void CudaRankPlans::add(void* destination, const void* source, const graph::TensorType& type) {
  if (type.dtype == DType::BF16) {
    cuda::accumulate_16bit(static_cast<const __nv_bfloat16*>(source), static_cast<__nv_bfloat16*>(destination),
                           type.numel(), state_->stream());
  } else {
    cuda::accumulate_f32(static_cast<const float*>(source), static_cast<float*>(destination), type.numel(),
                         state_->stream());
  }
}

void CudaRankPlans::zero(void* destination, size_t bytes) {
  CUDA_CHECK(cudaMemsetAsync(destination, 0, bytes, state_->stream()));
}

// One group: the round's sends and receives progress independently (pipeline_rounds.h).
void CudaRankPlans::exchange(const std::function<void()>& post) {
  distributed::NcclGroup group;
  post();
  group.close();
}

void CudaRankPlans::refresh_weights() {
  if (refreshes_tied_) state_->masters().refresh_weights(0, first_entry_, state_->stream());
}

}  // namespace surogate::train
