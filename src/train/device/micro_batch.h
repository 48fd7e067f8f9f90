// A micro-batch as a multi-rank device keeps it between accumulate() and measure(): its inputs
// copied (the trainer reuses its buffers for the next micro-batch), for the plan the rank runs.
// Under sequence parallelism (distributed/sequence_parallel_graph.h) the trainer binds the whole
// [B, T] micro-batch while a rank's plan takes its token inputs at [B, T/N]: rank s of a sequence
// group of N then keeps tokens [s·T/N, (s+1)·T/N) of every row of those inputs, and the other
// inputs whole (the document ids [B, T], loss_scale), but for the LoRA dropout seed, which each
// rank mixes with its index in the group so that the slices draw independent masks. Inputs are
// matched to the plan by name, so a plan other than the trainer's (a pipeline stage's) takes the
// inputs it has.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "runtime/backend.h"

namespace surogate::train {

struct MicroBatch {
  std::vector<graph::TensorId> tensors;  // of the plan it was copied for
  std::vector<std::vector<std::byte>> bytes;
  std::vector<runtime::InputBinding> bindings() const;
};

// `inputs` are bound for `source` (the trainer's plan, whole [B, T] rows); the copy is for `plan`
// (the same plan, or a sequence-parallel or pipeline-stage plan of the same model), keeping only
// the inputs `plan` has, each sliced for rank `sequence` of `ranks` where `plan` holds it shorter.
MicroBatch copy_micro_batch(const compiler::ExecutionPlan& source, const compiler::ExecutionPlan& plan,
                            std::span<const runtime::InputBinding> inputs, int sequence = 0, int ranks = 1);

}  // namespace surogate::train
