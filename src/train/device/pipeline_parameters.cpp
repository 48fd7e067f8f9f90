// The pipeline stages' parameters and micro-batches; see pipeline_parameters.h.
#include "train/device/pipeline_parameters.h"

#include <map>

#include "core/error.h"

namespace surogate::train {

std::set<std::string> tied_pipeline_parameters(const PipelinePlan& pipeline, std::span<const models::ParameterSpec> specs) {
  std::set<std::string> names;
  for (const models::ParameterSpec& spec : specs) names.insert(spec.name);
  std::map<std::string, std::vector<int>> readers;
  for (const PipelineStagePlan& stage : pipeline.stages) {
    for (graph::TensorId id : stage.training.graph.parameters) {
      const std::string& name = stage.training.graph.tensor(id).name;
      if (names.contains(name)) readers[name].push_back(stage.graph.stage);
    }
  }
  const int last = static_cast<int>(pipeline.stages.size()) - 1;
  std::set<std::string> tied;
  for (const auto& [name, stages] : readers) {
    if (stages.size() == 1) continue;
    SUROGATE_CHECK(stages.size() == 2 && stages[0] == 0 && stages[1] == last,
                   "parameter '{}' is shared only by the first and the last stage", name);
    tied.insert(name);
  }
  return tied;
}

std::vector<models::ParameterSpec> stage_parameter_specs(const PipelineStagePlan& stage,
                                                         std::span<const models::ParameterSpec> specs,
                                                         const std::set<std::string>& first) {
  std::vector<models::ParameterSpec> front, rest;
  for (const models::ParameterSpec& spec : specs) {
    if (!stage.training.graph.find_tensor(spec.name)) continue;
    (first.contains(spec.name) ? front : rest).push_back(spec);
  }
  front.insert(front.end(), rest.begin(), rest.end());
  return front;
}

StageMicroBatch take_stage_micro_batch(const PipelineStagePlan& stage, const compiler::ExecutionPlan& source,
                                       std::span<const runtime::InputBinding> inputs, int sequence,
                                       int sequence_ranks) {
  StageMicroBatch batch;
  batch.training = copy_micro_batch(source, stage.training, inputs, sequence, sequence_ranks);
  if (!stage.graph.sent.empty()) {
    batch.forward = copy_micro_batch(source, stage.forward, inputs, sequence, sequence_ranks);
  }
  return batch;
}

}  // namespace surogate::train
