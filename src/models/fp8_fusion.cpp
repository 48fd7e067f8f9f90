// The producer fusion of the fp8_hybrid recipe; see fp8_fusion.h.
#include "models/fp8_fusion.h"

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "graph/builder.h"

namespace surogate::models {
namespace {
using graph::NodeId;

bool fusable_producer(const std::string& op) {
  return op == "rmsnorm" || op == "fused_residual_rmsnorm" || op == "swiglu";
}

// The quantize_fp8 node a producer absorbs: stateful, E4M3, reading the producer's main output.
bool absorbable(const graph::Graph& graph, const graph::Node& node, NodeId* producer) {
  if (node.op != "quantize_fp8" || node.inputs.size() != 2 || !node.attrs.contains("format") ||
      node.attrs.at("format").get<std::string>() != "e4m3") {
    return false;
  }
  *producer = graph.tensor(node.inputs[0]).producer;
  if (*producer == graph::kNoNode) return false;
  const graph::Node& source = graph.nodes[static_cast<size_t>(*producer)];
  return fusable_producer(source.op) && source.outputs[0] == node.inputs[0];
}

}  // namespace

graph::Graph fuse_fp8_producers(const graph::Graph& forward, const graph::OpRegistry& registry) {
  std::unordered_map<NodeId, NodeId> absorbed_by;  // producer → the quantize node it absorbs
  for (size_t i = 0; i < forward.nodes.size(); ++i) {
    NodeId producer = graph::kNoNode;
    if (absorbable(forward, forward.nodes[i], &producer)) absorbed_by.emplace(producer, static_cast<NodeId>(i));
  }
  if (absorbed_by.empty()) return forward;
  std::unordered_set<NodeId> skipped;  // the absorbed quantize nodes
  for (const auto& [producer, quantize] : absorbed_by) skipped.insert(quantize);

  graph::Graph rewritten = forward;
  rewritten.nodes.clear();
  for (graph::TensorInfo& info : rewritten.tensors) info.producer = graph::kNoNode;
  graph::GraphBuilder builder(registry, std::move(rewritten));
  graph::Graph& graph = builder.mutable_graph();
  for (size_t i = 0; i < forward.nodes.size(); ++i) {
    const NodeId id = static_cast<NodeId>(i);
    if (skipped.contains(id)) continue;
    auto found = absorbed_by.find(id);
    if (found == absorbed_by.end()) {
      graph.add_node(forward.nodes[i]);
      continue;
    }
    const graph::Node& quantize = forward.nodes[static_cast<size_t>(found->second)];
    graph::Node node = forward.nodes[i];
    node.op += "_fp8";
    node.inputs.push_back(quantize.inputs[1]);
    node.outputs.insert(node.outputs.end(), quantize.outputs.begin(), quantize.outputs.end());
    node.attrs["site"] = quantize.attrs.at("site");
    graph.add_node(std::move(node));
  }
  return builder.finish();
}

int64_t fp8_fused_producer_count(const graph::Graph& graph) {
  int64_t count = 0;
  for (const graph::Node& node : graph.nodes) {
    count += node.op.ends_with("_fp8") && fusable_producer(node.op.substr(0, node.op.size() - 4));
  }
  return count;
}

}  // namespace surogate::models
