// GraphBuilder: the small API model code uses to write forward graphs, and that gradient rules
// use to emit backward nodes. Every op() call infers output types through the op registry
// (a shape mismatch is a UserError naming the node), names outputs from the current scope,
// and tags the node with the current recompute group and phase.
//
//   GraphBuilder b(registry);
//   TensorId x = b.input("tokens_embedded", DType::F32, {B, T, C});
//   TensorId w = b.parameter("layers.0.ln1.weight", DType::F32, {C});
//   {
//     auto scope = b.scope("layers.0");
//     auto group = b.recompute_group("rmsnorm");
//     TensorId h = b.op("rmsnorm", {x, w}, {{"eps", 1e-6}}, "ln1");  // "layers.0.ln1"
//     auto outs = b.op("rmsnorm", {x, w}, {{"eps", 1e-6}});          // outs[1] is the rstd
//   }
//   b.mark_output(loss);
//   Graph g = b.finish();
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/graph.h"

namespace surogate::graph {

class OpRegistry;

// The outputs of one op() call. Converts to its first output, so single-output ops read as
// `TensorId y = b.op(...)`; index it for auxiliary outputs.
struct OpOutputs {
  std::vector<TensorId> ids;
  TensorId operator[](size_t index) const;
  operator TensorId() const;  // NOLINT(google-explicit-constructor): the first output
  size_t size() const { return ids.size(); }
};

class GraphBuilder {
public:
  explicit GraphBuilder(const OpRegistry& registry);
  // Continues an existing graph (autodiff and recompute extend the forward graph).
  GraphBuilder(const OpRegistry& registry, Graph graph);

  TensorId input(const std::string& name, DType dtype, Shape shape);
  TensorId parameter(const std::string& name, DType dtype, Shape shape, bool trainable = true);
  TensorId constant(const std::string& name, DType dtype, Shape shape);

  // Applies a registered op. `name` defaults to the op name; the first output is called
  // "<scope>.<name>", further outputs "<scope>.<name>.<output name from the OpDef>"; clashes get
  // a ".2", ".3" suffix so names stay unique and deterministic.
  OpOutputs op(const std::string& op_name, std::vector<TensorId> inputs,
               nlohmann::json attrs = nlohmann::json::object(), const std::string& name = "");

  void mark_output(TensorId id);

  // RAII guards: nested naming scopes ("layers" + "3" + "attn" -> "layers.3.attn"),
  // recompute groups and phases. Each restores the previous value when destroyed.
  class [[nodiscard]] Restore {
  public:
    Restore(std::string* slot, std::string previous) : slot_(slot), previous_(std::move(previous)) {}
    Restore(const Restore&) = delete;
    Restore& operator=(const Restore&) = delete;
    ~Restore() { *slot_ = std::move(previous_); }

  private:
    std::string* slot_;
    std::string previous_;
  };
  Restore scope(const std::string& name);
  Restore recompute_group(const std::string& group);
  void set_phase(NodePhase phase) { phase_ = phase; }
  NodePhase phase() const { return phase_; }
  const std::string& current_scope() const { return scope_; }

  // Full name for `name` under the current scope ("layers.3.attn" + "q" -> "layers.3.attn.q").
  std::string scoped_name(const std::string& name) const;
  // A unique tensor name based on `base`.
  std::string unique_name(const std::string& base) const;

  const Graph& graph() const { return graph_; }
  Graph& mutable_graph() { return graph_; }
  const OpRegistry& registry() const { return registry_; }
  const TensorInfo& tensor(TensorId id) const { return graph_.tensor(id); }
  const TensorType& type(TensorId id) const { return graph_.tensor(id).type; }

  // Hands the graph over; the builder is left empty.
  Graph finish();

private:
  TensorId add_leaf(const std::string& name, DType dtype, Shape shape, TensorRole role, bool trainable);

  const OpRegistry& registry_;
  Graph graph_;
  std::string scope_;
  std::string group_;
  NodePhase phase_ = NodePhase::Forward;
};

}  // namespace surogate::graph
