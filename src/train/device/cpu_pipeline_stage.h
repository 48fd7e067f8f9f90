// One pipeline stage as a CPU rank runs it (train/device/parallel/cpu_rank_host_stages.cpp): the stage's
// training plan on one CpuBackend (its parameters are the rank's masters, its gradients the ones
// the optimizer reads) and, on every stage but the last, its forward plan on a second CpuBackend
// whose weights are copies (refresh_forward_weights after every change). run() takes one optimizer
// step's micro-batches through the stage in 1F1B order (distributed/pipeline_schedule.h):
//   forward(m):  receive the boundary tensors of m from the earlier stages; the forward plan
//                computes the tensors this stage sends on, which are posted to the later stages;
//   backward(m): receive the gradients of the sent tensors from the later stages (summed when a
//                tensor goes to several), write m's received tensors into the training plan (they
//                are its trainable parameters, pipeline_graph.h), zero their gradients, run the
//                training plan (the stage's forward again, then its backward: the parameter
//                gradients accumulate across micro-batches) and post the received tensors'
//                gradients back to the stages that sent them.
// The last stage has no forward plan: its forward(m) only receives, its backward(m) runs the
// training plan with the model's loss. Every transfer is between the ranks of one replica and
// sequence index (with sequence parallelism each stage's plans hold a slice's tensors), tagged
// by micro-batch, direction and boundary tensor, posted without waiting (the sends of a step are
// waited for at its end), so the schedule's order is the only ordering and no stage waits for
// another except for the data it needs.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "graph/op_registry.h"
#include "runtime/cpu_backend.h"
#include "train/device/pipeline_parameters.h"
#include "train/pipeline_plan.h"

namespace surogate::train {

class CpuPipelineStage {
public:
  // `boundary_tags`: every boundary tensor's index, the same on every rank (transfer tags).
  CpuPipelineStage(const PipelineStagePlan& plan, const graph::OpRegistry& registry, int stages,
                   const std::map<std::string, uint32_t>& boundary_tags);

  const PipelineStagePlan& plan() const { return plan_; }
  runtime::CpuBackend& training() { return training_; }
  bool last() const { return plan_.graph.sent.empty(); }
  // The micro-batch's inputs this stage's plans read: rank `sequence` of a sequence group of
  // `sequence_ranks` keeps its slice of the token inputs (micro_batch.h).
  StageMicroBatch take(const compiler::ExecutionPlan& source, std::span<const runtime::InputBinding> inputs,
                       int sequence = 0, int sequence_ranks = 1) const;
  // The forward plan's weights ← the training plan's: every fp32 weight (after loading or a
  // resume), or only the trained ones (after an update).
  void refresh_forward_weights(bool trained_only);
  // Writes a weight the stage's plans hold (both backends; nothing when they hold none).
  void write_weight(const std::string& name, std::span<const std::byte> bytes);

  // One optimizer step's micro-batches; `peer(stage)` is the global rank of that stage in this
  // rank's replica, at its sequence index. Returns the summed loss on the last stage, 0 elsewhere.
  double run(std::span<const StageMicroBatch> batches, distributed::Communicator& world,
             const std::function<int(int stage)>& peer);

private:
  void forward(int micro_batch, const StageMicroBatch& batch, distributed::Communicator& world,
               const std::function<int(int)>& peer);
  double backward(int micro_batch, const StageMicroBatch& batch, distributed::Communicator& world,
                  const std::function<int(int)>& peer);
  uint32_t tag(int micro_batch, bool gradient, const std::string& tensor) const;

  const PipelineStagePlan& plan_;
  const int stages_;
  const std::map<std::string, uint32_t>& boundary_tags_;
  runtime::CpuBackend training_;
  runtime::CpuBackend forward_;  // every stage but the last
  // Boundary tensors' ids: received ones in the training plan (parameters), their gradients, and
  // in the forward plan (inputs); sent ones in the forward plan (outputs) and their gradient inputs
  // in the training plan.
  std::vector<graph::TensorId> received_training_, received_gradients_, received_forward_;
  std::vector<graph::TensorId> sent_forward_, sent_gradient_inputs_;
  // Weights both plans hold, (training id, forward id): trained, and frozen fp32 ones.
  std::vector<std::pair<graph::TensorId, graph::TensorId>> trained_weights_, frozen_weights_;
  // Per micro-batch of the step: received tensors, sent tensors, gradients to send back.
  std::vector<std::vector<std::vector<float>>> received_, sent_, returned_;
  std::vector<float> incoming_;   // one gradient from one later stage, before it is summed
  std::vector<std::vector<float>> gradients_;  // the summed gradients of the sent tensors (one micro-batch)
};

}  // namespace surogate::train
