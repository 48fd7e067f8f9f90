// Rebuilding graphs node by node; see node_rebuild.h.
#include "graph/node_rebuild.h"

#include <vector>

#include "core/error.h"

namespace surogate::graph {

void append_inferred(Graph& graph, const OpRegistry& registry, const Node& node) {
  std::vector<TensorType> inputs;
  for (TensorId id : node.inputs) inputs.push_back(graph.tensor(id).type);
  const std::vector<TensorType> outputs = registry.infer(node.op, "node '" + node.name + "'", inputs, node.attrs);
  SUROGATE_CHECK(outputs.size() == node.outputs.size(), "node '{}' keeps its outputs", node.name);
  for (size_t i = 0; i < outputs.size(); ++i) graph.tensor(node.outputs[i]).type = outputs[i];
  graph.add_node(node);
}

}  // namespace surogate::graph
