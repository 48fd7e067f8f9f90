// The `debug_memory_breakdown` report for an ExecutionPlan (declared in execution_plan.h).
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "compiler/execution_plan.h"

namespace surogate::compiler {
namespace {

using namespace surogate::graph;

enum Category { kForward, kRecompute, kBackward, kCategoryCount };
constexpr std::array<const char*, kCategoryCount> kCategoryNames{"forward activations",
                                                                 "recomputed activations", "backward temporaries"};

Category category_of(const Graph& graph, TensorId id) {
  const TensorInfo& info = graph.tensor(id);
  switch (graph.node(info.producer).phase) {
    case NodePhase::Forward: return kForward;
    case NodePhase::Recompute: return kRecompute;
    case NodePhase::Backward: return kBackward;
  }
  return kBackward;
}

std::string human_bytes(size_t bytes) {
  constexpr std::array<const char*, 5> units{"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < units.size()) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, units[unit]);
}

}  // namespace

std::string format_memory_breakdown(const ExecutionPlan& plan, size_t top_tensors, size_t optimizer_state_bytes) {
  const Graph& graph = plan.graph;
  const MemoryPlan& memory = plan.memory;
  std::string out;
  size_t total = memory.parameter_bytes + memory.gradient_bytes + optimizer_state_bytes + memory.input_bytes +
                 memory.arena_bytes;
  out += "memory plan\n";
  out += fmt::format("  {:<28}{:>14}\n", "parameters + constants", human_bytes(memory.parameter_bytes));
  out += fmt::format("  {:<28}{:>14}\n", "parameter gradients", human_bytes(memory.gradient_bytes));
  out += fmt::format("  {:<28}{:>14}\n", "optimizer state", human_bytes(optimizer_state_bytes));
  out += fmt::format("  {:<28}{:>14}\n", "batch inputs", human_bytes(memory.input_bytes));
  out += fmt::format("  {:<28}{:>14}\n", "activation arena", human_bytes(memory.arena_bytes));
  out += fmt::format("  {:<28}{:>14}\n", "total", human_bytes(total));
  if (memory.host_bytes > 0) {
    out += fmt::format("  {:<28}{:>14}  ({} residual checkpoints, offload_residual; not in the total)\n",
                       "host region", human_bytes(memory.host_bytes), plan.offloaded_tensors);
  }

  std::array<size_t, kCategoryCount> at_peak{};
  std::vector<TensorId> arena;
  for (size_t i = 0; i < graph.tensors.size(); ++i) {
    const TensorPlacement& placement = memory.placements[i];
    if (placement.storage != Storage::Arena) continue;
    auto id = static_cast<TensorId>(i);
    arena.push_back(id);
    if (placement.first_step <= memory.peak_step && memory.peak_step <= placement.last_step) {
      at_peak[category_of(graph, id)] += align_up(std::max<size_t>(placement.size_bytes, 1), memory.alignment);
    }
  }
  std::string peak_node = memory.peak_step >= 0 && static_cast<size_t>(memory.peak_step) < graph.nodes.size()
                              ? graph.nodes[static_cast<size_t>(memory.peak_step)].name
                              : std::string(memory.peak_step < 0 ? "before the first step" : "after the last step");
  out += fmt::format("activation peak: {} live at step {} ({}); arena {} ({:.1f}% of the lower bound)\n",
                     human_bytes(memory.peak_live_bytes), memory.peak_step, peak_node, human_bytes(memory.arena_bytes),
                     memory.peak_live_bytes ? 100.0 * static_cast<double>(memory.arena_bytes) /
                                                  static_cast<double>(memory.peak_live_bytes)
                                            : 100.0);
  for (size_t c = 0; c < kCategoryCount; ++c) {
    out += fmt::format("  {:<28}{:>14}\n", kCategoryNames[c], human_bytes(at_peak[c]));
  }
  out += fmt::format("steps: {} forward, {} backward (of which {} recomputed nodes)\n", plan.forward_steps,
                     plan.steps.size() - plan.forward_steps, plan.recomputed_nodes);

  std::stable_sort(arena.begin(), arena.end(), [&](TensorId a, TensorId b) {
    return memory.placements[static_cast<size_t>(a)].size_bytes > memory.placements[static_cast<size_t>(b)].size_bytes;
  });
  out += fmt::format("largest arena tensors (steps live, offset):\n");
  for (size_t i = 0; i < std::min(top_tensors, arena.size()); ++i) {
    const TensorInfo& info = graph.tensor(arena[i]);
    const TensorPlacement& placement = memory.placements[static_cast<size_t>(arena[i])];
    out += fmt::format("  {:<44} {:<18} {:>12}  [{}, {}] @{}\n", info.name, format_type(info.type),
                       human_bytes(placement.size_bytes), placement.first_step, placement.last_step, placement.offset);
  }
  return out;
}

}  // namespace surogate::compiler
