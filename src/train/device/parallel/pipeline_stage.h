// One pipeline stage on a rank, written once for every backend (the StageRunner of stage_ranks.h):
// the 1F1B algorithm over the rank's StageDevice (stage_device.h: the stage's plans on a CPU or a
// GPU). run() takes one optimizer step's micro-batches through the stage in the rounds of
// distributed/pipeline_rounds.h (the 1F1B order of pipeline_schedule.h, each step's transfers in
// the round after it):
//   forward(m):  m's received boundary tensors (from the earlier stages) read by the forward plan,
//                which computes the tensors this stage sends on; they are sent to the later stages;
//   backward(m): the gradients of the sent tensors (summed, in stage order, when a tensor goes to
//                several later stages) given to the training plan, m's received tensors written
//                into it (they are its trainable parameters, pipeline_graph.h) with their gradients
//                zeroed, the training plan run (the stage's forward again, then its backward: the
//                parameter gradients accumulate across micro-batches) and the received tensors'
//                gradients sent back to the stages that sent them.
// The last stage has no forward plan: its forward(m) does nothing, its backward(m) runs the
// training plan with the model's loss. Each round's transfers are one group (the device's
// exchange(): NCCL's group; a CPU's sends are posted and return), listed in one order on every
// rank, so no transport can deadlock (pipeline_rounds.h); a received tensor waits in a slot of its
// own (per direction, tensor and sender; reused once its backward ran) until its step reads it.
// Transfers are between the ranks of one replica and sequence index, tagged by micro-batch,
// direction and boundary tensor (gloo matches by tag, NCCL by order). The slots are allocated
// before a step's first transfer (prepare(): at start-up for the configured count).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/execution_plan.h"
#include "distributed/communicator.h"
#include "distributed/pipeline_rounds.h"
#include "train/device/parallel/rank_backend.h"
#include "train/device/parallel/stage_device.h"
#include "train/pipeline_plan.h"

namespace surogate::train {

class PipelineStage final : public StageRunner {
public:
  // `source`: the trainer's plan, for which the inputs are bound; `plan`: the stage's; `stages`:
  // every stage's graph (the transfers' program and tags); `boundary`: stage_boundary(plan). The
  // plans must outlive the stage.
  PipelineStage(const compiler::ExecutionPlan& source, const PipelineStagePlan& plan,
                std::vector<const distributed::StageGraph*> stages, StageBoundary boundary,
                std::unique_ptr<StageDevice> device);

  bool last() const { return plan_.graph.sent.empty(); }
  StageDevice& device() { return *device_; }
  // The program and receive slots of a step of `micro_batches` (run() makes them for a count it has
  // not seen, before its first transfer).
  void prepare(int micro_batches) { program(micro_batches); }

  StageMicroBatch take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) override;
  void run(std::span<const StageMicroBatch> batches, distributed::Communicator& world,
           const std::function<int(int stage)>& peer) override;
  // Every stage reads its device's loss sum: that also starts the next step's count.
  double loss() override;
  void refresh_weights() override { device_->refresh_weights(); }

private:
  // Where a received tensor of one micro-batch waits: per (gradient?, tensor, sender) a pool of
  // slots, and the slot each micro-batch uses, fixed by replaying the program.
  using Channel = std::tuple<bool, std::string, int>;
  struct Program {
    std::vector<distributed::PipelineRound> rounds;
    std::map<std::tuple<bool, std::string, int, int>, size_t> slot;  // (channel, micro-batch) -> slot
    std::map<Channel, size_t> slots;                                  // slots each channel needs
  };
  const Program& program(int micro_batches);
  void* received(bool gradient, const std::string& tensor, int sender, int micro_batch) const;
  // `sent_tensor`: one of the stage's sent tensors, else a received one.
  const graph::TensorType& type(bool sent_tensor, const std::string& tensor) const;
  void forward(int micro_batch, const StageMicroBatch& batch);
  void backward(int micro_batch, const StageMicroBatch& batch);
  void transfer(const distributed::PipelineTransfer& transfer, distributed::Communicator& world,
                const std::function<int(int)>& peer);
  uint32_t tag(int micro_batch, bool gradient, const std::string& tensor) const;

  const compiler::ExecutionPlan& source_;
  const PipelineStagePlan& plan_;
  std::vector<const distributed::StageGraph*> stages_;
  StageBoundary boundary_;
  std::unique_ptr<StageDevice> device_;
  std::map<std::string, size_t> received_index_, sent_index_;  // boundary tensors by name
  std::map<std::string, uint32_t> tags_;  // every boundary tensor's index, the same on every rank
  std::map<int, Program> programs_;       // by micro-batches per step
  std::map<Channel, std::vector<void*>> slots_;  // the device's buffers
  const Program* current_ = nullptr;
};

}  // namespace surogate::train
