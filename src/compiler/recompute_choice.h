// How much to recompute, decided by memory. The recompute_* options say which groups *may* be
// recomputed (compiler/recompute.h): recomputation trades compute for memory, so it is used as
// far as the device's memory requires and no further. Re-running a matmul or attention in the
// backward costs about a third of a training step; re-running a norm, RoPE, SwiGLU or dropout
// costs a bandwidth pass. The plans tried, fastest first:
//   1. nothing recomputed; if that plan fits, done;
//   2. the cheap ops of every enabled group re-run, every layer's matmul and attention outputs
//      kept; when that fits, as many layers as fit (by bisection) keep their cheap outputs too
//      and re-run nothing;
//   3. otherwise the literal plan (everything enabled recomputed); if even that does not fit and
//      recompute_block is on (without offload_residual), the residual stream inside each block is
//      recomputed too (RecomputePolicy::block_inputs_only: only each block's input kept), if that
//      fits; when nothing fits, the literal plan is returned (the device then reports what it
//      needs, before any weight is loaded);
//   4. otherwise the largest number of layers that keep their expensive outputs, by bisection.
// What tiers 3 and 4 leave (a layer's expensive outputs no longer fit, or none do) keeps
// attention's outputs alone in as many more layers as fit (RecomputePolicy::keep_attention_layers,
// by bisection): at long context re-running attention is most of what recomputing a layer costs.
// Tier 4 also tries the other order — attention's outputs in as many layers as fit first, then, if
// that is every layer, the expensive outputs of as many as fit beside them — and takes whichever
// plan re-runs fewer FLOPs (compiler/recompute_cost.h), weighing attention by the data's span
// (CompileOptions::attention_span): over documents longer than about a product's input width
// attention's outputs are the cheaper memory to keep.
// The layer counts are of the decoder layers the graph holds (a pipeline stage's range; `layers`,
// the model's count, when the graph names none), so a stage's summary speaks of its own layers.
// With `recommended` (apply_recommended_values) every group is allowed, whatever the options say.
// `fits` is the device's test (train/device/memory_budget.h); a caller with no limit passes
// one that always says yes.
#pragma once

#include <functional>
#include <string>

#include "compiler/execution_plan.h"

namespace surogate::compiler {

struct RecomputeChoice {
  RecomputePolicy policy;  // what the returned plan was compiled with
  int64_t layers = 0;      // the graph's decoder layers (a pipeline stage's own), which the summary counts
  bool fits = true;        // whether the returned plan passed `fits`
  int compiled_plans = 0;  // how many plans were compiled to decide
  std::string summary;     // one line for the log: what is recomputed and what is kept
};

using PlanFits = std::function<bool(const ExecutionPlan&)>;

ExecutionPlan compile_training_to_fit(const graph::Graph& forward, graph::TensorId loss,
                                      const graph::OpRegistry& registry, const CompileOptions& options,
                                      int64_t layers, bool recommended, const PlanFits& fits,
                                      RecomputeChoice* choice = nullptr);

}  // namespace surogate::compiler
