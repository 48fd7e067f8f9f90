// See batch_reshape.h.
#include "generate/batch_reshape.h"

#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "graph/json_ir.h"

namespace surogate::generate {

graph::Graph reshape_batch(const graph::Graph& forward, const graph::OpRegistry& registry, int64_t batch,
                           int64_t sequence, const std::string& source) {
  const graph::Shape& tokens = forward.tensor(forward.require_tensor("input_ids")).type.shape;
  SUROGATE_CHECK(tokens.size() == 2, "input_ids is [B, T]");
  if (tokens[0] == batch && tokens[1] == sequence) return forward;
  graph::Graph reshaped = forward;
  for (graph::TensorId id : reshaped.inputs) {
    graph::Shape& shape = reshaped.tensor(id).type.shape;
    if (shape.size() >= 2 && shape[0] == tokens[0] && shape[1] == tokens[1]) {
      shape[0] = batch;
      shape[1] = sequence;
    }
  }
  for (graph::Node& node : reshaped.nodes) {
    std::vector<graph::TensorType> inputs;
    for (graph::TensorId id : node.inputs) inputs.push_back(reshaped.tensor(id).type);
    std::vector<graph::TensorType> outputs;
    try {
      outputs = registry.infer(node.op, fmt::format("node '{}' (op {})", node.name, node.op), inputs, node.attrs);
    } catch (const UserError& error) {
      fail_user("{}: the definition's graph is of [{}, {}] tokens, and generation runs it at [{}, {}], which its "
                "node '{}' does not follow: {}", source, tokens[0], tokens[1], batch, sequence, node.name,
                error.what());
    }
    SUROGATE_CHECK(outputs.size() == node.outputs.size(), "node '{}' has {} outputs, its rule gives {}", node.name,
                   node.outputs.size(), outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) reshaped.tensor(node.outputs[i]).type = outputs[i];
  }
  return reshaped;
}

std::optional<std::pair<int64_t, int64_t>> definition_batch_shape(const models::ModelDefinition& definition,
                                                                  const graph::OpRegistry& registry) {
  if (definition.ir_file.empty()) return std::nullopt;
  try {
    const graph::Graph ir = graph::load_json_ir(definition.ir_file, registry);
    const std::optional<graph::TensorId> ids = ir.find_tensor("input_ids");
    if (!ids || ir.tensor(*ids).type.shape.size() != 2) return std::nullopt;
    return std::pair(ir.tensor(*ids).type.shape[0], ir.tensor(*ids).type.shape[1]);
  } catch (const UserError&) {
    return std::nullopt;  // build_model_graph reports it, naming the option
  }
}

}  // namespace surogate::generate
