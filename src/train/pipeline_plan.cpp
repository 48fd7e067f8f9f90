// The pipeline's stage plans; see pipeline_plan.h.
#include "train/pipeline_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "distributed/pipeline_schedule.h"

namespace surogate::train {
namespace {

size_t boundary_bytes(const graph::Graph& graph, const std::vector<distributed::BoundaryTensor>& tensors) {
  size_t bytes = 0;
  for (const distributed::BoundaryTensor& tensor : tensors) bytes += graph.tensor(graph.require_tensor(tensor.name)).type.size_bytes();
  return bytes;
}

}  // namespace

std::string PipelinePlan::describe() const {
  const int count = static_cast<int>(stages.size());
  return fmt::format("{} stages ({}), 1F1B over {} micro-batch{} per step: bubble {:.0f}% of a step", count,
                     distributed::describe_stages(layers), micro_batches, micro_batches == 1 ? "" : "es",
                     100.0 * distributed::pipeline_bubble_fraction(count, micro_batches));
}

PipelinePlan plan_pipeline(const Config& config, const graph::Graph& forward, graph::TensorId loss, int64_t layers,
                           const graph::OpRegistry& registry, const compiler::CompileOptions& options,
                           const StagePlanFits& fits) {
  PipelinePlan result;
  result.micro_batches = static_cast<int>(std::max<int64_t>(1, config.schedule.gradient_accumulation_steps));
  result.layers =
      distributed::choose_stages(config.parallel, config.sources, distributed::layer_costs(forward, layers));
  std::vector<distributed::StageGraph> graphs = distributed::split_pipeline_stages(forward, loss, registry, result.layers);
  const int count = static_cast<int>(graphs.size());
  for (distributed::StageGraph& graph : graphs) {
    PipelineStagePlan stage;
    // Micro-batches in flight at this stage under 1F1B: their received inputs and sent outputs.
    const size_t in_flight = static_cast<size_t>(std::min(count - graph.stage, result.micro_batches));
    stage.extra_bytes = in_flight * (boundary_bytes(graph.training, graph.received) +
                                     (graph.sent.empty() ? 0 : boundary_bytes(graph.forward, graph.sent)));
    if (!graph.sent.empty()) {
      stage.forward = compiler::compile_forward(graph.forward, registry);
      stage.extra_bytes += stage.forward.memory.arena_bytes + stage.forward.memory.parameter_bytes;
    }
    const size_t extra = stage.extra_bytes;
    stage.training = compiler::compile_training_to_fit(
        graph.training, graph.loss, registry, options, layers, config.run.apply_recommended_values,
        [&](const compiler::ExecutionPlan& plan) { return fits(plan, extra); }, &stage.recompute);
    stage.graph = std::move(graph);
    result.stages.push_back(std::move(stage));
  }
  return result;
}

std::string format_run_memory_breakdown(const compiler::ExecutionPlan& plan, const PipelinePlan* pipeline,
                                        size_t optimizer_bytes) {
  if (pipeline == nullptr) return compiler::format_memory_breakdown(plan, 10, optimizer_bytes);
  std::string text;
  for (size_t stage = 0; stage < pipeline->stages.size(); ++stage) {
    if (stage > 0) text += "\n";
    text += fmt::format("pipeline stage {}:\n{}", stage, compiler::format_memory_breakdown(pipeline->stages[stage].training, 10));
  }
  return text;
}

}  // namespace surogate::train
