// Prompt sharing's graph pass; see prompt_sharing_graph.h.
#include "train/objective/prompt_sharing_graph.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "graph/node_rebuild.h"
#include "graph/verifier.h"

namespace surogate::train {
namespace {
using namespace graph;

constexpr size_t kDocumentsInput = 3;  // attention(q, k, v, document_ids)

class SharingRewriter {
public:
  SharingRewriter(const Graph& forward, const OpRegistry& registry, int64_t batch, int64_t shared, int64_t expanded)
      : forward_(forward), registry_(registry), graph_(forward) {
    graph_.nodes.clear();
    for (TensorInfo& info : graph_.tensors) info.producer = kNoNode;
    documents_ = input(kExpandedDocumentIds, {batch, expanded});
    expand_index_ = input(kSharedExpandIndex, {batch, expanded});
    expand_sources_ = input(kSharedExpandSources, {batch, shared, 2});
    take_index_ = input(kSharedTakeIndex, {batch, shared});
    take_sources_ = input(kSharedTakeSources, {batch, expanded, 1});
  }

  Graph run() {
    bool attended = false;
    for (const Node& node : forward_.nodes) {
      if (node.op == "attention") {
        rewrite_attention(node);
        attended = true;
        continue;
      }
      add_inferred(node);
    }
    SUROGATE_CHECK(attended, "prompt sharing: the graph has attention");
    verify_graph(graph_, registry_);
    return std::move(graph_);
  }

private:
  TensorId input(const char* name, Shape shape) {
    SUROGATE_CHECK(!graph_.find_tensor(name), "prompt-sharing input '{}' is free", name);
    const TensorId id = graph_.add_tensor({name, {DType::I32, std::move(shape)}, TensorRole::Input});
    graph_.inputs.push_back(id);
    return id;
  }

  void add_inferred(const Node& node) { append_inferred(graph_, registry_, node); }

  // gather_rows(input, index, sources) into `output` (a new tensor, or the attention's own output).
  TensorId gather(const Node& around, TensorId input, TensorId index, TensorId sources, TensorId output,
                  const std::string& name) {
    Node node;
    node.name = name;
    node.op = "gather_rows";
    node.inputs = {input, index, sources};
    node.outputs = {output};
    node.recompute_group = around.recompute_group;
    node.phase = around.phase;
    add_inferred(node);
    return output;
  }

  TensorId activation(const std::string& name) {
    SUROGATE_CHECK(!graph_.find_tensor(name), "prompt-sharing tensor name '{}' is free", name);
    return graph_.add_tensor({name, TensorType{}, TensorRole::Activation});
  }

  void rewrite_attention(const Node& node) {
    SUROGATE_CHECK(node.inputs.size() == kDocumentsInput + 1, "the decoder's attention reads document ids");
    const std::string& base = node.name;
    Node attention = node;
    const char* parts[] = {".q_expanded", ".k_expanded", ".v_expanded"};
    for (size_t i = 0; i < 3; ++i) {
      attention.inputs[i] = gather(node, node.inputs[i], expand_index_, expand_sources_, activation(base + parts[i]),
                                   base + parts[i]);
    }
    attention.inputs[kDocumentsInput] = documents_;
    attention.outputs[0] = activation(base + ".expanded");
    add_inferred(attention);
    gather(node, attention.outputs[0], take_index_, take_sources_, node.outputs[0], base + ".shared");
  }

  const Graph& forward_;
  const OpRegistry& registry_;
  Graph graph_;
  TensorId documents_ = kNoTensor, expand_index_ = kNoTensor, expand_sources_ = kNoTensor, take_index_ = kNoTensor,
           take_sources_ = kNoTensor;
};

}  // namespace

Graph apply_prompt_sharing(const Graph& forward, const OpRegistry& registry, int64_t batch, int64_t shared,
                           int64_t expanded) {
  SUROGATE_CHECK(expanded >= shared, "the packed rows ({}) hold the shared ones ({})", expanded, shared);
  return SharingRewriter(forward, registry, batch, shared, expanded).run();
}

}  // namespace surogate::train
