// What the pipeline stage (pipeline_stage.h, the 1F1B algorithm written once) asks of the rank's
// device, implemented by each backend's plans class (cpu_rank_plans.h, cuda_rank_plans.h), which
// holds the stage's plans — its training plan and, on every stage but the last, its forward plan —
// and does the few things that differ between backends: running a plan, where a boundary tensor's
// bytes are, copying / adding / zeroing them, a send's buffer, a round's group of transfers, the
// losses and what reads the weights after an update. Boundary tensors are numbered as in the
// stage's graph (StageBoundary below); memory is the device's (host memory for a CPU, device
// memory for a GPU) and everything is done, or enqueued on the device, in the order it is called.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "train/device/pipeline_parameters.h"
#include "train/pipeline_plan.h"

namespace surogate::train {

// A stage's boundary tensors in its plans: received k is graph.received[k], sent k graph.sent[k].
struct StageBoundary {
  // Received tensors: in the training plan (trainable parameters, pipeline_graph.h), their
  // gradients, their types, and in the forward plan (inputs; none on the last stage).
  std::vector<graph::TensorId> received_training, received_gradients, received_forward;
  std::vector<graph::TensorType> received_types;
  // Sent tensors: in the forward plan (outputs), their gradients' inputs in the training plan, their types.
  std::vector<graph::TensorId> sent_forward, sent_gradient_inputs;
  std::vector<graph::TensorType> sent_types;
};
// Looks the stage's boundary tensors up in its plans; each is bf16 or fp32 (the collectives' dtypes).
StageBoundary stage_boundary(const PipelineStagePlan& plan);

class StageDevice {
public:
  virtual ~StageDevice() = default;

  // `bytes` of the device's memory, alive as long as the device (a received tensor's slot).
  virtual void* allocate(size_t bytes) = 0;
  // The forward plan on `batch`'s inputs, received tensor k read from `received[k]`.
  virtual void run_forward(const StageMicroBatch& batch, std::span<void* const> received) = 0;
  // Where the last run_forward left sent tensor k.
  virtual const void* sent(size_t k) = 0;
  // Where the training plan reads the summed gradient of sent tensor k.
  virtual void* sent_gradient(size_t k) = 0;
  // Received tensor k in the training plan, and its gradient there.
  virtual void* received_parameter(size_t k) = 0;
  virtual void* received_gradient(size_t k) = 0;
  // The training plan on `batch`'s inputs (and the sent tensors' gradients): the stage's forward
  // again, then its backward, the parameters' gradients added up across micro-batches and its loss
  // (the last stage's) summed.
  virtual void run_training(const StageMicroBatch& batch) = 0;
  virtual void copy(void* destination, const void* source, size_t bytes) = 0;
  // destination += source, in their dtype (bf16: an fp32 sum rounded once).
  virtual void add(void* destination, const void* source, const graph::TensorType& type) = 0;
  virtual void zero(void* destination, size_t bytes) = 0;
  // What a send posts for `data`: bytes that stay as they are until the step's sends are waited
  // for (a CPU copies them: its plans run on while a send is in flight; a GPU's stream orders it).
  virtual const void* outgoing(const void* data, size_t bytes) = 0;
  // The step's sends have completed (Communicator::wait_sends): outgoing()'s copies can go.
  virtual void sends_done() {}
  // Posts one round's transfers (`post`) as one group where the transport needs it (NCCL).
  virtual void exchange(const std::function<void()>& post) { post(); }
  // The training plan's losses summed since the last call (the last stage's are the model's).
  virtual double loss() = 0;
  // After the weights changed (the group's and the tied pair's exchanges): what reads them rewritten.
  virtual void refresh_weights() = 0;
};

}  // namespace surogate::train
