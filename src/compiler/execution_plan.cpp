// compile_training / compile_forward: run the passes in order and lay the steps out.
#include "compiler/execution_plan.h"

#include <algorithm>

#include "compiler/autodiff.h"
#include "compiler/loss_input_grad.h"
#include "compiler/residual_offload.h"
#include "core/error.h"
#include "graph/verifier.h"

namespace surogate::compiler {
namespace {

using namespace surogate::graph;

void lay_out_steps(ExecutionPlan& plan, const HostTransfers& transfers = {}) {
  plan.forward_steps = plan.graph.nodes.size();
  for (size_t i = 0; i < plan.graph.nodes.size(); ++i) {
    const Node& node = plan.graph.nodes[i];
    if (node.phase != NodePhase::Forward && plan.forward_steps == plan.graph.nodes.size()) plan.forward_steps = i;
    PlanStep step;
    step.node = static_cast<NodeId>(i);
    for (TensorId id : node.inputs) step.inputs.push_back(plan.placement(id));
    for (TensorId id : node.outputs) step.outputs.push_back(plan.placement(id));
    plan.steps.push_back(std::move(step));
  }
  for (const auto& [node, complete_by] : transfers.complete_by) {
    PlanStep& step = plan.steps[static_cast<size_t>(node)];
    const Node& copy = plan.graph.node(node);
    SUROGATE_CHECK(copy.inputs.size() == 1 && copy.outputs.size() == 1, "asynchronous step '{}' is one copy", copy.name);
    step.asynchronous = true;
    step.complete_by = static_cast<size_t>(complete_by);
    plan.steps[step.complete_by].joins.push_back(static_cast<size_t>(node));
    // Nothing may read the copy before it is complete.
    for (size_t reader = static_cast<size_t>(node) + 1; reader < step.complete_by; ++reader) {
      const std::vector<TensorId>& inputs = plan.graph.nodes[reader].inputs;
      SUROGATE_CHECK(std::find(inputs.begin(), inputs.end(), copy.outputs[0]) == inputs.end(),
                     "step {} reads '{}' before its copy completes", reader, plan.graph.tensor(copy.outputs[0]).name);
    }
  }
}

}  // namespace

const TensorPlacement& ExecutionPlan::placement(TensorId id) const {
  SUROGATE_CHECK(id >= 0 && static_cast<size_t>(id) < memory.placements.size(), "tensor id {} has no placement", id);
  return memory.placements[static_cast<size_t>(id)];
}

ExecutionPlan compile_training(Graph forward, TensorId loss, const OpRegistry& registry, const CompileOptions& options) {
  verify_graph(forward, registry);
  if (options.loss_input_grad_in_forward) compute_loss_input_grad_in_forward(forward, loss, registry);
  TrainingGraph training = build_training_graph(std::move(forward), loss, registry);
  if (options.rewrite_training_graph) training.graph = options.rewrite_training_graph(std::move(training.graph));
  RecomputeResult recomputed = apply_recompute(training.graph, options.recompute);
  ExecutionPlan plan;
  plan.graph = std::move(recomputed.graph);
  plan.recomputed_nodes = recomputed.recomputed_nodes;
  HostTransfers transfers;
  if (options.offload_residual) {
    ResidualOffloadResult offloaded = apply_residual_offload(plan.graph);
    plan.graph = std::move(offloaded.graph);
    plan.offloaded_tensors = offloaded.offloaded_tensors;
    transfers = std::move(offloaded.transfers);
  }
  plan.loss = training.loss;
  plan.parameter_gradients = std::move(training.parameter_gradients);
  verify_graph(plan.graph, registry);
  plan.memory = plan_memory(plan.graph, options.alignment, transfers);
  lay_out_steps(plan, transfers);
  return plan;
}

ExecutionPlan compile_forward(Graph forward, const OpRegistry& registry, const CompileOptions& options) {
  verify_graph(forward, registry);
  ExecutionPlan plan;
  plan.graph = std::move(forward);
  plan.memory = plan_memory(plan.graph, options.alignment);
  lay_out_steps(plan);
  return plan;
}

}  // namespace surogate::compiler
