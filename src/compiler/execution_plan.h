// The compiler's product: an ExecutionPlan a backend can run with no decisions left.
//
//   forward graph ─► LM-head loss rewrite ─► autodiff ─► recompute ─► [residual offload] ─► verify
//                 ─► memory plan ─► ExecutionPlan
//
// The plan holds the final graph (nodes in execution order), one step per node with the
// placement of every tensor it reads and writes, the region sizes (activation arena,
// parameters, gradients, batch inputs, host) and the I/O bindings: where the caller writes inputs and parameters and
// reads outputs and gradients. It is backend-neutral: a backend binds each step's op to its own
// kernel (the CPU backend through OpDef::cpu) once, when the plan is loaded. Asynchronous steps
// (offload_residual's host copies) say by which later step they must be complete, and each step
// lists the asynchronous steps it must wait for: a backend that runs every step in order ignores
// both.
#pragma once

#include <functional>

#include <map>
#include <string>
#include <vector>

#include "compiler/memory_plan.h"
#include "compiler/recompute.h"
#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::compiler {

struct PlanStep {
  graph::NodeId node = graph::kNoNode;
  std::vector<TensorPlacement> inputs;
  std::vector<TensorPlacement> outputs;
  // A copy (offload_to_host, fetch_from_host: inputs[0] into outputs[0]) that a backend may run
  // beside the steps after it, as long as it is complete before step `complete_by` starts.
  bool asynchronous = false;
  size_t complete_by = 0;
  std::vector<size_t> joins;  // the asynchronous steps that must be complete before this one starts
};

struct ExecutionPlan {
  graph::Graph graph;
  std::vector<PlanStep> steps;  // one per node, in order
  MemoryPlan memory;
  graph::TensorId loss = graph::kNoTensor;  // kNoTensor for forward-only plans
  std::map<graph::TensorId, graph::TensorId> parameter_gradients;  // parameter -> gradient
  size_t forward_steps = 0;     // steps before the first backward/recompute step
  size_t recomputed_nodes = 0;
  size_t offloaded_tensors = 0;  // residual checkpoints kept in host memory (offload_residual)

  const TensorPlacement& placement(graph::TensorId id) const;
  graph::TensorId tensor(std::string_view name) const { return graph.require_tensor(name); }
};

struct CompileOptions {
  RecomputePolicy recompute;
  size_t alignment = 256;
  // The LM-head loss rewrite (compiler/loss_input_grad.h: the loss's gradients from the forward,
  // for frozen and trainable heads); off only to compare against it.
  bool loss_input_grad_in_forward = true;
  // offload_residual: the residual stream's checkpoints wait for the backward in host memory
  // (compiler/residual_offload.h).
  bool offload_residual = false;
  // A rewrite of the training graph right after autodiff, before recompute: a model-level pass
  // over forward and backward nodes together (models/fp8_fusion.h's fuse_fp8_gradients). Empty:
  // none.
  std::function<graph::Graph(graph::Graph)> rewrite_training_graph = {};
  // Read by the recompute choice only (compiler/recompute_choice.h), to weigh re-running attention
  // against re-running products: the training data's attention span (data/packing.h), 0 when it is
  // not known (the dry run), which takes documents as long as the rows.
  int64_t attention_span = 0;
};

// Training: forward + derived backward, recompute (and the residual offload) applied, memory planned.
ExecutionPlan compile_training(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry,
                               const CompileOptions& options = {});
// Forward only (evaluation): the graph as given, memory planned.
ExecutionPlan compile_forward(graph::Graph forward, const graph::OpRegistry& registry, const CompileOptions& options = {});

// The `debug_memory_breakdown` report: region sizes, per-category bytes at the peak step,
// and the largest arena tensors with their lifetimes. `optimizer_state_bytes` is the
// optimizer's own figure, shown for a complete total.
std::string format_memory_breakdown(const ExecutionPlan& plan, size_t top_tensors = 10, size_t optimizer_state_bytes = 0);

}  // namespace surogate::compiler
