// Graph storage: tensor/node tables, the name index and the enum spellings used by JSON IR.
#include "graph/graph.h"

#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace surogate::graph {
namespace {

constexpr std::array<std::string_view, 5> kRoleNames{"input", "parameter", "constant", "activation", "gradient"};
constexpr std::array<std::string_view, 3> kPhaseNames{"forward", "backward", "recompute"};

}  // namespace

// Sizes reach shapes from config.json and the run's options; config.json's are bounded where it
// is read (io/model_config_bounds.h), and this check is the net under every other product, so a
// size that wraps around 64 bits is never planned as a small tensor. 2^47 elements bound a
// tensor to 2^50 bytes (1 PiB) in any dtype: TensorType::size_bytes cannot overflow either, nor
// can the memory planner's sums of such sizes.
int64_t shape_numel(const Shape& shape) {
  constexpr int64_t kMaxElements = int64_t{1} << 47;
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(count, dim, &count) || count > kMaxElements) {
      fail_user("a tensor of shape {} has more than 2^47 elements, more than any machine holds; its sizes come from "
                "config.json (vocab_size, hidden_size, intermediate_size, ...) and the run's sequence_len and batch "
                "sizes: check them", format_shape(shape));
    }
  }
  return count;
}

std::string format_shape(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string format_type(const TensorType& type) {
  return fmt::format("{}{}", dtype_safetensors_name(type.dtype), format_shape(type.shape));
}

std::string_view role_name(TensorRole role) { return kRoleNames[static_cast<size_t>(role)]; }

std::optional<TensorRole> role_from_name(std::string_view name) {
  for (size_t i = 0; i < kRoleNames.size(); ++i) {
    if (kRoleNames[i] == name) return static_cast<TensorRole>(i);
  }
  return std::nullopt;
}

std::string_view phase_name(NodePhase phase) { return kPhaseNames[static_cast<size_t>(phase)]; }

std::optional<NodePhase> phase_from_name(std::string_view name) {
  for (size_t i = 0; i < kPhaseNames.size(); ++i) {
    if (kPhaseNames[i] == name) return static_cast<NodePhase>(i);
  }
  return std::nullopt;
}

TensorId Graph::add_tensor(TensorInfo info) {
  SUROGATE_CHECK(!name_index_.contains(info.name), "tensor name '{}' used twice", info.name);
  auto id = static_cast<TensorId>(tensors.size());
  name_index_.emplace(info.name, id);
  tensors.push_back(std::move(info));
  return id;
}

void Graph::rename_tensor(TensorId id, std::string name) {
  SUROGATE_CHECK(!name_index_.contains(name), "tensor name '{}' used twice", name);
  TensorInfo& info = tensor(id);
  name_index_.erase(info.name);
  name_index_.emplace(name, id);
  info.name = std::move(name);
}

NodeId Graph::add_node(Node node) {
  auto id = static_cast<NodeId>(nodes.size());
  for (TensorId output : node.outputs) {
    TensorInfo& info = tensor(output);
    SUROGATE_CHECK(info.producer == kNoNode, "tensor '{}' is written by two nodes", info.name);
    info.producer = id;
  }
  nodes.push_back(std::move(node));
  return id;
}

const TensorInfo& Graph::tensor(TensorId id) const {
  SUROGATE_CHECK(id >= 0 && static_cast<size_t>(id) < tensors.size(), "tensor id {} out of range", id);
  return tensors[static_cast<size_t>(id)];
}

TensorInfo& Graph::tensor(TensorId id) {
  SUROGATE_CHECK(id >= 0 && static_cast<size_t>(id) < tensors.size(), "tensor id {} out of range", id);
  return tensors[static_cast<size_t>(id)];
}

const Node& Graph::node(NodeId id) const {
  SUROGATE_CHECK(id >= 0 && static_cast<size_t>(id) < nodes.size(), "node id {} out of range", id);
  return nodes[static_cast<size_t>(id)];
}

std::optional<TensorId> Graph::find_tensor(std::string_view name) const {
  auto found = name_index_.find(std::string(name));
  if (found == name_index_.end()) return std::nullopt;
  return found->second;
}

TensorId Graph::require_tensor(std::string_view name) const {
  auto found = find_tensor(name);
  if (!found) fail_user("the graph has no tensor named '{}'", name);
  return *found;
}

bool Graph::is_output(TensorId id) const {
  for (TensorId output : outputs) {
    if (output == id) return true;
  }
  return false;
}

}  // namespace surogate::graph
