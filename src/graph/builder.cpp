// GraphBuilder: names, scopes, recompute tags and shape inference for every node added.
#include "graph/builder.h"

#include <fmt/format.h>

#include "core/error.h"
#include "graph/op_registry.h"

namespace surogate::graph {

TensorId OpOutputs::operator[](size_t index) const {
  SUROGATE_CHECK(index < ids.size(), "op has {} outputs, asked for output {}", ids.size(), index);
  return ids[index];
}

OpOutputs::operator TensorId() const {
  SUROGATE_CHECK(!ids.empty(), "op has no outputs");
  return ids.front();
}

GraphBuilder::GraphBuilder(const OpRegistry& registry) : registry_(registry) {}

GraphBuilder::GraphBuilder(const OpRegistry& registry, Graph graph) : registry_(registry), graph_(std::move(graph)) {}

std::string GraphBuilder::scoped_name(const std::string& name) const {
  if (scope_.empty()) return name;
  if (name.empty()) return scope_;
  return scope_ + "." + name;
}

std::string GraphBuilder::unique_name(const std::string& base) const {
  if (!graph_.find_tensor(base)) return base;
  for (int suffix = 2;; ++suffix) {
    std::string candidate = fmt::format("{}.{}", base, suffix);
    if (!graph_.find_tensor(candidate)) return candidate;
  }
}

TensorId GraphBuilder::add_leaf(const std::string& name, DType dtype, Shape shape, TensorRole role,
                                bool trainable) {
  std::string full = scoped_name(name);
  if (full.empty()) fail_user("a graph {} needs a name", role_name(role));
  if (graph_.find_tensor(full)) fail_user("the graph already has a tensor named '{}'", full);
  for (int64_t dim : shape) {
    if (dim <= 0) fail_user("tensor '{}' has shape {}: every dimension must be positive", full, format_shape(shape));
  }
  TensorInfo info{full, TensorType{dtype, std::move(shape)}, role, trainable, kNoNode};
  TensorId id = graph_.add_tensor(std::move(info));
  if (role == TensorRole::Input) graph_.inputs.push_back(id);
  if (role == TensorRole::Parameter || role == TensorRole::Constant) graph_.parameters.push_back(id);
  return id;
}

TensorId GraphBuilder::input(const std::string& name, DType dtype, Shape shape) {
  return add_leaf(name, dtype, std::move(shape), TensorRole::Input, false);
}

TensorId GraphBuilder::parameter(const std::string& name, DType dtype, Shape shape, bool trainable) {
  return add_leaf(name, dtype, std::move(shape), TensorRole::Parameter, trainable);
}

TensorId GraphBuilder::constant(const std::string& name, DType dtype, Shape shape) {
  return add_leaf(name, dtype, std::move(shape), TensorRole::Constant, false);
}

OpOutputs GraphBuilder::op(const std::string& op_name, std::vector<TensorId> inputs, nlohmann::json attrs,
                           const std::string& name) {
  const OpDef& def = registry_.get(op_name);
  if (attrs.is_null()) attrs = nlohmann::json::object();
  std::string base = unique_name(scoped_name(name.empty() ? op_name : name));
  std::vector<TensorType> input_types;
  input_types.reserve(inputs.size());
  for (TensorId input : inputs) input_types.push_back(graph_.tensor(input).type);
  std::string where = fmt::format("node '{}' (op {})", base, op_name);
  std::vector<TensorType> output_types = registry_.infer(op_name, where, input_types, attrs);

  Node node;
  node.name = base;
  node.op = op_name;
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  node.recompute_group = group_;
  node.phase = phase_;
  OpOutputs result;
  for (size_t i = 0; i < output_types.size(); ++i) {
    std::string output_name = base;
    if (i > 0) {
      std::string suffix = i < def.outputs.size() ? def.outputs[i] : fmt::format("out{}", i);
      output_name = unique_name(base + "." + suffix);
    }
    TensorId id = graph_.add_tensor(TensorInfo{output_name, output_types[i], TensorRole::Activation, false, kNoNode});
    node.outputs.push_back(id);
    result.ids.push_back(id);
  }
  graph_.add_node(std::move(node));
  return result;
}

void GraphBuilder::mark_output(TensorId id) {
  graph_.tensor(id);  // range check
  if (!graph_.is_output(id)) graph_.outputs.push_back(id);
}

GraphBuilder::Restore GraphBuilder::scope(const std::string& name) {
  std::string previous = scope_;
  scope_ = scoped_name(name);
  return Restore(&scope_, std::move(previous));
}

GraphBuilder::Restore GraphBuilder::recompute_group(const std::string& group) {
  std::string previous = group_;
  group_ = group;
  return Restore(&group_, std::move(previous));
}

Graph GraphBuilder::finish() {
  Graph result = std::move(graph_);
  graph_ = Graph{};
  scope_.clear();
  group_.clear();
  return result;
}

}  // namespace surogate::graph
