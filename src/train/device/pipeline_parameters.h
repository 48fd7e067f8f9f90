// What the pipeline devices (parallel/pipeline_ranks.cpp and the backends' host sides, cpu_rank_host.h, cuda_rank_host.h) share about the
// stages' parameters and micro-batches, whatever the backend: which parameters two stages read
// (tied embeddings: the first stage owns and steps them, the last stage adds its gradient to the
// first's and takes the updated weight back), which parameters each stage holds, and the inputs of
// a micro-batch each stage keeps until its schedule runs it.
#pragma once

#include <set>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "models/model_spec.h"
#include "runtime/backend.h"
#include "train/device/micro_batch.h"
#include "train/pipeline_plan.h"

namespace surogate::train {

// The parameters (among `specs`) the training graphs of more than one stage read; each must be
// read by the first and the last stage only (an internal error otherwise).
std::set<std::string> tied_pipeline_parameters(const PipelinePlan& pipeline, std::span<const models::ParameterSpec> specs);

// The parameters among `specs` that `stage`'s training plan holds, in spec order, except that
// those named in `first` come before the others (the last stage's tied parameters, so that the
// tensors it steps are one contiguous run).
std::vector<models::ParameterSpec> stage_parameter_specs(const PipelineStagePlan& stage,
                                                         std::span<const models::ParameterSpec> specs,
                                                         const std::set<std::string>& first = {});

// A micro-batch as one stage keeps it: its inputs for the training plan and for the forward plan
// (every stage but the last).
struct StageMicroBatch {
  MicroBatch training;
  MicroBatch forward;
};
// `inputs` are bound for `source` (the trainer's plan); with sequence parallelism rank `sequence`
// of `sequence_ranks` keeps its slice of the token inputs (copy_micro_batch).
StageMicroBatch take_stage_micro_batch(const PipelineStagePlan& stage, const compiler::ExecutionPlan& source,
                                       std::span<const runtime::InputBinding> inputs, int sequence = 0,
                                       int sequence_ranks = 1);

}  // namespace surogate::train
