// The pipeline graph pass; see pipeline_graph.h.
#include "distributed/pipeline_graph.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "graph/builder.h"
#include "graph/verifier.h"

namespace surogate::distributed {
namespace {
using namespace graph;

bool is_leaf(const TensorInfo& info) { return info.producer == kNoNode; }

// Which stage each node of `forward` belongs to.
std::vector<int> node_stages(const Graph& forward, std::span<const StageLayers> stages) {
  std::vector<int> result(forward.nodes.size(), 0);
  const int last = static_cast<int>(stages.size()) - 1;
  bool seen_layer = false;
  for (size_t n = 0; n < forward.nodes.size(); ++n) {
    const int64_t layer = layer_of(forward.nodes[n].name);
    if (layer < 0) {
      result[n] = seen_layer ? last : 0;
      continue;
    }
    seen_layer = true;
    int stage = 0;
    while (stage < last && layer >= stages[static_cast<size_t>(stage)].end) ++stage;
    result[n] = stage;
  }
  return result;
}

// Tensors computed from the batch alone (inputs and constants, no parameter): cheap to compute
// again wherever they are read.
std::vector<bool> batch_derived(const Graph& forward) {
  std::vector<bool> derived(forward.tensors.size(), false);
  for (size_t t = 0; t < forward.tensors.size(); ++t) {
    const TensorRole role = forward.tensors[t].role;
    derived[t] = role == TensorRole::Input || role == TensorRole::Constant;
  }
  for (const Node& node : forward.nodes) {
    const bool all = std::all_of(node.inputs.begin(), node.inputs.end(), [&](TensorId id) { return derived[static_cast<size_t>(id)]; });
    for (TensorId output : node.outputs) derived[static_cast<size_t>(output)] = all;
  }
  return derived;
}

// Builds one stage's graph: its nodes (with the batch-derived ones it needs copied in), the leaves
// they read, and the received tensors as `received_role` leaves.
class StageBuilder {
public:
  StageBuilder(const Graph& forward, TensorRole received_role) : forward_(forward), received_role_(received_role) {}

  void add_node(const Node& node, const std::set<TensorId>& received) {
    Node copy = node;
    for (TensorId& input : copy.inputs) input = import(input, received.contains(input));
    for (TensorId& output : copy.outputs) output = import(output, false);
    graph_.add_node(std::move(copy));
  }
  TensorId id(TensorId original) const { return ids_.at(original); }
  bool has(TensorId original) const { return ids_.contains(original); }
  Graph& graph() { return graph_; }

private:
  TensorId import(TensorId original, bool received) {
    if (auto found = ids_.find(original); found != ids_.end()) return found->second;
    TensorInfo info = forward_.tensor(original);
    info.producer = kNoNode;
    if (received) {
      info.role = received_role_;
      info.trainable = received_role_ == TensorRole::Parameter;
    }
    const TensorId id = graph_.add_tensor(info);
    if (info.role == TensorRole::Input) graph_.inputs.push_back(id);
    if (info.role == TensorRole::Parameter || info.role == TensorRole::Constant) graph_.parameters.push_back(id);
    ids_[original] = id;
    return id;
  }

  const Graph& forward_;
  TensorRole received_role_;
  Graph graph_;
  std::map<TensorId, TensorId> ids_;
};

}  // namespace

std::vector<StageGraph> split_pipeline_stages(const Graph& forward, TensorId loss, const OpRegistry& registry,
                                              std::span<const StageLayers> stages) {
  const int count = static_cast<int>(stages.size());
  SUROGATE_CHECK(count >= 2, "a pipeline has at least two stages");
  const std::vector<int> stage_of_node = node_stages(forward, stages);
  const std::vector<bool> derived = batch_derived(forward);
  auto producer_stage = [&](TensorId id) { return stage_of_node[static_cast<size_t>(forward.tensor(id).producer)]; };
  if (forward.tensor(loss).producer == kNoNode || producer_stage(loss) != count - 1) {
    fail_user("pipeline_parallel_size: {} splits the graph by its layers' node names (layers.<n>…), but the loss "
              "'{}' is not computed after the last of them; a model_definition graph must name its layers' nodes so",
              count, forward.tensor(loss).name);
  }

  // Each stage's nodes: its own, plus copies of the batch-derived producers it reads from others.
  std::vector<std::set<size_t>> members(static_cast<size_t>(count));
  for (size_t n = 0; n < forward.nodes.size(); ++n) members[static_cast<size_t>(stage_of_node[n])].insert(n);
  std::vector<BoundaryTensor> crossing;  // sent tensors, in order of first use
  std::map<TensorId, size_t> crossing_index;
  for (int stage = 0; stage < count; ++stage) {
    // Pull in batch-derived producers (transitively); what else it reads from others is received.
    std::vector<size_t> pending(members[static_cast<size_t>(stage)].begin(), members[static_cast<size_t>(stage)].end());
    while (!pending.empty()) {
      const size_t n = pending.back();
      pending.pop_back();
      for (TensorId input : forward.nodes[n].inputs) {
        const TensorInfo& info = forward.tensor(input);
        if (is_leaf(info) || !derived[static_cast<size_t>(input)]) continue;
        const auto producer = static_cast<size_t>(info.producer);
        if (members[static_cast<size_t>(stage)].insert(producer).second) pending.push_back(producer);
      }
    }
  }
  for (int stage = 0; stage < count; ++stage) {
    for (size_t n : members[static_cast<size_t>(stage)]) {
      for (TensorId input : forward.nodes[n].inputs) {
        const TensorInfo& info = forward.tensor(input);
        if (is_leaf(info) || members[static_cast<size_t>(stage)].contains(static_cast<size_t>(info.producer))) continue;
        const int from = producer_stage(input);
        if (from > stage) {
          fail_user("pipeline_parallel_size: tensor '{}' is computed in stage {} but read by stage {} before it: the "
                    "graph's nodes named layers.<n>… are not in layer order", info.name, from, stage);
        }
        auto [found, fresh] = crossing_index.try_emplace(input, crossing.size());
        if (fresh) crossing.push_back({info.name, from, {}});
        std::vector<int>& to = crossing[found->second].to;
        if (std::find(to.begin(), to.end(), stage) == to.end()) to.push_back(stage);
      }
    }
  }

  std::vector<StageGraph> result(static_cast<size_t>(count));
  for (int stage = 0; stage < count; ++stage) {
    StageGraph& out = result[static_cast<size_t>(stage)];
    out.stage = stage;
    out.layers = stages[static_cast<size_t>(stage)];
    std::set<TensorId> received;
    for (const auto& [id, index] : crossing_index) {
      const BoundaryTensor& tensor = crossing[index];
      if (std::find(tensor.to.begin(), tensor.to.end(), stage) != tensor.to.end()) received.insert(id);
    }
    std::vector<TensorId> sent;
    for (const auto& [id, index] : crossing_index) {
      if (crossing[index].from == stage) sent.push_back(id);
    }
    std::sort(sent.begin(), sent.end(), [&](TensorId a, TensorId b) { return crossing_index[a] < crossing_index[b]; });
    const bool last = stage == count - 1;
    StageBuilder training(forward, TensorRole::Parameter), passing(forward, TensorRole::Input);
    for (size_t n : members[static_cast<size_t>(stage)]) {  // ascending: forward order
      training.add_node(forward.nodes[n], received);
      if (!last) passing.add_node(forward.nodes[n], received);
    }
    for (const auto& [id, index] : crossing_index) {
      if (received.contains(id)) out.received.push_back(crossing[index]);
    }
    std::sort(out.received.begin(), out.received.end(), [&](const BoundaryTensor& a, const BoundaryTensor& b) {
      return crossing_index[*forward.find_tensor(a.name)] < crossing_index[*forward.find_tensor(b.name)];
    });
    if (last) {
      Graph& graph = training.graph();
      for (TensorId output : forward.outputs) {
        if (training.has(output)) graph.outputs.push_back(training.id(output));
      }
      out.loss = training.id(loss);
      verify_graph(graph, registry);
      out.training = std::move(graph);
      continue;
    }
    for (TensorId id : sent) {
      out.sent.push_back(crossing[crossing_index[id]]);
      passing.graph().outputs.push_back(passing.id(id));
    }
    verify_graph(passing.graph(), registry);
    out.forward = std::move(passing.graph());
    // The stage loss: Σ over sent tensors t of sum(t · g_t).
    GraphBuilder builder(registry, std::move(training.graph()));
    std::vector<TensorId> gradients;  // inputs, named outside the scope below
    for (TensorId id : sent) {
      const TensorInfo& info = forward.tensor(id);
      gradients.push_back(builder.input(info.name + kPipelineGradSuffix, info.type.dtype, info.type.shape));
    }
    auto scope = builder.scope("pipeline");
    TensorId total = kNoTensor;
    for (size_t i = 0; i < sent.size(); ++i) {
      const TensorId id = sent[i], gradient = gradients[i];
      const TensorInfo& info = forward.tensor(id);
      const TensorId product = builder.op("mul", {training.id(id), gradient}, nlohmann::json::object(), info.name + ".product");
      const TensorId partial = builder.op("sum", {product}, nlohmann::json::object(), info.name + ".sum");
      total = total == kNoTensor ? partial : TensorId(builder.op("add", {total, partial}, nlohmann::json::object(), "loss_sum"));
    }
    builder.mark_output(total);
    out.loss = total;
    out.training = builder.finish();
    verify_graph(out.training, registry);
  }
  return result;
}

}  // namespace surogate::distributed
