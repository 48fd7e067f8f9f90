// Which parameters (and constants) of a plan a backend reads from another backend's loaded plan
// instead of holding its own copy: the rule of CpuBackend / CudaBackend::share_parameters_with —
// the same name, dtype and shape, in the Parameters region of both, and allowed by the sharer's
// filter (when it has one). What is not shared gets an offset in the backend's own, smaller
// Parameters region.
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/execution_plan.h"

namespace surogate::runtime {

struct SharedParameters {
  std::vector<std::pair<graph::TensorId, graph::TensorId>> shared;  // (this plan's tensor, the owner's)
  std::vector<std::pair<graph::TensorId, size_t>> own;               // (this plan's tensor, offset in its own region)
  size_t own_bytes = 0;
};

// Which tensors, by name, may be read from the owner; empty: every one that matches.
using ShareableParameter = std::function<bool(const std::string& name)>;

inline SharedParameters share_parameters(const compiler::ExecutionPlan& plan, const compiler::ExecutionPlan& owner,
                                         const ShareableParameter& shareable = {}) {
  SharedParameters result;
  for (size_t index = 0; index < plan.graph.tensors.size(); ++index) {
    const auto id = static_cast<graph::TensorId>(index);
    const compiler::TensorPlacement& placement = plan.memory.placements[index];
    if (placement.storage != compiler::Storage::Parameters) continue;
    const graph::TensorInfo& tensor = plan.graph.tensors[index];
    const std::optional<graph::TensorId> theirs =
        !shareable || shareable(tensor.name) ? owner.graph.find_tensor(tensor.name) : std::nullopt;
    if (theirs && owner.placement(*theirs).storage == compiler::Storage::Parameters &&
        owner.graph.tensor(*theirs).type == tensor.type) {
      result.shared.emplace_back(id, *theirs);
    } else {
      result.own.emplace_back(id, result.own_bytes);
      result.own_bytes += compiler::align_up(std::max<size_t>(placement.size_bytes, 1), plan.memory.alignment);
    }
  }
  return result;
}

}  // namespace surogate::runtime
