// ZeRO-3's gather schedule; see weight_gathering.h.
#include "compiler/weight_gathering.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.h"

namespace surogate::compiler {
namespace {

using namespace surogate::graph;

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// The groups, in order of first appearance among `weights`, each laid out by owner.
std::vector<GatherGroup> make_groups(const ExecutionPlan& plan, std::span<const ShardedWeight> weights, int world_size,
                                     bool as_bytes) {
  const size_t alignment = as_bytes ? kGatherAlignmentBytes : kGatherAlignmentElements;
  std::vector<GatherGroup> groups;
  std::map<std::string, size_t> index;
  std::vector<std::vector<ShardedWeight>> members;
  for (const ShardedWeight& weight : weights) {
    const TensorInfo& info = plan.graph.tensor(weight.tensor);
    SUROGATE_CHECK(info.role == TensorRole::Parameter, "'{}' is gathered but is not a parameter", info.name);
    SUROGATE_CHECK(weight.owner >= 0 && weight.owner < world_size, "'{}' is kept by rank {} of {}", info.name,
                   weight.owner, world_size);
    const std::string name = gather_group_name(info.name);
    auto [at, added] = index.try_emplace(name, groups.size());
    if (added) {
      groups.push_back({});
      groups.back().name = name;
      groups.back().dtype = as_bytes ? DType::U8 : info.type.dtype;
      members.emplace_back();
    }
    SUROGATE_CHECK(as_bytes || groups[at->second].dtype == info.type.dtype, "the weights of group '{}' differ in dtype",
                   name);
    members[at->second].push_back(weight);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    GatherGroup& group = groups[g];
    std::stable_sort(members[g].begin(), members[g].end(),
                     [](const ShardedWeight& a, const ShardedWeight& b) { return a.owner < b.owner; });
    group.piece_offsets.assign(static_cast<size_t>(world_size) + 1, 0);
    size_t cursor = 0;
    int rank = 0;
    for (const ShardedWeight& weight : members[g]) {
      // A rank's piece starts at an aligned boundary, so its owned copy keeps the same layout.
      for (; rank < weight.owner; ++rank) group.piece_offsets[static_cast<size_t>(rank) + 1] = cursor;
      cursor = round_up(cursor, alignment);
      group.tensors.push_back(weight.tensor);
      group.owners.push_back(weight.owner);
      group.tensor_offsets.push_back(cursor);
      const graph::TensorType& type = plan.graph.tensor(weight.tensor).type;
      cursor += as_bytes ? type.size_bytes() : static_cast<size_t>(type.numel());
      cursor = round_up(cursor, alignment);
    }
    for (; rank < world_size; ++rank) group.piece_offsets[static_cast<size_t>(rank) + 1] = cursor;
    group.elements = cursor;
  }
  return groups;
}

// The runs of steps reading each group, in order of their first step.
std::vector<GatherUse> find_uses(const ExecutionPlan& plan, const std::vector<GatherGroup>& groups) {
  std::map<TensorId, size_t> group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (TensorId id : groups[g].tensors) group_of[id] = g;
  }
  std::vector<GatherUse> uses;
  std::vector<int> last_read(groups.size(), -1);
  std::vector<int> open_use(groups.size(), -1);  // index into uses
  for (size_t step = 0; step < plan.steps.size(); ++step) {
    std::vector<size_t> read;
    for (TensorId id : plan.graph.node(plan.steps[step].node).inputs) {
      auto found = group_of.find(id);
      if (found != group_of.end() && std::find(read.begin(), read.end(), found->second) == read.end()) {
        read.push_back(found->second);
      }
    }
    std::sort(read.begin(), read.end());
    for (size_t g : read) {
      // The group's use goes on when no other group was read after its last read.
      int other = -1;
      for (size_t h = 0; h < groups.size(); ++h) {
        if (h != g) other = std::max(other, last_read[h]);
      }
      if (open_use[g] >= 0 && other <= last_read[g]) {
        uses[static_cast<size_t>(open_use[g])].last_step = static_cast<int>(step);
      } else {
        open_use[g] = static_cast<int>(uses.size());
        uses.push_back({g, static_cast<int>(step), static_cast<int>(step), 0});
      }
    }
    for (size_t g : read) last_read[g] = static_cast<int>(step);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    SUROGATE_CHECK(last_read[g] >= 0, "gathered group '{}' is read by no step", groups[g].name);
  }
  return uses;  // already ordered by first step (ties by group order)
}

void set_issue_steps(std::vector<GatherUse>& uses) {
  for (size_t k = 0; k < uses.size(); ++k) uses[k].issue_step = k == 0 ? uses[0].first_step : uses[k - 1].first_step;
}

// A use issued before its group's previous use has ended is that use continued.
void merge_overlapping_uses(std::vector<GatherUse>& uses) {
  for (bool merged = true; merged;) {
    merged = false;
    set_issue_steps(uses);
    for (size_t k = 1; k < uses.size() && !merged; ++k) {
      for (size_t j = k; j-- > 0;) {
        if (uses[j].group != uses[k].group) continue;
        if (uses[j].last_step >= uses[k].issue_step) {
          uses[j].last_step = std::max(uses[j].last_step, uses[k].last_step);
          uses.erase(uses.begin() + static_cast<std::ptrdiff_t>(k));
          merged = true;
        }
        break;
      }
    }
  }
}

// First fit, largest groups first: a group avoids the buffers of every group busy at a step
// where it is busy too.
void place_buffers(WeightGathering& gathering, size_t alignment) {
  const size_t count = gathering.groups.size();
  std::vector<std::vector<std::pair<int, int>>> busy(count);
  for (const GatherUse& use : gathering.uses) busy[use.group].emplace_back(use.issue_step, use.last_step);
  auto conflict = [&](size_t a, size_t b) {
    for (const auto& [first_a, last_a] : busy[a]) {
      for (const auto& [first_b, last_b] : busy[b]) {
        if (first_a <= last_b && first_b <= last_a) return true;
      }
    }
    return false;
  };
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return gathering.groups[a].bytes() > gathering.groups[b].bytes(); });
  std::vector<size_t> placed;
  for (size_t g : order) {
    const size_t bytes = align_up(std::max<size_t>(gathering.groups[g].bytes(), 1), alignment);
    std::vector<std::pair<size_t, size_t>> taken;
    for (size_t other : placed) {
      if (!conflict(g, other)) continue;
      const GatherGroup& group = gathering.groups[other];
      taken.emplace_back(group.offset, group.offset + align_up(std::max<size_t>(group.bytes(), 1), alignment));
    }
    std::sort(taken.begin(), taken.end());
    size_t cursor = 0;
    for (const auto& [begin, end] : taken) {
      if (begin >= cursor + bytes) break;
      cursor = std::max(cursor, end);
    }
    gathering.groups[g].offset = cursor;
    gathering.region_bytes = std::max(gathering.region_bytes, cursor + bytes);
    placed.push_back(g);
  }
}

}  // namespace

std::vector<size_t> GatherGroup::piece_counts() const {
  std::vector<size_t> counts;
  for (size_t r = 0; r + 1 < piece_offsets.size(); ++r) counts.push_back(piece_offsets[r + 1] - piece_offsets[r]);
  return counts;
}

size_t WeightGathering::largest_owned_bytes() const {
  size_t largest = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    size_t bytes = 0;
    for (const GatherGroup& group : groups) {
      const auto r = static_cast<size_t>(rank);
      bytes += (group.piece_offsets[r + 1] - group.piece_offsets[r]) * dtype_size_bytes(group.dtype);
    }
    largest = std::max(largest, bytes);
  }
  return largest;
}

WeightGathering::Location WeightGathering::locate(TensorId tensor) const {
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].tensors.size(); ++i) {
      if (groups[g].tensors[i] == tensor) return {g, i};
    }
  }
  SUROGATE_CHECK(false, "tensor {} is not gathered", tensor);
  return {};
}

std::string gather_group_name(const std::string& weight_name) {
  constexpr std::string_view kLayers = "layers.";
  if (!weight_name.starts_with(kLayers)) return weight_name;
  const size_t end = weight_name.find('.', kLayers.size());
  if (end == std::string::npos || end == kLayers.size()) return weight_name;
  const std::string_view number(weight_name.data() + kLayers.size(), end - kLayers.size());
  if (number.find_first_not_of("0123456789") != std::string_view::npos) return weight_name;
  return weight_name.substr(0, end);
}

WeightGathering schedule_weight_gathering(const ExecutionPlan& plan, std::span<const ShardedWeight> weights,
                                          int world_size, bool as_bytes) {
  SUROGATE_CHECK(world_size >= 1, "a world has at least one rank");
  WeightGathering gathering;
  gathering.world_size = world_size;
  const size_t steps = plan.steps.size();
  gathering.issue_before.assign(steps, {});
  gathering.wait_before.assign(steps, {});
  gathering.release_after.assign(steps, {});
  gathering.owned_elements.assign(static_cast<size_t>(world_size), 0);
  if (weights.empty()) return gathering;
  gathering.groups = make_groups(plan, weights, world_size, as_bytes);
  for (GatherGroup& group : gathering.groups) {
    group.owned_offsets.resize(static_cast<size_t>(world_size));
    for (size_t r = 0; r < static_cast<size_t>(world_size); ++r) {
      group.owned_offsets[r] = gathering.owned_elements[r];
      gathering.owned_elements[r] += group.piece_offsets[r + 1] - group.piece_offsets[r];
    }
  }
  gathering.uses = find_uses(plan, gathering.groups);
  merge_overlapping_uses(gathering.uses);
  set_issue_steps(gathering.uses);
  place_buffers(gathering, plan.memory.alignment);
  gathering.region_offset = align_up(plan.memory.arena_bytes, plan.memory.alignment);
  for (size_t k = 0; k < gathering.uses.size(); ++k) {
    const GatherUse& use = gathering.uses[k];
    gathering.issue_before[static_cast<size_t>(use.issue_step)].push_back(k);
    gathering.wait_before[static_cast<size_t>(use.first_step)].push_back(k);
    gathering.release_after[static_cast<size_t>(use.last_step)].push_back(k);
  }
  return gathering;
}

void apply_weight_gathering(ExecutionPlan& plan, const WeightGathering& gathering) {
  if (gathering.empty()) return;
  MemoryPlan& memory = plan.memory;
  SUROGATE_CHECK(gathering.region_offset == align_up(memory.arena_bytes, memory.alignment),
                 "the gather schedule was made for this plan");
  std::vector<bool> gathered(plan.graph.tensors.size(), false);
  for (const GatherGroup& group : gathering.groups) {
    const size_t element_bytes = dtype_size_bytes(group.dtype);
    for (size_t i = 0; i < group.tensors.size(); ++i) {
      TensorPlacement& placement = memory.placements[static_cast<size_t>(group.tensors[i])];
      placement.storage = Storage::Arena;
      placement.offset = gathering.region_offset + group.offset + group.tensor_offsets[i] * element_bytes;
      placement.first_step = 0;
      placement.last_step = static_cast<int>(plan.steps.size());
      gathered[static_cast<size_t>(group.tensors[i])] = true;
    }
  }
  // The parameters and constants that stay are packed again, in tensor order as plan_memory does.
  memory.parameter_bytes = 0;
  for (size_t id = 0; id < memory.placements.size(); ++id) {
    TensorPlacement& placement = memory.placements[id];
    if (gathered[id] || placement.storage != Storage::Parameters) continue;
    placement.offset = memory.parameter_bytes;
    memory.parameter_bytes += align_up(std::max<size_t>(placement.size_bytes, 1), memory.alignment);
  }
  memory.arena_bytes = gathering.region_offset + gathering.region_bytes;
  for (PlanStep& step : plan.steps) {
    const Node& node = plan.graph.node(step.node);
    for (size_t i = 0; i < node.inputs.size(); ++i) step.inputs[i] = plan.placement(node.inputs[i]);
    for (size_t i = 0; i < node.outputs.size(); ++i) step.outputs[i] = plan.placement(node.outputs[i]);
  }
}

}  // namespace surogate::compiler
