// The graph IR: typed tensors with static shapes and stable names, and nodes that apply a
// registered op to tensors. A Graph is plain data (vectors indexed by TensorId / NodeId) so
// passes can copy, extend and serialise it cheaply; GraphBuilder (graph/builder.h) is the way
// to add to it with shape inference, and verify_graph (graph/verifier.h) re-checks it.
//
// Tensor roles:
//   input      batch data written by the caller before each execution (token ids, labels)
//   parameter  model weight, persistent; `trainable` says whether autodiff gives it a gradient
//   constant   persistent non-weight data written once at load time (e.g. rope tables)
//   activation everything a node computes, forward or backward (activation gradients included)
//   gradient   the persistent gradient buffer of a trainable parameter: it accumulates across
//              micro-batches (written only by `accumulate` nodes) and the optimizer zeroes it
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace surogate::graph {

using TensorId = int32_t;
using NodeId = int32_t;
constexpr TensorId kNoTensor = -1;
constexpr NodeId kNoNode = -1;

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string format_shape(const Shape& shape);  // "[2, 16, 64]"

// What a shape rule computes and a verifier compares: element type and static shape.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  int64_t numel() const { return shape_numel(shape); }
  size_t size_bytes() const { return static_cast<size_t>(numel()) * dtype_size_bytes(dtype); }
  bool operator==(const TensorType&) const = default;
};
std::string format_type(const TensorType& type);  // "F32[2, 16, 64]"

enum class TensorRole : uint8_t { Input, Parameter, Constant, Activation, Gradient };
std::string_view role_name(TensorRole role);
std::optional<TensorRole> role_from_name(std::string_view name);

// Which part of a training step a node belongs to; set by the builder / autodiff / recompute.
enum class NodePhase : uint8_t { Forward, Backward, Recompute };
std::string_view phase_name(NodePhase phase);
std::optional<NodePhase> phase_from_name(std::string_view name);

struct TensorInfo {
  std::string name;  // stable, unique engine name ("layers.3.attn.qkv")
  TensorType type;
  TensorRole role = TensorRole::Activation;
  bool trainable = false;      // parameters only
  NodeId producer = kNoNode;   // the node that writes it (activations and gradients)
};

struct Node {
  std::string name;                 // unique node name, usually its first output's name
  std::string op;                   // registered op name ("rmsnorm")
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  nlohmann::json attrs = nlohmann::json::object();
  // Recompute tag read by the planner (compiler/recompute.h): "", "rmsnorm", "qkv", "att",
  // "swiglu", "ffn", "block" or "block:<layer>". Empty means "always saved" (a checkpoint).
  std::string recompute_group;
  NodePhase phase = NodePhase::Forward;
};

class Graph {
public:
  std::vector<TensorInfo> tensors;
  std::vector<Node> nodes;
  std::vector<TensorId> inputs;      // in caller order
  std::vector<TensorId> parameters;  // parameters and constants, in declaration order
  std::vector<TensorId> outputs;     // marked outputs (e.g. the loss)

  // Adds a tensor; the name must be unique (SUROGATE_CHECK: builders make names unique).
  TensorId add_tensor(TensorInfo info);
  // Gives a tensor a new unique name (SUROGATE_CHECK on a clash).
  void rename_tensor(TensorId id, std::string name);
  // Appends a node and records it as the producer of its outputs.
  NodeId add_node(Node node);

  const TensorInfo& tensor(TensorId id) const;
  TensorInfo& tensor(TensorId id);
  const Node& node(NodeId id) const;
  std::optional<TensorId> find_tensor(std::string_view name) const;
  // Like find_tensor, but a missing name is a UserError that says what was looked for.
  TensorId require_tensor(std::string_view name) const;
  bool is_output(TensorId id) const;

private:
  std::unordered_map<std::string, TensorId> name_index_;
};

}  // namespace surogate::graph
