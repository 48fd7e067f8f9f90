// The sequence-parallel graph pass; see sequence_parallel_graph.h.
#include "distributed/sequence_parallel_graph.h"

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/sequence_exchange_ops.h"
#include "graph/node_rebuild.h"
#include "graph/verifier.h"

namespace surogate::distributed {
namespace {
using namespace graph;

// Forward ops that compute each token's outputs from that token's inputs (and parameters) only.
const std::set<std::string, std::less<>>& per_token_ops() {
  static const std::set<std::string, std::less<>> ops = {
      "embedding", "rmsnorm", "fused_residual_rmsnorm", "fused_rmsnorm_rope", "linear", "linear_add",
      "rope_cos_sin", "rope", "fused_rope", "swiglu", "swiglu_fused", "add", "mul", "scale", "scale_by",
      "dropout", "dropout_add", "concat", "split", "lm_head_loss", "lm_head_cross_entropy", "lm_head_accuracy",
      "dequantize_nf4", "dequantize_fp8_blocks", "dequantize_fp4"};
  return ops;
}

constexpr size_t kDocumentsInput = 3;  // attention(q, k, v, document_ids)

class Rewriter {
public:
  Rewriter(const Graph& forward, const OpRegistry& registry, int64_t ranks)
      : forward_(forward), registry_(registry), ranks_(ranks), graph_(forward) {
    graph_.nodes.clear();
    for (TensorInfo& info : graph_.tensors) info.producer = kNoNode;
  }

  Graph run() {
    split_inputs();
    for (const Node& node : forward_.nodes) {
      if (node.op == "attention") {
        rewrite_attention(node);
        continue;
      }
      if (!per_token_ops().contains(node.op)) {
        fail_user("sequence_parallel_size: {} splits each sequence over {} ranks, which needs every op but attention "
                  "to work token by token; node '{}' applies '{}', which this pass does not know to be one. Set "
                  "sequence_parallel_size: 1 for this graph", ranks_, ranks_, node.name, node.op);
      }
      add_inferred(node);
    }
    verify_graph(graph_, registry_);
    return std::move(graph_);
  }

private:
  // Token inputs [B, T] → [B, T/N]; the document ids (read only by attention) keep [B, T].
  void split_inputs() {
    std::set<TensorId> as_documents, otherwise;
    for (const Node& node : forward_.nodes) {
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const bool documents = node.op == "attention" && i == kDocumentsInput;
        (documents ? as_documents : otherwise).insert(node.inputs[i]);
      }
    }
    int64_t batch = 0;
    for (TensorId id : as_documents) {
      const Shape& shape = forward_.tensor(id).type.shape;
      SUROGATE_CHECK(forward_.tensor(id).role == TensorRole::Input && shape.size() == 2,
                     "attention's document ids are an input [B, T]");
      SUROGATE_CHECK(!otherwise.contains(id), "the document ids are read only by attention");
      batch = shape[0];
      tokens_ = shape[1];
    }
    if (tokens_ == 0) {
      fail_user("sequence_parallel_size: {} needs attention with document ids in the graph (the decoder's); this graph "
                "has none", ranks_);
    }
    if (tokens_ % ranks_ != 0) {
      fail_user("sequence_parallel_size: {} splits each sequence into {} equal slices, but sequence_len is {}; set "
                "sequence_len to a multiple of {}", ranks_, ranks_, tokens_, ranks_);
    }
    for (TensorId id : forward_.inputs) {
      TensorType& type = graph_.tensor(id).type;
      if (as_documents.contains(id) || type.shape != Shape{batch, tokens_}) continue;
      type.shape[1] = tokens_ / ranks_;
    }
  }

  // Re-infers the node's output types from its (retyped) inputs and appends it.
  void add_inferred(const Node& node) { append_inferred(graph_, registry_, node); }

  TensorId new_activation(const std::string& name) {
    SUROGATE_CHECK(!graph_.find_tensor(name), "sequence-parallel tensor name '{}' is free", name);
    return graph_.add_tensor({name, TensorType{}, TensorRole::Activation});
  }

  // One exchange node writing `output` (a new tensor, or the attention's own output).
  TensorId exchange(const Node& around, const char* op, TensorId input, TensorId output, const std::string& name,
                    int64_t heads, int64_t head_dim) {
    Node node;
    node.name = name;
    node.op = op;
    node.inputs = {input};
    node.outputs = {output};
    node.attrs = {{"ranks", ranks_}, {"heads", heads}, {"head_dim", head_dim}};
    node.recompute_group = around.recompute_group;
    node.phase = around.phase;
    add_inferred(node);
    return output;
  }

  void rewrite_attention(const Node& node) {
    SUROGATE_CHECK(node.inputs.size() == 4, "the decoder's attention reads document ids");
    const Attrs attrs(node.attrs, "node '" + node.name + "'");
    if (graph_.tensor(node.inputs[0]).type.shape.size() != 3 || !attrs.has("query_heads")) {
      fail_user("sequence_parallel_size: node '{}' has attention in the [B, T, H, D] layout; the sequence-parallel "
                "pass handles the flat [B, T, H·D] layout the decoder builds", node.name);
    }
    const int64_t query_heads = attrs.integer("query_heads"), kv_heads = attrs.integer("kv_heads");
    const int64_t head_dim = attrs.integer("head_dim");
    if (query_heads % ranks_ != 0 || kv_heads % ranks_ != 0) {
      fail_user("sequence_parallel_size: {} gives each rank of a sequence group 1/{} of the attention heads, but the "
                "model has {} query and {} key/value heads; choose a sequence_parallel_size that divides both",
                ranks_, ranks_, query_heads, kv_heads);
    }
    const std::string& base = node.name;
    const TensorId q = exchange(node, kSequenceToHeads, node.inputs[0], new_activation(base + ".q_heads"),
                                base + ".q_heads", query_heads, head_dim);
    const TensorId k = exchange(node, kSequenceToHeads, node.inputs[1], new_activation(base + ".k_heads"),
                                base + ".k_heads", kv_heads, head_dim);
    const TensorId v = exchange(node, kSequenceToHeads, node.inputs[2], new_activation(base + ".v_heads"),
                                base + ".v_heads", kv_heads, head_dim);
    Node attention = node;
    attention.inputs = {q, k, v, node.inputs[kDocumentsInput]};
    attention.outputs[0] = new_activation(base + ".heads");
    attention.attrs["query_heads"] = query_heads / ranks_;
    attention.attrs["kv_heads"] = kv_heads / ranks_;
    add_inferred(attention);
    exchange(node, kHeadsToSequence, attention.outputs[0], node.outputs[0], base + ".tokens", query_heads, head_dim);
  }

  const Graph& forward_;
  const OpRegistry& registry_;
  const int64_t ranks_;
  Graph graph_;
  int64_t tokens_ = 0;
};

}  // namespace

Graph apply_sequence_parallel(const Graph& forward, const OpRegistry& registry, int64_t ranks) {
  if (ranks <= 1) return forward;
  return Rewriter(forward, registry, ranks).run();
}

}  // namespace surogate::distributed
