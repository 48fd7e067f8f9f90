// The memory-driven recompute choice; see recompute_choice.h.
#include "compiler/recompute_choice.h"

#include <fmt/format.h>

#include "core/strings.h"

namespace surogate::compiler {
namespace {

std::string describe(const ExecutionPlan& plan, const RecomputePolicy& policy, int64_t layers) {
  const std::string arena = fmt::format("activation arena {}", format_memory_size(plan.memory.arena_bytes));
  if (!policy.any()) return fmt::format("recompute: none needed — every activation is kept ({})", arena);
  if (policy.keep_expensive_layers >= layers && policy.keep_all_layers > 0) {
    return fmt::format("recompute: norms, RoPE, SwiGLU and dropout re-run in the backward in {} of {} layers, every "
                       "activation kept in the other {} (more would not fit); matmul and attention outputs kept in "
                       "all layers ({})", layers - policy.keep_all_layers, layers, policy.keep_all_layers, arena);
  }
  if (policy.keep_expensive_layers >= layers) {
    return fmt::format("recompute: norms, RoPE, SwiGLU and dropout re-run in the backward; matmul and attention "
                       "outputs kept in all {} layers, as memory allows ({})", layers, arena);
  }
  if (policy.block_inputs_only) {
    return fmt::format("recompute: everything, matmuls and attention included, and the residual stream inside each "
                       "block: only each block's input is kept ({})", arena);
  }
  if (policy.keep_expensive_layers <= 0) {
    return fmt::format("recompute: everything the recompute_* options enable, matmuls and attention included ({})",
                       arena);
  }
  return fmt::format("recompute: norms, RoPE, SwiGLU and dropout re-run in the backward; matmul and attention outputs "
                     "kept in {} of {} layers (more would not fit), re-run in the others ({})",
                     policy.keep_expensive_layers, layers, arena);
}

}  // namespace

ExecutionPlan compile_training_to_fit(const graph::Graph& forward, graph::TensorId loss,
                                      const graph::OpRegistry& registry, const CompileOptions& options,
                                      int64_t layers, bool recommended, const PlanFits& fits,
                                      RecomputeChoice* choice) {
  RecomputeChoice local;
  RecomputeChoice& out = choice != nullptr ? *choice : local;
  out = {};
  out.layers = layers;
  auto compile = [&](const RecomputePolicy& policy) {
    CompileOptions with = options;
    with.recompute = policy;
    ++out.compiled_plans;
    return compile_training(forward, loss, registry, with);
  };
  auto finish = [&](ExecutionPlan plan, const RecomputePolicy& policy, bool fitted) {
    out.policy = policy;
    out.fits = fitted;
    out.summary = describe(plan, policy, layers);
    return plan;
  };

  RecomputePolicy allowed = recommended ? RecomputePolicy::all() : options.recompute;
  allowed.keep_expensive_layers = 0;
  ExecutionPlan nothing = compile(RecomputePolicy::none());
  if (!allowed.any() || fits(nothing)) {
    const bool fitted = fits(nothing);
    return finish(std::move(nothing), RecomputePolicy::none(), fitted);
  }
  if (layers > 0) {
    RecomputePolicy keeping = allowed;
    keeping.keep_expensive_layers = layers;
    ExecutionPlan plan = compile(keeping);
    if (fits(plan)) {
      // Memory between this plan and keeping everything: the largest number of layers that keep
      // their cheap outputs too, by bisection. Invariant: `low` layers fit (0: this plan), `high`
      // are taken not to (all of them is the plan that keeps everything, which did not fit).
      int64_t low = 0, high = layers;
      while (high - low > 1) {
        RecomputePolicy trial = keeping;
        trial.keep_all_layers = low + (high - low) / 2;
        ExecutionPlan candidate = compile(trial);
        if (fits(candidate)) {
          low = trial.keep_all_layers;
          plan = std::move(candidate);
        } else {
          high = trial.keep_all_layers;
        }
      }
      keeping.keep_all_layers = low;
      return finish(std::move(plan), keeping, true);
    }
  }
  ExecutionPlan literal = compile(allowed);
  if (!fits(literal)) {
    // The last tier: only each block's input kept (recompute_block; offload_residual moves the
    // stream to the host instead).
    if (!allowed.block || options.offload_residual) return finish(std::move(literal), allowed, false);
    // Taken only when it fits (with few layers or short rows it can need more than the literal
    // plan: it holds the recomputed attention half through the MLP's backward); otherwise the
    // literal plan is what the device reports.
    RecomputePolicy deeper = allowed;
    deeper.block_inputs_only = true;
    ExecutionPlan plan = compile(deeper);
    if (fits(plan)) return finish(std::move(plan), deeper, true);
    return finish(std::move(literal), allowed, false);
  }
  // Invariant: keeping `low` layers fits (low = 0 is the literal plan), keeping `high` does not.
  int64_t low = 0, high = layers;
  ExecutionPlan best = std::move(literal);
  while (high - low > 1) {
    const int64_t middle = low + (high - low) / 2;
    RecomputePolicy trial = allowed;
    trial.keep_expensive_layers = middle;
    ExecutionPlan candidate = compile(trial);
    if (fits(candidate)) {
      low = middle;
      best = std::move(candidate);
    } else {
      high = middle;
    }
  }
  RecomputePolicy chosen = allowed;
  chosen.keep_expensive_layers = low;
  return finish(std::move(best), chosen, true);
}

}  // namespace surogate::compiler
