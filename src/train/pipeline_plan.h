// The plans of a pipeline-parallel run (pipeline_parallel_size > 1; docs/architecture.md,
// "Pipeline parallel"): the model's forward graph split into stages (distributed/pipeline_graph.h)
// at the boundaries the configuration sets or the per-layer cost balances
// (distributed/pipeline_stages.h), and each stage compiled — its training plan with the recompute
// its memory requires (as train/training_plan.h chooses it for a whole model), and on every stage
// but the last the forward plan that passes micro-batches on. What a stage holds beside its
// training plan (the forward plan's arena and weights, the received and sent tensors of the
// micro-batches in flight under 1F1B) is its `extra_bytes`.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "compiler/recompute_choice.h"
#include "config/config.h"
#include "distributed/pipeline_graph.h"
#include "distributed/pipeline_stages.h"
#include "graph/op_registry.h"

namespace surogate::train {

struct PipelineStagePlan {
  distributed::StageGraph graph;      // the stage's graphs and boundary tensors
  compiler::ExecutionPlan forward;    // every stage but the last
  compiler::ExecutionPlan training;
  compiler::RecomputeChoice recompute;
  size_t extra_bytes = 0;
};

struct PipelinePlan {
  std::vector<distributed::StageLayers> layers;
  std::vector<PipelineStagePlan> stages;
  int micro_batches = 1;  // per optimizer step and replica: gradient_accumulation_steps
  // "2 stages (layers 0–13 | 14–27, balanced by cost), 1F1B over 8 micro-batches: bubble 11%"
  std::string describe() const;
};

// Whether a stage's training plan fits, given what the stage holds beside it.
using StagePlanFits = std::function<bool(const compiler::ExecutionPlan& training, size_t extra_bytes)>;

// `forward` / `loss`: the whole model's forward graph as train/training_plan.h builds it.
PipelinePlan plan_pipeline(const Config& config, const graph::Graph& forward, graph::TensorId loss, int64_t layers,
                           const graph::OpRegistry& registry, const compiler::CompileOptions& options,
                           const StagePlanFits& fits);

// debug_memory_breakdown: the plan's largest tensors by category (compiler::format_memory_breakdown), or,
// for a pipeline (`pipeline` not null), each stage's own plan's.
std::string format_run_memory_breakdown(const compiler::ExecutionPlan& plan, const PipelinePlan* pipeline,
                                        size_t optimizer_bytes);

}  // namespace surogate::train
