// The forward graph → the decode graph (see decode_graph.h): mark what the logits need, copy
// those nodes in order with every attention node swapped for cached_attention, then add the
// gather and the head's product.
#include "generate/decode_graph.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "graph/builder.h"

namespace surogate::generate {
namespace {

using namespace graph;

bool is_attention(const Node& node) { return node.op == "attention"; }

// The inputs of `node` the decode graph reads: cached_attention takes attention's q, k, v only.
std::vector<TensorId> read_inputs(const Node& node) {
  if (!is_attention(node)) return node.inputs;
  return {node.inputs.at(0), node.inputs.at(1), node.inputs.at(2)};
}

// Which nodes of `forward` the tensors `wanted` depend on.
std::vector<bool> needed_nodes(const Graph& forward, std::vector<TensorId> wanted) {
  std::vector<bool> tensor_needed(forward.tensors.size(), false), node_needed(forward.nodes.size(), false);
  for (TensorId id : wanted) tensor_needed[static_cast<size_t>(id)] = true;
  for (size_t index = forward.nodes.size(); index-- > 0;) {
    const Node& node = forward.nodes[index];
    const bool needed = is_attention(node) ? tensor_needed[static_cast<size_t>(node.outputs.at(0))]
                                           : std::any_of(node.outputs.begin(), node.outputs.end(), [&](TensorId id) {
                                               return tensor_needed[static_cast<size_t>(id)];
                                             });
    if (!needed) continue;
    node_needed[index] = true;
    for (TensorId id : read_inputs(node)) tensor_needed[static_cast<size_t>(id)] = true;
  }
  return node_needed;
}

// The cache type of an attention node: [slots, capacity, Hkv, D] in q's dtype.
TensorType cache_type(const Graph& forward, const Node& node, const DecodeShape& shape) {
  const TensorType& q = forward.tensor(node.inputs.at(0)).type;
  const TensorType& k = forward.tensor(node.inputs.at(1)).type;
  int64_t kv_heads = 0, head_dim = 0;
  if (q.shape.size() == 4) {
    kv_heads = k.shape.at(2);
    head_dim = q.shape.at(3);
  } else {
    kv_heads = node.attrs.at("kv_heads").get<int64_t>();
    head_dim = node.attrs.at("head_dim").get<int64_t>();
  }
  return {q.dtype, Shape{shape.slots, shape.capacity, kv_heads, head_dim}};
}

class DecodeGraphCopy {
public:
  DecodeGraphCopy(const Graph& forward, int64_t batch) : forward_(forward), map_(forward.tensors.size(), kNoTensor) {
    for (TensorId id : forward.parameters) {
      if (forward.tensor(id).role == TensorRole::Parameter) graph_.parameters.push_back(copy(id));
    }
    for (const char* name : {kSlotIds, kCacheLengths, kNewLengths}) {
      graph_.inputs.push_back(add({name, TensorType{DType::I32, Shape{batch}}, TensorRole::Input}));
    }
  }

  // A leaf of forward (an input or a constant) the copied nodes read, on first use.
  TensorId leaf(TensorId id) {
    if (map_[static_cast<size_t>(id)] != kNoTensor) return map_[static_cast<size_t>(id)];
    const TensorRole role = forward_.tensor(id).role;
    SUROGATE_CHECK(role == TensorRole::Input || role == TensorRole::Constant, "'{}' is read before it is written",
                   forward_.tensor(id).name);
    const TensorId copied = copy(id);
    (role == TensorRole::Input ? graph_.inputs : graph_.parameters).push_back(copied);
    return copied;
  }

  void copy_node(const Node& node) {
    Node copied = node;
    copied.inputs.clear();
    for (TensorId id : node.inputs) copied.inputs.push_back(leaf(id));
    copied.outputs.clear();
    for (TensorId id : node.outputs) copied.outputs.push_back(copy(id));
    graph_.add_node(std::move(copied));
  }

  void replace_attention(const Node& node, const TensorType& cache) {
    const std::string layer = std::to_string(layers_++);
    Node cached;
    cached.name = node.name;
    cached.op = "cached_attention";
    cached.attrs = node.attrs;
    cached.attrs.erase("backward_chunks");
    cached.recompute_group = node.recompute_group;
    for (size_t i = 0; i < 3; ++i) cached.inputs.push_back(leaf(node.inputs[i]));
    for (const char* which : {"k_cache", "v_cache"}) {
      const TensorId id = add({"layers." + layer + "." + which, cache, TensorRole::Constant});
      graph_.parameters.push_back(id);
      cached.inputs.push_back(id);
    }
    for (const char* name : {kSlotIds, kCacheLengths, kNewLengths}) cached.inputs.push_back(graph_.require_tensor(name));
    cached.outputs.push_back(copy(node.outputs.at(0)));
    graph_.add_node(std::move(cached));
  }

  TensorId mapped(TensorId id) { return leaf(id); }
  Graph finish() { return std::move(graph_); }

private:
  TensorId copy(TensorId id) {
    TensorInfo info = forward_.tensor(id);
    info.producer = kNoNode;
    return map_[static_cast<size_t>(id)] = add(std::move(info));
  }
  TensorId add(TensorInfo info) {
    SUROGATE_CHECK(!graph_.find_tensor(info.name), "the decode graph already has a tensor '{}'", info.name);
    return graph_.add_tensor(std::move(info));
  }

  const Graph& forward_;
  std::vector<TensorId> map_;
  Graph graph_;
  int64_t layers_ = 0;
};

// logits = head · hidden at each row's last real token (see decode_graph.h).
void add_logits(GraphBuilder& builder, TensorId hidden, TensorId head, int64_t batch, int64_t sequence) {
  if (sequence > 1) {
    const TensorId rows = builder.input(kLastRows, DType::I32, {batch * sequence});
    const TensorId positions = builder.input(kLastRowPositions, DType::I32, {batch, sequence, 1});
    const TensorId gathered = builder.op("moe_permute", {hidden, rows, positions}, nlohmann::json::object(), "last_hidden");
    hidden = builder.op("split", {gathered}, {{"axis", 0}, {"sizes", {batch, batch * sequence - batch}}}, "last_hidden_rows");
  }
  builder.mark_output(builder.op("linear", {hidden, head}, nlohmann::json::object(), kDecodeLogits));
}

}  // namespace

Graph build_decode_graph(const Graph& forward, const OpRegistry& registry, const DecodeShape& shape,
                         const std::string& source) {
  SUROGATE_CHECK(shape.slots > 0 && shape.capacity > 0, "a KV cache of {} slots × {} positions", shape.slots,
                 shape.capacity);
  const Shape& tokens = forward.tensor(forward.require_tensor("input_ids")).type.shape;
  SUROGATE_CHECK(tokens.size() == 2, "input_ids is [B, T]");
  const int64_t batch = tokens[0], sequence = tokens[1];
  if (forward.outputs.empty() || forward.tensor(forward.outputs.front()).producer == kNoNode) {
    fail_user("{}: the model graph has no loss output; generation needs its lm_head_loss node", source);
  }
  const Node& loss = forward.node(forward.tensor(forward.outputs.front()).producer);
  if (loss.op != "lm_head_loss") {
    fail_user("{}: the graph's loss comes from '{}', not lm_head_loss; generation needs the LM head's inputs (the "
              "final hidden state and the head)", source, loss.op);
  }
  if (std::none_of(forward.nodes.begin(), forward.nodes.end(), is_attention)) {
    fail_user("{}: the model graph has no attention node; generation keeps each attention's keys and values in a "
              "KV cache", source);
  }
  const TensorId hidden = loss.inputs.at(0), head = loss.inputs.at(1);
  const std::vector<bool> needed = needed_nodes(forward, {hidden, head});
  DecodeGraphCopy copy(forward, batch);
  for (size_t index = 0; index < forward.nodes.size(); ++index) {
    if (!needed[index]) continue;
    const Node& node = forward.nodes[index];
    if (is_attention(node)) {
      copy.replace_attention(node, cache_type(forward, node, shape));
    } else {
      copy.copy_node(node);
    }
  }
  const TensorId decode_hidden = copy.mapped(hidden), decode_head = copy.mapped(head);
  GraphBuilder builder(registry, copy.finish());
  add_logits(builder, decode_hidden, decode_head, batch, sequence);
  return builder.finish();
}

Graph add_greedy_tokens(Graph decode, const OpRegistry& registry) {
  const TensorId logits = decode.require_tensor(kDecodeLogits);
  GraphBuilder builder(registry, std::move(decode));
  builder.mark_output(builder.op("greedy_tokens", {logits}, nlohmann::json::object(), kDecodeGreedyTokens));
  return builder.finish();
}

int64_t cache_layers(const Graph& decode) {
  return std::count_if(decode.nodes.begin(), decode.nodes.end(),
                       [](const Node& node) { return node.op == "cached_attention"; });
}

}  // namespace surogate::generate
