// The pipeline's transfers arranged so that a rendezvous transport cannot deadlock (NCCL's
// ncclSend / ncclRecv: a send completes only once its peer posts the matching receive, and a
// stream runs its transfers in order). Each stage runs its 1F1B steps in order
// (pipeline_schedule.h); the steps are placed in rounds — a step runs in the first round after the
// rounds that produced its inputs — and every transfer a round's steps produce (the boundary
// tensors of a forward, the received tensors' gradients of a backward) belongs to that round on
// both sides: the sender posts it after its step, the receiver in the same round, whenever it will
// use the data. Each stage's program is, round by round, its step (if any) and then one group of
// its transfers of that round (ncclGroupStart / End: the transfers of a group progress
// independently), the groups listed in one order on every rank. The transfers of round r then only
// wait for transfers of rounds before r on every rank, so every group completes (by induction on
// the rounds) whatever the boundary tensors are: adjacent stages, or a tensor read by several later
// stages. The price is that a receiver keeps data from the round it arrives until its step uses it
// (at most the micro-batches in flight at that stage, pipeline_plan.h's extra bytes).
// Backend-independent: the CUDA pipeline device runs it on NCCL; the tests replay it against a
// model of rendezvous transfers.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "distributed/pipeline_graph.h"
#include "distributed/pipeline_schedule.h"

namespace surogate::distributed {

// One boundary tensor of one micro-batch, from one stage to another: the tensor itself (forward)
// or its gradient (coming back from a reader to the stage that computed it).
struct PipelineTransfer {
  std::string tensor;  // the boundary tensor's name
  int micro_batch = 0;
  bool gradient = false;
  int sender = 0, receiver = 0;  // stages
  bool operator==(const PipelineTransfer&) const = default;
};

// What one stage does in one round: its step, then its transfers of the round (sends and receives,
// in the order every rank lists them), as one group.
struct PipelineRound {
  std::optional<PipelineStep> step;
  std::vector<PipelineTransfer> transfers;
};

// Every stage's program for one optimizer step of `micro_batches` micro-batches, stage s's rounds
// (those where it has a step or a transfer) in program[s]. `stages[s]` is stage s's graph (its
// received and sent boundary tensors).
std::vector<std::vector<PipelineRound>> pipeline_rounds(std::span<const StageGraph* const> stages, int micro_batches);

}  // namespace surogate::distributed
