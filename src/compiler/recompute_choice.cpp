// The memory-driven recompute choice; see recompute_choice.h.
#include "compiler/recompute_choice.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/recompute_cost.h"
#include "core/strings.h"

namespace surogate::compiler {
namespace {

// The decoder layers `forward` holds, [first, end): all of them, or a pipeline stage's range.
// Counts below are of these layers; the policy's fields hold layer indices (first + count).
struct LayerRange {
  int64_t first = 0, end = 0;
  int64_t count() const { return end - first; }
};

LayerRange layer_range(const graph::Graph& forward, int64_t layers) {
  LayerRange range{layers, 0};
  for (const graph::Node& node : forward.nodes) {
    const int64_t layer = layer_of(node);
    if (layer < 0) continue;
    range.first = std::min(range.first, layer);
    range.end = std::max(range.end, layer + 1);
  }
  if (range.end <= range.first) return {0, layers};
  return range;
}

// `attention_first`: when the choice kept attention's outputs before any layer's matmul outputs,
// why (appended to what it says of attention).
std::string describe(const ExecutionPlan& plan, const RecomputePolicy& policy, const LayerRange& range,
                     const std::string& attention_first = {}) {
  const std::string arena = fmt::format("activation arena {}", format_memory_size(plan.memory.arena_bytes));
  const int64_t layers = range.count();
  const int64_t expensive = std::max<int64_t>(0, policy.keep_expensive_layers - range.first);
  const int64_t whole = std::max<int64_t>(0, policy.keep_all_layers - range.first);
  const int64_t attention = std::min(layers, std::max<int64_t>(0, policy.keep_attention_layers - range.first));
  // The layers that keep attention's outputs beyond those keeping every expensive output.
  std::string attention_kept;
  if (attention > expensive && attention == layers) {
    attention_kept = fmt::format("; attention's outputs kept in the other {} layers too, so attention itself is never "
                                 "re-run{}",
                                 layers - expensive, attention_first);
  } else if (attention > expensive) {
    attention_kept = fmt::format("; attention's outputs kept in {} of the {} layers that re-run their matmuls (more "
                                 "would not fit), so attention itself is re-run only in the other {}{}",
                                 attention - expensive, layers - expensive, layers - attention, attention_first);
  }
  if (!policy.any()) return fmt::format("recompute: none needed — every activation is kept ({})", arena);
  if (expensive >= layers && whole > 0) {
    return fmt::format("recompute: norms, RoPE, SwiGLU and dropout re-run in the backward in {} of {} layers, every "
                       "activation kept in the other {} (more would not fit); matmul and attention outputs kept in "
                       "all layers ({})", layers - whole, layers, whole, arena);
  }
  if (expensive >= layers) {
    return fmt::format("recompute: norms, RoPE, SwiGLU and dropout re-run in the backward; matmul and attention "
                       "outputs kept in all {} layers, as memory allows ({})", layers, arena);
  }
  if (policy.block_inputs_only) {
    return fmt::format("recompute: everything, matmuls and attention included, and the residual stream inside each "
                       "block: only each block's input is kept{} ({})", attention_kept, arena);
  }
  if (expensive <= 0) {
    return fmt::format("recompute: everything the recompute_* options enable, matmuls and attention included{} ({})",
                       attention_kept, arena);
  }
  return fmt::format("recompute: norms, RoPE, SwiGLU and dropout re-run in the backward; matmul and attention outputs "
                     "kept in {} of {} layers (more would not fit), re-run in the others{} ({})", expensive, layers,
                     attention_kept, arena);
}

}  // namespace

ExecutionPlan compile_training_to_fit(const graph::Graph& forward, graph::TensorId loss,
                                      const graph::OpRegistry& registry, const CompileOptions& options,
                                      int64_t layers, bool recommended, const PlanFits& fits,
                                      RecomputeChoice* choice) {
  RecomputeChoice local;
  RecomputeChoice& out = choice != nullptr ? *choice : local;
  out = {};
  const LayerRange range = layer_range(forward, layers);
  out.layers = range.count();
  auto compile = [&](const RecomputePolicy& policy) {
    CompileOptions with = options;
    with.recompute = policy;
    ++out.compiled_plans;
    return compile_training(forward, loss, registry, with);
  };
  auto finish = [&](ExecutionPlan plan, const RecomputePolicy& policy, bool fitted, const std::string& note = {}) {
    out.policy = policy;
    out.fits = fitted;
    out.summary = describe(plan, policy, range, note);
    return plan;
  };
  // The largest count in (low, high) of the graph's layers whose plan fits, by bisection, given
  // that `low` fits (its plan in `best`) and `high` is taken not to; `with(count)` is the policy.
  auto largest_fitting = [&](int64_t low, int64_t high, ExecutionPlan& best, auto with) {
    while (high - low > 1) {
      const int64_t middle = low + (high - low) / 2;
      ExecutionPlan candidate = compile(with(middle));
      if (fits(candidate)) {
        low = middle;
        best = std::move(candidate);
      } else {
        high = middle;
      }
    }
    return low;
  };

  // What the tiers below leave: attention's outputs kept in as many more layers as fit, from the
  // first that does not keep them already (recompute.h, keep_attention_layers). `plan` fits with
  // `policy` and becomes the plan of the returned policy.
  auto keep_attention = [&](ExecutionPlan& plan, RecomputePolicy policy) {
    if (!policy.recomputes("att") || range.count() == 0) return policy;
    const int64_t already = std::clamp<int64_t>(policy.keep_expensive_layers - range.first, 0, range.count());
    if (already == range.count()) return policy;
    const int64_t kept = largest_fitting(already, range.count() + 1, plan, [&](int64_t count) {
      RecomputePolicy trial = policy;
      trial.keep_attention_layers = range.first + count;
      return trial;
    });
    if (kept > already) policy.keep_attention_layers = range.first + kept;
    return policy;
  };

  RecomputePolicy allowed = recommended ? RecomputePolicy::all() : options.recompute;
  allowed.keep_expensive_layers = 0;
  ExecutionPlan nothing = compile(RecomputePolicy::none());
  if (!allowed.any() || fits(nothing)) {
    const bool fitted = fits(nothing);
    return finish(std::move(nothing), RecomputePolicy::none(), fitted);
  }
  if (range.count() > 0) {
    RecomputePolicy keeping = allowed;
    keeping.keep_expensive_layers = range.end;
    ExecutionPlan plan = compile(keeping);
    if (fits(plan)) {
      // Memory between this plan and keeping everything: as many layers as fit keep their cheap
      // outputs too (all of them is the plan that keeps everything, which did not fit).
      const int64_t whole = largest_fitting(0, range.count(), plan, [&](int64_t count) {
        RecomputePolicy trial = keeping;
        trial.keep_all_layers = range.first + count;
        return trial;
      });
      keeping.keep_all_layers = whole > 0 ? range.first + whole : 0;
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
    if (fits(plan)) {
      const RecomputePolicy chosen = keep_attention(plan, deeper);
      return finish(std::move(plan), chosen, true);
    }
    return finish(std::move(literal), allowed, false);
  }
  // Keeping no layer's expensive outputs is the literal plan, which fits; keeping all of them did not.
  // Two orders spend the memory between: the products' outputs (with attention's) of as many layers
  // as fit, then attention's alone in more; or attention's alone in as many layers as fit, then, if
  // that is all of them, the products' too. Each byte kept saves about the FLOPs per byte of what
  // it holds — a product's input width, attention's span (recompute_cost.h) — so whichever
  // re-runs fewer FLOPs is taken: products first for short packed documents, attention first for
  // documents longer than about the hidden size.
  ExecutionPlan best = literal;
  const int64_t kept = largest_fitting(0, range.count(), best, [&](int64_t count) {
    RecomputePolicy trial = allowed;
    trial.keep_expensive_layers = range.first + count;
    return trial;
  });
  RecomputePolicy chosen = allowed;
  chosen.keep_expensive_layers = kept > 0 ? range.first + kept : 0;
  chosen = keep_attention(best, chosen);
  // Attention kept in every layer already: the other order would reach the same plan.
  if (!allowed.recomputes("att") || range.count() == 0 || chosen.keep_attention_layers >= range.end) {
    return finish(std::move(best), chosen, true);
  }

  ExecutionPlan first = std::move(literal);
  RecomputePolicy attention_first = keep_attention(first, allowed);
  if (attention_first.keep_attention_layers >= range.end) {
    const int64_t products = largest_fitting(0, range.count(), first, [&](int64_t count) {
      RecomputePolicy trial = attention_first;
      trial.keep_expensive_layers = range.first + count;
      return trial;
    });
    if (products > 0) attention_first.keep_expensive_layers = range.first + products;
  }
  if (recompute_flops(first.graph, options.attention_span) < recompute_flops(best.graph, options.attention_span)) {
    const std::string why =
        options.attention_span > 0
            ? fmt::format(" — before any matmul's: over the data's documents a byte of attention's outputs kept saves "
                          "re-running {} FLOPs, a matmul's its input width", options.attention_span)
            : " — before any matmul's: taking documents as long as the rows (the data is not read), a byte of "
              "attention's outputs kept saves more re-run FLOPs than a matmul's";
    return finish(std::move(first), attention_first, true, why);
  }
  return finish(std::move(best), chosen, true);
}

}  // namespace surogate::compiler
