// The offload_residual pass: host copies of the residual stream's checkpoints (see residual_offload.h).
#include "compiler/residual_offload.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/recompute.h"
#include "core/error.h"

namespace surogate::compiler {
namespace {

using namespace surogate::graph;

constexpr int kNone = -1;
constexpr int64_t kNoLayer = -2;  // no backward reader seen yet

// How a forward tensor is read: its last forward reader, its first backward (or recompute) reader
// and the one layer its backward readers share (-1: outside the layers or several layers).
struct Reads {
  int last_forward = kNone;
  int first_backward = kNone;
  int64_t layer = kNoLayer;
};

// One layer's moved checkpoints, in the order of their first backward read.
struct LayerGroup {
  int64_t layer = 0;
  int first_backward = 0;  // the earliest first backward read among them
  std::vector<TensorId> tensors;
};

size_t forward_end(const Graph& graph) {
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].phase != NodePhase::Forward) return i;
  }
  return graph.nodes.size();
}

std::vector<Reads> collect_reads(const Graph& graph, size_t backward_start) {
  std::vector<Reads> reads(graph.tensors.size());
  for (size_t step = 0; step < graph.nodes.size(); ++step) {
    const Node& node = graph.nodes[step];
    for (TensorId id : node.inputs) {
      Reads& r = reads[static_cast<size_t>(id)];
      if (step < backward_start) {
        r.last_forward = static_cast<int>(step);
        continue;
      }
      if (r.first_backward == kNone) r.first_backward = static_cast<int>(step);
      const int64_t layer = layer_of(node);
      r.layer = r.layer == kNoLayer || r.layer == layer ? layer : -1;
    }
  }
  return reads;
}

// The checkpoints to move, by layer, in backward order (the top layer's group first, unmoved).
std::vector<LayerGroup> group_checkpoints(const Graph& graph, const std::vector<Reads>& reads) {
  std::map<int64_t, LayerGroup> by_layer;
  for (size_t i = 0; i < graph.tensors.size(); ++i) {
    const auto id = static_cast<TensorId>(i);
    const Reads& r = reads[i];
    if (r.first_backward == kNone || r.layer < 0 || graph.is_output(id) || !is_checkpoint(graph, id)) continue;
    LayerGroup& group = by_layer[r.layer];
    if (group.tensors.empty() || r.first_backward < group.first_backward) group.first_backward = r.first_backward;
    group.layer = r.layer;
    group.tensors.push_back(id);
  }
  std::vector<LayerGroup> groups;
  for (auto& [layer, group] : by_layer) groups.push_back(std::move(group));
  std::sort(groups.begin(), groups.end(),
            [](const LayerGroup& a, const LayerGroup& b) { return a.first_backward < b.first_backward; });
  return groups;
}

}  // namespace

ResidualOffloadResult apply_residual_offload(const Graph& source) {
  ResidualOffloadResult result;
  const size_t backward_start = forward_end(source);
  const std::vector<Reads> reads = collect_reads(source, backward_start);
  const std::vector<LayerGroup> groups = group_checkpoints(source, reads);

  // Where the copies go, by source step: offloads after it, fetches before it. Group g (g ≥ 1) is
  // fetched where group g - 1 is first read.
  std::map<int, std::vector<TensorId>> offload_after, fetch_before;
  std::map<TensorId, size_t> group_of;
  for (size_t g = 1; g < groups.size(); ++g) {
    for (TensorId id : groups[g].tensors) {
      const Reads& r = reads[static_cast<size_t>(id)];
      const int produced = static_cast<int>(source.tensor(id).producer);
      offload_after[std::max(produced, r.last_forward)].push_back(id);
      fetch_before[groups[g - 1].first_backward].push_back(id);
      group_of[id] = g;
    }
  }
  result.offloaded_tensors = group_of.size();
  result.offloaded_layers = groups.empty() ? 0 : groups.size() - 1;

  Graph& graph = result.graph;
  for (TensorInfo info : source.tensors) {
    info.producer = kNoNode;
    graph.add_tensor(std::move(info));
  }
  graph.inputs = source.inputs;
  graph.parameters = source.parameters;
  graph.outputs = source.outputs;

  std::map<TensorId, TensorId> host, fetched;
  std::map<TensorId, NodeId> offload_node, fetch_node;
  std::vector<NodeId> new_index(source.nodes.size());
  auto copy_node = [&](const char* op, const char* prefix, TensorId from, TensorId original, NodePhase phase) {
    TensorInfo info = source.tensor(original);
    info.name = unique_tensor_name(graph, std::string(prefix) + "." + info.name);
    info.producer = kNoNode;
    const TensorId to = graph.add_tensor(std::move(info));
    Node node;
    node.name = graph.tensor(to).name;
    node.op = op;
    node.inputs = {from};
    node.outputs = {to};
    node.phase = phase;
    return std::pair{to, graph.add_node(std::move(node))};
  };
  for (size_t step = 0; step < source.nodes.size(); ++step) {
    if (auto due = fetch_before.find(static_cast<int>(step)); due != fetch_before.end()) {
      for (TensorId id : due->second) {
        std::tie(fetched[id], fetch_node[id]) = copy_node("fetch_from_host", "fetched", host.at(id), id, NodePhase::Backward);
      }
    }
    Node node = source.nodes[step];
    if (step >= backward_start) {
      for (TensorId& input : node.inputs) {
        if (auto copy = fetched.find(input); copy != fetched.end()) input = copy->second;
      }
    }
    new_index[step] = graph.add_node(std::move(node));
    if (auto due = offload_after.find(static_cast<int>(step)); due != offload_after.end()) {
      for (TensorId id : due->second) {
        std::tie(host[id], offload_node[id]) = copy_node("offload_to_host", "host", id, id, NodePhase::Forward);
      }
    }
  }
  SUROGATE_CHECK(fetched.size() == group_of.size(), "every offloaded tensor is fetched");

  // Completion steps: a fetch by its first reader; an offload by the last offload of the group
  // before it in the backward (the layer above), or by the first step after the forward.
  NodeId after_forward = static_cast<NodeId>(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].phase != NodePhase::Forward) {
      after_forward = static_cast<NodeId>(i);
      break;
    }
  }
  std::vector<NodeId> last_offload(groups.size(), kNoNode);
  for (const auto& [id, node] : offload_node) last_offload[group_of.at(id)] = std::max(last_offload[group_of.at(id)], node);
  for (const auto& [id, node] : offload_node) {
    const size_t g = group_of.at(id);
    NodeId complete_by = g >= 2 ? last_offload[g - 1] : after_forward;
    if (complete_by <= node) complete_by = after_forward;
    result.transfers.complete_by[node] = complete_by;
    result.transfers.host_tensors.push_back(host.at(id));
  }
  for (const auto& [id, node] : fetch_node) {
    result.transfers.complete_by[node] = new_index[static_cast<size_t>(reads[static_cast<size_t>(id)].first_backward)];
  }
  return result;
}

}  // namespace surogate::compiler
