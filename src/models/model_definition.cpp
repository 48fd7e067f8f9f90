// Built-in or IR-defined forward graphs; see model_definition.h.
#include "models/model_definition.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "graph/builder.h"
#include "graph/json_ir.h"
#include "graph/verifier.h"
#include "models/python_definition.h"
#include "models/ir_router_loss.h"
#include "models/model_eval.h"

namespace surogate::models {
namespace {
using graph::Graph;
using graph::TensorId;

constexpr const char* kLossWeights = "loss_weights";
constexpr const char* kLossOp = "lm_head_loss";

// The node that writes the graph's first output (the loss); the file has been verified, so it exists.
graph::NodeId loss_node_id(const Graph& ir) {
  return ir.tensor(ir.outputs.at(0)).producer;
}

const graph::Node& loss_node(const Graph& ir) {
  return ir.node(loss_node_id(ir));
}

void require_loss_op(const Graph& ir, const ModelDefinition& definition, const std::string& what) {
  const graph::Node& node = loss_node(ir);
  if (node.op != kLossOp) {
    fail_user("{}: {} needs the loss to be computed by {} (the engine adds its own nodes beside it), but the "
              "graph's loss '{}' comes from '{}'", definition.source, what, kLossOp, node.name, node.op);
  }
}

// Copies `ir` tensor by tensor and node by node into a new graph with the run's dtype, re-running
// each op's shape rule (its output types change with the dtype, nothing else does).
// With `router_loss`, the router load-balancing loss is added on the way (models/ir_router_loss.h).
Graph retyped_copy(const Graph& ir, const graph::OpRegistry& registry, const DecoderGraphOptions& options,
                   const ModelDefinition& definition, IrRouterLoss* router_loss) {
  Graph result;
  std::vector<TensorId> mapped(ir.tensors.size(), graph::kNoTensor);
  auto add_leaf = [&](TensorId id, DType dtype) {
    graph::TensorInfo info = ir.tensor(id);
    info.type.dtype = dtype;
    info.producer = graph::kNoNode;
    mapped[static_cast<size_t>(id)] = result.add_tensor(std::move(info));
    return mapped[static_cast<size_t>(id)];
  };
  for (TensorId id : ir.inputs) result.inputs.push_back(add_leaf(id, ir.tensor(id).type.dtype));
  std::optional<TensorId> loss_weights;
  if (options.token_weights) {
    loss_weights = result.add_tensor({kLossWeights, {DType::F32, {options.batch, options.sequence}},
                                      graph::TensorRole::Input, false, graph::kNoNode});
    result.inputs.push_back(*loss_weights);
  }
  for (TensorId id : ir.parameters) {
    const DType dtype = ir.tensor(id).type.dtype;
    result.parameters.push_back(add_leaf(id, dtype_is_floating(dtype) ? options.dtype : dtype));
  }
  const std::string dtype_name(dtype_safetensors_name(options.dtype));
  const graph::NodeId loss_producer = ir.tensor(ir.outputs.at(0)).producer;
  for (size_t index = 0; index < ir.nodes.size(); ++index) {
    graph::Node node = ir.nodes[index];
    for (TensorId& input : node.inputs) input = mapped[static_cast<size_t>(input)];
    if (node.attrs.contains("dtype") && node.attrs["dtype"].is_string()) {
      const auto named = dtype_from_safetensors_name(node.attrs["dtype"].get<std::string>());
      if (named && dtype_is_floating(*named)) node.attrs["dtype"] = dtype_name;
    }
    const bool is_loss = static_cast<graph::NodeId>(index) == loss_producer;
    if (is_loss && node.op == kLossOp) {
      node.attrs["chunks"] = std::max<int64_t>(1, options.lmhead_chunks);
      if (loss_weights) node.inputs.push_back(*loss_weights);
    }
    if (is_loss && router_loss != nullptr) node.name = router_loss->renamed(node.name);
    std::vector<graph::TensorType> input_types;
    for (TensorId input : node.inputs) input_types.push_back(result.tensor(input).type);
    const std::vector<graph::TensorType> output_types =
        registry.infer(node.op, fmt::format("{}: node '{}'", definition.source, node.name), input_types, node.attrs);
    for (size_t output = 0; output < node.outputs.size(); ++output) {
      graph::TensorInfo info = ir.tensor(node.outputs[output]);
      info.type = output_types.at(output);
      info.producer = graph::kNoNode;
      if (is_loss && router_loss != nullptr) info.name = router_loss->renamed(info.name);
      const TensorId old_id = node.outputs[output];
      node.outputs[output] = result.add_tensor(std::move(info));
      mapped[static_cast<size_t>(old_id)] = node.outputs[output];
    }
    result.add_node(std::move(node));
    if (router_loss != nullptr) router_loss->after_node(result, registry, index, mapped);
  }
  for (TensorId id : ir.outputs) result.outputs.push_back(mapped[static_cast<size_t>(id)]);
  if (router_loss != nullptr) {
    result.outputs.front() = router_loss->terms().loss;
    result.outputs.insert(result.outputs.begin() + 1, router_loss->terms().router_aux_loss);
  }
  return result;
}

}  // namespace

DecoderGraph specialize_ir_graph(const Graph& ir, const io::ModelConfig& config, const graph::OpRegistry& registry,
                                 const DecoderGraphOptions& options, const ModelDefinition& definition) {
  check_model_graph(ir, config, {options.batch, options.sequence}, definition.source, definition.shape_options);
  if (ir.find_tensor(kLossWeights)) {
    fail_user("{}: the graph declares '{}'; leave it out: the engine adds that input itself when loss_scale weighs "
              "tokens", definition.source, kLossWeights);
  }
  if (options.fused_rope) {
    // The option picks how the built-in builder writes RoPE; a definition writes its own rope ops.
    fail_user("{}: use_fused_rope chooses the built-in builder's RoPE ops; a model_definition graph names its own "
              "(rope_cos_sin + rope, or fused_rope): remove use_fused_rope, or write fused_rope into the graph",
              definition.source);
  }
  if (ir.find_tensor(kRouterAuxLoss)) {
    fail_user("{}: the graph declares '{}'; leave it out: the engine adds the router loss itself when config.json "
              "sets output_router_logits (training graphs)", definition.source, kRouterAuxLoss);
  }
  if (options.token_weights) require_loss_op(ir, definition, "a loss_scale that weighs tokens");
  if (options.with_accuracy) require_loss_op(ir, definition, "evaluation (validation_datasets)");
  std::optional<IrRouterLoss> router_loss;
  if (config.moe && config.moe->output_router_logits && options.router_aux_loss_micro_batches > 0) {
    require_loss_op(ir, definition, "the router loss of output_router_logits");
    router_loss.emplace(ir, loss_node_id(ir), *config.moe, options.batch * options.sequence,
                        options.router_aux_loss_micro_batches, definition.source);
  }
  DecoderGraph result;
  result.graph = retyped_copy(ir, registry, options, definition, router_loss ? &*router_loss : nullptr);
  // attn_bwd_chunks reaches the definition's attention nodes as the builder's.
  if (options.attention_backward_chunks > 1) {
    for (graph::Node& node : result.graph.nodes) {
      if (node.op == "attention") node.attrs["backward_chunks"] = options.attention_backward_chunks;
    }
  }
  result.loss = result.graph.outputs.at(0);
  if (router_loss) result.router_aux_loss = router_loss->terms().router_aux_loss;
  if (options.with_accuracy) {
    const graph::Node& loss = loss_node(result.graph);
    const std::vector<TensorId> inputs{loss.inputs.at(0), loss.inputs.at(1), loss.inputs.at(2)};
    graph::GraphBuilder builder(registry, std::move(result.graph));
    result.correct = builder.op("lm_head_accuracy", inputs, {{"chunks", std::max<int64_t>(1, options.lmhead_chunks)}},
                                "correct");
    builder.mark_output(result.correct);
    result.graph = builder.finish();
  }
  graph::verify_graph(result.graph, registry);
  return result;
}

DecoderGraph build_model_graph(const io::ModelConfig& config, const graph::OpRegistry& registry,
                               const DecoderGraphOptions& options, const ModelDefinition& definition) {
  if (definition.ir_file.empty()) return build_decoder_graph(config, registry, options);
  std::filesystem::path ir_file = definition.ir_file;
  if (is_python_definition(ir_file)) {
    if (definition.model_dir.empty()) {
      fail_user("{}: a Python model definition needs the model folder to be compiled for", definition.source);
    }
    ir_file = compile_python_definition(ir_file, definition.model_dir, options.batch, options.sequence,
                                        std::max<int64_t>(1, options.lmhead_chunks), definition.source);
  } else if (!std::filesystem::is_regular_file(ir_file)) {
    fail_user("{}: '{}' is not a file; give a JSON IR file (`surogate ir MODEL_DIR -o FILE`, the Python DSL's "
              "emit) or the DSL's model.py", definition.source, ir_file.string());
  }
  Graph ir;
  try {
    ir = graph::load_json_ir(ir_file, registry);
  } catch (const UserError& error) {
    throw UserError(fmt::format("{}: {}", definition.source, error.what()));
  }
  return specialize_ir_graph(ir, config, registry, options, definition);
}

}  // namespace surogate::models
