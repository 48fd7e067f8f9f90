// The graph verifier (see verifier.h for the list of checks).
#include "graph/verifier.h"

#include <unordered_set>

namespace surogate::graph {
namespace {

bool is_leaf(TensorRole role) {
  return role == TensorRole::Input || role == TensorRole::Parameter || role == TensorRole::Constant;
}

std::string node_label(const Graph& graph, size_t index) {
  return fmt::format("node {} ('{}', op {})", index, graph.nodes[index].name, graph.nodes[index].op);
}

void check_tensor_table(const Graph& graph) {
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < graph.tensors.size(); ++i) {
    const TensorInfo& info = graph.tensors[i];
    if (info.name.empty()) fail_user("tensor {} has an empty name", i);
    if (!names.insert(info.name).second) fail_user("tensor name '{}' is used twice", info.name);
    if (info.trainable && info.role != TensorRole::Parameter) {
      fail_user("tensor '{}' is marked trainable but is a {}, not a parameter", info.name, role_name(info.role));
    }
  }
  auto check_list = [&](const std::vector<TensorId>& list, const char* what, auto accepts) {
    for (TensorId id : list) {
      if (id < 0 || static_cast<size_t>(id) >= graph.tensors.size()) fail_user("{} lists tensor id {} that does not exist", what, id);
      const TensorInfo& info = graph.tensors[static_cast<size_t>(id)];
      if (!accepts(info.role)) fail_user("{} lists '{}', which is a {}", what, info.name, role_name(info.role));
    }
  };
  check_list(graph.inputs, "inputs", [](TensorRole role) { return role == TensorRole::Input; });
  check_list(graph.parameters, "parameters",
             [](TensorRole role) { return role == TensorRole::Parameter || role == TensorRole::Constant; });
  check_list(graph.outputs, "outputs", [](TensorRole) { return true; });
  if (graph.outputs.empty()) fail_user("the graph marks no outputs (mark the loss or the logits as an output)");
}

}  // namespace

void verify_graph(const Graph& graph, const OpRegistry& registry) {
  check_tensor_table(graph);
  const size_t tensor_count = graph.tensors.size();
  std::vector<NodeId> produced_by(tensor_count, kNoNode);
  std::vector<bool> referenced(tensor_count, false);
  for (TensorId id : graph.inputs) referenced[static_cast<size_t>(id)] = true;
  for (TensorId id : graph.parameters) referenced[static_cast<size_t>(id)] = true;
  for (TensorId id : graph.outputs) referenced[static_cast<size_t>(id)] = true;

  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    std::string label = node_label(graph, n);
    if (node.name.empty()) fail_user("node {} (op {}) has an empty name", n, node.op);
    if (!registry.find(node.op)) registry.get(node.op);  // throws the "unknown op" error
    std::vector<TensorType> input_types;
    for (TensorId id : node.inputs) {
      if (id < 0 || static_cast<size_t>(id) >= tensor_count) fail_user("{}: input tensor id {} does not exist", label, id);
      const TensorInfo& info = graph.tensors[static_cast<size_t>(id)];
      if (!is_leaf(info.role) && produced_by[static_cast<size_t>(id)] == kNoNode) {
        fail_user("{}: input '{}' is used before any node produces it", label, info.name);
      }
      referenced[static_cast<size_t>(id)] = true;
      input_types.push_back(info.type);
    }
    for (TensorId id : node.outputs) {
      if (id < 0 || static_cast<size_t>(id) >= tensor_count) fail_user("{}: output tensor id {} does not exist", label, id);
      const TensorInfo& info = graph.tensors[static_cast<size_t>(id)];
      if (is_leaf(info.role)) fail_user("{}: writes '{}', which is a {}", label, info.name, role_name(info.role));
      if (produced_by[static_cast<size_t>(id)] != kNoNode) {
        fail_user("{}: output '{}' is already produced by node {}", label, info.name, produced_by[static_cast<size_t>(id)]);
      }
      if (info.role == TensorRole::Gradient) {
        const OpDef* def = registry.find(node.op);
        if (def == nullptr || !def->accumulates_into_output) {
          fail_user("{}: gradient '{}' may only be written by an op that accumulates into it (accumulate, "
                    "linear_backward_weight_accumulate)", label, info.name);
        }
      }
      produced_by[static_cast<size_t>(id)] = static_cast<NodeId>(n);
      referenced[static_cast<size_t>(id)] = true;
    }
    std::vector<TensorType> expected = registry.infer(node.op, label, input_types, node.attrs);
    if (expected.size() != node.outputs.size()) {
      fail_user("{}: the op produces {} outputs, the graph records {}", label, expected.size(), node.outputs.size());
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      const TensorInfo& info = graph.tensors[static_cast<size_t>(node.outputs[i])];
      if (info.type != expected[i]) {
        fail_user("{}: output '{}' is recorded as {} but the op infers {}", label, info.name, format_type(info.type),
                  format_type(expected[i]));
      }
    }
  }

  for (size_t i = 0; i < tensor_count; ++i) {
    const TensorInfo& info = graph.tensors[i];
    if (!is_leaf(info.role) && produced_by[i] == kNoNode) {
      fail_user("tensor '{}' ({}) is never produced by any node", info.name, role_name(info.role));
    }
    if (is_leaf(info.role)) {
      bool listed = false;
      for (TensorId id : info.role == TensorRole::Input ? graph.inputs : graph.parameters) listed |= (id == static_cast<TensorId>(i));
      if (!listed) fail_user("{} '{}' is missing from the graph's {} list", role_name(info.role), info.name,
                             info.role == TensorRole::Input ? "inputs" : "parameters");
    }
    if (!referenced[i]) fail_user("tensor '{}' is dangling: no node produces or uses it", info.name);
  }
}

}  // namespace surogate::graph
