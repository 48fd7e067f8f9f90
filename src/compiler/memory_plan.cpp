// Liveness and greedy best-fit offset assignment (see memory_plan.h).
#include "compiler/memory_plan.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace surogate::compiler {
namespace {

using namespace surogate::graph;

struct Interval {
  TensorId id;
  size_t bytes;  // aligned
  int first;
  int last;
};

bool overlaps(const TensorPlacement& a, const Interval& b) { return a.first_step <= b.last && b.first <= a.last_step; }

void compute_liveness(const Graph& graph, const HostTransfers& transfers, std::vector<TensorPlacement>& placements) {
  const int end_step = static_cast<int>(graph.nodes.size());
  for (size_t step = 0; step < graph.nodes.size(); ++step) {
    const Node& node = graph.nodes[step];
    for (TensorId id : node.outputs) {
      auto& placement = placements[static_cast<size_t>(id)];
      placement.first_step = placement.last_step = static_cast<int>(step);
    }
    for (TensorId id : node.inputs) {
      int& last = placements[static_cast<size_t>(id)].last_step;
      last = std::max(last, static_cast<int>(step));
    }
  }
  // An asynchronous step may still be reading its inputs until its completion step starts.
  for (const auto& [step, complete_by] : transfers.complete_by) {
    SUROGATE_CHECK(complete_by > step && static_cast<size_t>(complete_by) < graph.nodes.size(),
                   "asynchronous step {} must complete before a later step, not {}", step, complete_by);
    for (TensorId id : graph.nodes[static_cast<size_t>(step)].inputs) {
      int& last = placements[static_cast<size_t>(id)].last_step;
      last = std::max(last, static_cast<int>(complete_by) - 1);
    }
  }
  for (TensorId id : graph.outputs) placements[static_cast<size_t>(id)].last_step = end_step;
}

// Places `interval` at the lowest-waste gap between already placed, overlapping tensors.
size_t best_fit_offset(const Interval& interval, const std::vector<Interval>& placed,
                       const std::vector<TensorPlacement>& placements) {
  std::vector<std::pair<size_t, size_t>> busy;  // [begin, end) of overlapping tensors
  for (const Interval& other : placed) {
    const TensorPlacement& placement = placements[static_cast<size_t>(other.id)];
    if (overlaps(placement, interval)) busy.emplace_back(placement.offset, placement.offset + other.bytes);
  }
  std::sort(busy.begin(), busy.end());
  size_t best = std::numeric_limits<size_t>::max();
  size_t best_waste = std::numeric_limits<size_t>::max();
  size_t cursor = 0;
  for (const auto& [begin, end] : busy) {
    if (begin > cursor && begin - cursor >= interval.bytes && begin - cursor - interval.bytes < best_waste) {
      best_waste = begin - cursor - interval.bytes;
      best = cursor;
    }
    cursor = std::max(cursor, end);
  }
  return best != std::numeric_limits<size_t>::max() ? best : cursor;
}

}  // namespace

size_t align_up(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

MemoryPlan plan_memory(const Graph& graph, size_t alignment, const HostTransfers& transfers) {
  SUROGATE_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "alignment {} is not a power of two", alignment);
  MemoryPlan plan;
  plan.alignment = alignment;
  plan.placements.resize(graph.tensors.size());
  compute_liveness(graph, transfers, plan.placements);
  std::vector<bool> host(graph.tensors.size(), false);
  for (TensorId id : transfers.host_tensors) {
    SUROGATE_CHECK(graph.tensor(id).role == TensorRole::Activation, "host tensor '{}' is not an activation",
                   graph.tensor(id).name);
    host[static_cast<size_t>(id)] = true;
  }

  std::vector<Interval> arena_tensors;
  for (size_t i = 0; i < graph.tensors.size(); ++i) {
    const TensorInfo& info = graph.tensors[i];
    TensorPlacement& placement = plan.placements[i];
    placement.size_bytes = info.type.size_bytes();
    size_t aligned = align_up(std::max<size_t>(placement.size_bytes, 1), alignment);
    switch (info.role) {
      case TensorRole::Parameter:
      case TensorRole::Constant:
        placement.storage = Storage::Parameters;
        placement.offset = plan.parameter_bytes;
        plan.parameter_bytes += aligned;
        break;
      case TensorRole::Gradient:
        placement.storage = Storage::Gradients;
        placement.offset = plan.gradient_bytes;
        plan.gradient_bytes += aligned;
        break;
      case TensorRole::Input:
        placement.storage = Storage::Inputs;
        placement.offset = plan.input_bytes;
        plan.input_bytes += aligned;
        break;
      case TensorRole::Activation:
        if (host[i]) {
          placement.storage = Storage::Host;
          placement.offset = plan.host_bytes;
          plan.host_bytes += aligned;
          break;
        }
        placement.storage = Storage::Arena;
        arena_tensors.push_back({static_cast<TensorId>(i), aligned, placement.first_step, placement.last_step});
        break;
    }
  }

  // Largest first; ties by earlier start, then id, so plans are deterministic.
  std::sort(arena_tensors.begin(), arena_tensors.end(), [](const Interval& a, const Interval& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.first != b.first) return a.first < b.first;
    return a.id < b.id;
  });
  std::vector<Interval> placed;
  for (const Interval& interval : arena_tensors) {
    TensorPlacement& placement = plan.placements[static_cast<size_t>(interval.id)];
    placement.offset = best_fit_offset(interval, placed, plan.placements);
    plan.arena_bytes = std::max(plan.arena_bytes, placement.offset + interval.bytes);
    placed.push_back(interval);
  }

  // Live bytes per step by a sweep over interval ends; step -1 is index 0.
  const size_t slots = graph.nodes.size() + 3;
  std::vector<long long> delta(slots, 0);
  for (const Interval& interval : arena_tensors) {
    delta[static_cast<size_t>(interval.first + 1)] += static_cast<long long>(interval.bytes);
    delta[static_cast<size_t>(interval.last + 2)] -= static_cast<long long>(interval.bytes);
  }
  long long live = 0;
  for (size_t slot = 0; slot + 1 < slots; ++slot) {
    live += delta[slot];
    if (static_cast<size_t>(live) > plan.peak_live_bytes) {
      plan.peak_live_bytes = static_cast<size_t>(live);
      plan.peak_step = static_cast<int>(slot) - 1;
    }
  }
  return plan;
}

}  // namespace surogate::compiler
