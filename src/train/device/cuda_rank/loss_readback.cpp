// A CUDA rank's micro-batch losses; see loss_readback.h.
#include "train/device/cuda_rank/loss_readback.h"

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "models/decoder_graph.h"

namespace surogate::train {

CudaLossReadback::CudaLossReadback(const compiler::ExecutionPlan& plan, int64_t max_micro_batches)
    : max_micro_batches_(max_micro_batches), losses_(static_cast<size_t>(2 * max_micro_batches)) {
  if (plan.loss != graph::kNoTensor && plan.graph.tensor(plan.loss).type.dtype == DType::F32) loss_ = plan.loss;
  router_aux_loss_ = plan.graph.find_tensor(models::kRouterAuxLoss).value_or(graph::kNoTensor);
}

void CudaLossReadback::check_room() const {
  if (micro_batches_ >= max_micro_batches_) {
    fail_user("internal: more micro-batches than gradient_accumulation_steps ({}) in one step", max_micro_batches_);
  }
}

void CudaLossReadback::record(runtime::CudaBackend& backend) {
  check_room();
  cudaStream_t stream = backend.stream();
  if (loss_ != graph::kNoTensor) {
    CUDA_CHECK(cudaMemcpyAsync(losses_.data + micro_batches_, backend.device_address(loss_), sizeof(float),
                               cudaMemcpyDeviceToHost, stream));
  } else {
    losses_.data[micro_batches_] = 0.0f;
  }
  if (router_aux_loss_ != graph::kNoTensor) {  // the second half holds the aux losses
    CUDA_CHECK(cudaMemcpyAsync(losses_.data + max_micro_batches_ + micro_batches_,
                               backend.device_address(router_aux_loss_), sizeof(float), cudaMemcpyDeviceToHost,
                               stream));
  }
  ++micro_batches_;
}

double CudaLossReadback::sum() {
  double sum = 0.0;
  for (int64_t i = 0; i < micro_batches_; ++i) sum += losses_.data[i];
  router_aux_loss_sum_.reset();
  if (router_aux_loss_ != graph::kNoTensor) {
    router_aux_loss_sum_ = 0.0;
    for (int64_t i = 0; i < micro_batches_; ++i) *router_aux_loss_sum_ += losses_.data[max_micro_batches_ + i];
  }
  micro_batches_ = 0;
  return sum;
}

}  // namespace surogate::train
