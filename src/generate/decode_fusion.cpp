// The decode graph's fused products; see decode_fusion.h. Plan which nodes go and which fused node
// takes which node's place (the swiglu's, or the group's last member's: every input of every
// member is written before it), then copy the graph with that node order, dropping the tensors
// nothing writes any more (the fused SwiGLU's g and u).
#include "generate/decode_fusion.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "graph/verifier.h"

namespace surogate::generate {
namespace {

using namespace graph;

// A product the fusion may take: linear(x, W) or linear_add(x, W, addend) of a matrix W, scale 1.
bool plain_product(const Graph& graph, const Node& node) {
  const bool linear = node.op == "linear" && node.inputs.size() == 2;
  const bool with_addend = node.op == "linear_add" && node.inputs.size() == 3;
  if (!linear && !with_addend) return false;
  if (node.attrs.contains("scale") && node.attrs.at("scale").get<double>() != 1.0) return false;
  return graph.tensor(node.inputs[1]).type.shape.size() == 2;
}

class FusionPlan {
public:
  explicit FusionPlan(const Graph& graph)
      : graph_(graph), readers_(graph.tensors.size()), removed_(graph.nodes.size(), false),
        replacement_(graph.nodes.size()) {
    for (size_t index = 0; index < graph.nodes.size(); ++index) {
      for (TensorId id : graph.nodes[index].inputs) readers_[static_cast<size_t>(id)].push_back(index);
    }
  }

  void fuse_swiglus() {
    for (size_t index = 0; index < graph_.nodes.size(); ++index) {
      const Node& swiglu = graph_.nodes[index];
      if (swiglu.op != "swiglu") continue;
      const std::optional<size_t> gate = sole_product_for(swiglu.inputs[0], index);
      const std::optional<size_t> up = sole_product_for(swiglu.inputs[1], index);
      if (!gate || !up || *gate == *up) continue;
      const Node &g = graph_.nodes[*gate], &u = graph_.nodes[*up];
      if (g.inputs[0] != u.inputs[0] || graph_.tensor(g.inputs[1]).type != graph_.tensor(u.inputs[1]).type) continue;
      Node fused = fused_node({*gate, *up}, "linear_swiglu", swiglu.name, swiglu.recompute_group);
      fused.outputs = swiglu.outputs;
      removed_[*gate] = removed_[*up] = true;
      replacement_[index] = std::move(fused);
    }
  }

  void fuse_groups() {
    std::map<TensorId, std::vector<size_t>> by_input;  // in node order
    for (size_t index = 0; index < graph_.nodes.size(); ++index) {
      const Node& node = graph_.nodes[index];
      if (!removed_[index] && !replacement_[index] && plain_product(graph_, node)) by_input[node.inputs[0]].push_back(index);
    }
    for (auto& [x, candidates] : by_input) {
      const std::vector<size_t> members = independent(candidates);
      if (members.size() < 2 || members.size() > 3 || !readers_after(members)) continue;
      const Node& last = graph_.nodes[members.back()];
      Node fused = fused_node(members, "linear_group", last.name + ".group", last.recompute_group);
      for (size_t member : members) {
        fused.outputs.push_back(graph_.nodes[member].outputs.at(0));
        removed_[member] = true;
      }
      removed_[members.back()] = false;
      replacement_[members.back()] = std::move(fused);
    }
  }

  // q's and k's fused_rmsnorm_rope after a group (Qwen3) become one fused_qk_rmsnorm_rope where the
  // CUDA pair kernel takes the shape (cuda/kernels/qk_norm_rope.h: head_dim 16 … 256, full rotary).
  void fuse_norm_ropes() {
    for (size_t index = 0; index < graph_.nodes.size(); ++index) {
      if (!replacement_[index] || replacement_[index]->op != "linear_group") continue;
      const std::vector<TensorId>& products = replacement_[index]->outputs;
      const std::optional<size_t> q = sole_norm_rope_of(products[0]), k = sole_norm_rope_of(products[1]);
      if (!q || !k || *q >= *k || !pairs(graph_.nodes[*q], graph_.nodes[*k]) || !readers_after({*q, *k})) continue;
      const Node &q_node = graph_.nodes[*q], &k_node = graph_.nodes[*k];
      Node fused;
      fused.name = k_node.name + ".pair";
      fused.op = "fused_qk_rmsnorm_rope";
      fused.recompute_group = k_node.recompute_group;
      fused.inputs = {q_node.inputs[0], q_node.inputs[1], k_node.inputs[0], k_node.inputs[1], q_node.inputs[2]};
      fused.attrs = q_node.attrs;
      fused.attrs["kv_heads"] = k_node.attrs.at("heads");
      fused.outputs = q_node.outputs;
      fused.outputs.insert(fused.outputs.end(), k_node.outputs.begin(), k_node.outputs.end());
      removed_[*q] = true;
      replacement_[*k] = std::move(fused);
    }
  }

  // A cached_attention whose q and k are each the output of a fused_rmsnorm_rope it alone reads
  // (Qwen3's q and k norms, alike but for their heads, their rstd read by nothing) becomes one
  // qk_norm_rope_cached_attention in the attention's place: on CUDA the attention's split blocks
  // normalise their queries and new keys themselves. Runs before fuse_norm_ropes, which pairs the
  // norms this leaves; it needs no group, so a graph with an adapter takes it too (the same kernels' bits).
  void fuse_attention_norms() {
    for (size_t attention = 0; attention < graph_.nodes.size(); ++attention) {
      const Node& cached = graph_.nodes[attention];
      if (cached.op != "cached_attention" || removed_[attention] || replacement_[attention]) continue;
      const std::optional<size_t> q = norm_read_only_by(cached.inputs[0], attention);
      const std::optional<size_t> k = norm_read_only_by(cached.inputs[1], attention);
      if (!q || !k || *q == *k || cached.inputs[2] == cached.inputs[0] || cached.inputs[2] == cached.inputs[1]) continue;
      const Node &q_node = graph_.nodes[*q], &k_node = graph_.nodes[*k];
      if (!pairs(q_node, k_node)) continue;
      Node fused;
      fused.name = cached.name;
      fused.op = "qk_norm_rope_cached_attention";
      fused.recompute_group = cached.recompute_group;
      fused.inputs = cached.inputs;
      fused.inputs[0] = q_node.inputs[0];  // q before its norm
      fused.inputs[1] = k_node.inputs[0];  // k before its norm
      fused.inputs.insert(fused.inputs.end(), {q_node.inputs[1], k_node.inputs[1], q_node.inputs[2]});
      fused.attrs = cached.attrs;
      for (const char* key : {"eps", "inv_freq", "attention_scaling"}) {
        if (q_node.attrs.contains(key)) fused.attrs[key] = q_node.attrs.at(key);
      }
      fused.outputs = cached.outputs;
      removed_[*q] = removed_[*k] = true;
      replacement_[attention] = std::move(fused);
    }
  }

  Graph rewritten() const {
    std::vector<Node> nodes;
    for (size_t index = 0; index < graph_.nodes.size(); ++index) {
      if (replacement_[index]) nodes.push_back(*replacement_[index]);
      else if (!removed_[index]) nodes.push_back(graph_.nodes[index]);
    }
    return copy_with(nodes);
  }

private:
  // The plain product writing `id` when `reader` is the only node that reads it (and it is no output).
  std::optional<size_t> sole_product_for(TensorId id, size_t reader) const {
    const NodeId producer = graph_.tensor(id).producer;
    if (producer == kNoNode || graph_.is_output(id)) return std::nullopt;
    const std::vector<size_t>& readers = readers_[static_cast<size_t>(id)];
    if (readers.size() != 1 || readers[0] != reader) return std::nullopt;
    const size_t index = static_cast<size_t>(producer);
    if (removed_[index] || !plain_product(graph_, graph_.nodes[index])) return std::nullopt;
    return index;
  }

  bool unread(TensorId id) const { return readers_[static_cast<size_t>(id)].empty() && !graph_.is_output(id); }

  // The fused_rmsnorm_rope writing `id` (its out) when `reader` alone reads it and nothing reads its rstd.
  std::optional<size_t> norm_read_only_by(TensorId id, size_t reader) const {
    const NodeId producer = graph_.tensor(id).producer;
    if (producer == kNoNode || graph_.is_output(id)) return std::nullopt;
    const size_t index = static_cast<size_t>(producer);
    const Node& node = graph_.nodes[index];
    if (node.op != "fused_rmsnorm_rope" || removed_[index] || node.outputs[0] != id || !unread(node.outputs[1])) {
      return std::nullopt;
    }
    const std::vector<size_t>& readers = readers_[static_cast<size_t>(id)];
    if (readers.size() != 1 || readers[0] != reader) return std::nullopt;
    return index;
  }

  // The fused_rmsnorm_rope that alone reads `id`, as its x.
  std::optional<size_t> sole_norm_rope_of(TensorId id) const {
    const std::vector<size_t>& readers = readers_[static_cast<size_t>(id)];
    if (readers.size() != 1 || graph_.is_output(id)) return std::nullopt;
    const Node& node = graph_.nodes[readers[0]];
    if (node.op != "fused_rmsnorm_rope" || node.inputs[0] != id || removed_[readers[0]]) return std::nullopt;
    return readers[0];
  }

  // Whether q's and k's norms differ only in their heads, over one position input, in the kernel's shapes.
  static bool pairs(const Node& q, const Node& k) {
    nlohmann::json q_rest = q.attrs, k_rest = k.attrs;
    q_rest.erase("heads");
    k_rest.erase("heads");
    if (q.inputs[2] != k.inputs[2] || q_rest != k_rest || !q_rest.contains("head_dim") || !q_rest.contains("inv_freq")) {
      return false;
    }
    const int64_t head_dim = q_rest.at("head_dim").get<int64_t>();
    // cuda/kernels/qk_norm_rope.h's qk_norm_rope_takes (this layer builds without the CUDA headers).
    const bool kernel_width = head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
    return kernel_width && q_rest.at("inv_freq").is_array() &&
           2 * static_cast<int64_t>(q_rest.at("inv_freq").size()) == head_dim;
  }

  // The candidates whose output no other candidate reads, directly or through other nodes (a
  // LoRA adapter's A product feeds its B product, the addend of the base product).
  std::vector<size_t> independent(const std::vector<size_t>& candidates) const {
    std::vector<size_t> kept;
    for (size_t candidate : candidates) {
      std::vector<bool> reached(graph_.nodes.size(), false);
      std::vector<size_t> frontier{candidate};
      bool feeds_another = false;
      while (!frontier.empty() && !feeds_another) {
        const size_t node = frontier.back();
        frontier.pop_back();
        for (TensorId id : graph_.nodes[node].outputs) {
          for (size_t reader : readers_[static_cast<size_t>(id)]) {
            if (reached[reader] || reader > candidates.back()) continue;
            reached[reader] = true;
            feeds_another = feeds_another || std::find(candidates.begin(), candidates.end(), reader) != candidates.end();
            frontier.push_back(reader);
          }
        }
      }
      if (!feeds_another) kept.push_back(candidate);
    }
    return kept;
  }

  // Whether every reader of the members' outputs comes after the last member (where the group goes).
  bool readers_after(const std::vector<size_t>& members) const {
    for (size_t member : members) {
      for (TensorId id : graph_.nodes[member].outputs) {
        for (size_t reader : readers_[static_cast<size_t>(id)]) {
          if (reader <= members.back()) return false;
        }
      }
    }
    return true;
  }

  // x, the members' weights, then their addends; attrs.addends flags which member has one.
  Node fused_node(const std::vector<size_t>& members, const std::string& op, const std::string& name,
                  const std::string& group) const {
    Node fused;
    fused.name = name;
    fused.op = op;
    fused.recompute_group = group;
    fused.inputs.push_back(graph_.nodes[members[0]].inputs[0]);
    std::vector<int64_t> flags;
    for (size_t member : members) fused.inputs.push_back(graph_.nodes[member].inputs[1]);
    for (size_t member : members) {
      const Node& node = graph_.nodes[member];
      flags.push_back(node.inputs.size() == 3 ? 1 : 0);
      if (node.inputs.size() == 3) fused.inputs.push_back(node.inputs[2]);
    }
    fused.attrs = {{"addends", flags}};
    return fused;
  }

  // The graph with `nodes`, keeping every tensor but the activations none of them writes.
  Graph copy_with(const std::vector<Node>& nodes) const {
    std::vector<bool> written(graph_.tensors.size(), false);
    for (const Node& node : nodes) {
      for (TensorId id : node.outputs) written[static_cast<size_t>(id)] = true;
    }
    Graph result;
    std::vector<TensorId> map(graph_.tensors.size(), kNoTensor);
    for (size_t id = 0; id < graph_.tensors.size(); ++id) {
      TensorInfo info = graph_.tensors[id];
      if (info.role == TensorRole::Activation && !written[id]) continue;
      info.producer = kNoNode;
      map[id] = result.add_tensor(std::move(info));
    }
    const auto mapped = [&](const std::vector<TensorId>& ids) {
      std::vector<TensorId> out;
      for (TensorId id : ids) out.push_back(map[static_cast<size_t>(id)]);
      return out;
    };
    result.inputs = mapped(graph_.inputs);
    result.parameters = mapped(graph_.parameters);
    result.outputs = mapped(graph_.outputs);
    for (Node node : nodes) {
      node.inputs = mapped(node.inputs);
      node.outputs = mapped(node.outputs);
      result.add_node(std::move(node));
    }
    return result;
  }

  const Graph& graph_;
  std::vector<std::vector<size_t>> readers_;  // per tensor: the nodes reading it, in order
  std::vector<bool> removed_;
  std::vector<std::optional<Node>> replacement_;
};

}  // namespace

Graph fuse_decode_products(const Graph& decode, const OpRegistry& registry) {
  FusionPlan plan(decode);
  // Adapter graphs keep their products unfused (decode_fusion.h says why); the q/k norms still go
  // into the attention, which computes what the norm kernels computed, bit for bit.
  if (std::none_of(decode.nodes.begin(), decode.nodes.end(), [](const Node& node) { return node.op == "linear_add"; })) {
    plan.fuse_swiglus();
    plan.fuse_groups();
  }
  plan.fuse_attention_norms();
  plan.fuse_norm_ropes();
  Graph fused = plan.rewritten();
  verify_graph(fused, registry);  // the fused nodes' types re-inferred against the tensors they write
  return fused;
}

}  // namespace surogate::generate
