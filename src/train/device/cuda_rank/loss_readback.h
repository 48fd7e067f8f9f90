// A CUDA rank's micro-batch losses: after each micro-batch the plan's fp32 loss (and the MoE router
// aux loss, where the plan has it) is copied to pinned host memory on the stream, and sum() adds
// them up once the stream is synchronized. A plan whose loss is not an fp32 scalar (a pipeline
// stage before the last, whose bf16 "loss" only seeds its backward) reports 0.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>

#include "compiler/execution_plan.h"
#include "runtime/cuda_backend.h"
#include "train/device/cuda_rank/pinned_floats.h"

namespace surogate::train {

class CudaLossReadback {
public:
  // Room for `max_micro_batches` micro-batches between two sum() calls.
  CudaLossReadback(const compiler::ExecutionPlan& plan, int64_t max_micro_batches);

  // Before a micro-batch runs: UserError (internal) when max_micro_batches were recorded already.
  void check_room() const;
  // The micro-batch `backend` just enqueued: its losses copied on the backend's stream.
  void record(runtime::CudaBackend& backend);
  // The summed losses since the last call (after the stream is synchronized); the router aux
  // losses' sum is then router_aux_loss_sum() (none without that loss).
  double sum();
  std::optional<double> router_aux_loss_sum() const { return router_aux_loss_sum_; }

private:
  int64_t max_micro_batches_;
  graph::TensorId loss_ = graph::kNoTensor, router_aux_loss_ = graph::kNoTensor;
  std::optional<double> router_aux_loss_sum_;
  PinnedFloats losses_;  // the losses, then the aux losses (max_micro_batches_ each)
  int64_t micro_batches_ = 0;
};

}  // namespace surogate::train
