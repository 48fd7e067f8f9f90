// The quantized-base rewrite of a decoder's frozen projections (NF4, FP8 blocks, NVFP4); see qlora.h.
#include "models/qlora.h"

#include "models/model_spec.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "core/error.h"
#include "graph/builder.h"
#include "quant/fp8_blocks.h"

namespace surogate::models {
namespace {
using graph::TensorId;

constexpr const char* kDequantizeNf4 = "dequantize_nf4";
constexpr const char* kDequantizeFp8Blocks = "dequantize_fp8_blocks";
constexpr const char* kDequantizeFp4 = "dequantize_fp4";

bool reads_as_weight(const graph::Node& node, TensorId id) {
  if (node.op != "linear" && node.op != "linear_add") return false;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == id && i != 1) return false;
  }
  return true;
}

// The frozen 2-D parameters under "layers." that only linear / linear_add read, as their weight.
std::vector<TensorId> quantizable_weights(const graph::Graph& forward) {
  std::unordered_map<TensorId, bool> only_weight;  // parameter → read only as a weight so far
  for (const graph::Node& node : forward.nodes) {
    for (TensorId input : node.inputs) {
      const graph::TensorInfo& info = forward.tensor(input);
      if (info.role != graph::TensorRole::Parameter || info.trainable || info.type.shape.size() != 2 ||
          !info.name.starts_with("layers.") || is_router_weight(info.name)) {
        continue;
      }
      auto [found, fresh] = only_weight.try_emplace(input, true);
      found->second = found->second && reads_as_weight(node, input);
    }
  }
  std::vector<TensorId> result;
  for (TensorId id : forward.parameters) {
    if (auto found = only_weight.find(id); found != only_weight.end() && found->second) result.push_back(id);
  }
  return result;
}

// The format's part of the rewrite: the op, attrs and pieces (new frozen parameters) of one
// weight's dequantization node; the rewrite adds its name, output and recompute group.
using DequantizeNode = std::function<graph::Node(graph::GraphBuilder& builder, const graph::TensorInfo& weight)>;

DequantizeNode nf4_node(const QloraOptions& options) {
  if (options.block_size < 2 || options.block_size % 2 != 0) {
    fail_user("the NF4 block size must be even, got {}", options.block_size);
  }
  return [options](graph::GraphBuilder& builder, const graph::TensorInfo& info) {
    quant::Nf4Shape shape{info.type.numel(), options.block_size, options.double_quant};
    graph::Node node;
    node.op = kDequantizeNf4;
    node.attrs = {{"shape", info.type.shape},
                  {"block_size", options.block_size},
                  {"dtype", std::string(dtype_safetensors_name(info.type.dtype))}};
    const std::string& name = info.name;
    node.inputs.push_back(builder.parameter(name + ".nf4", DType::U8, {shape.packed_bytes()}, false));
    if (options.double_quant) {
      node.inputs.push_back(builder.parameter(name + ".absmax", DType::U8, {shape.blocks()}, false));
      node.inputs.push_back(builder.parameter(name + ".nested_absmax", DType::F32, {shape.absmax2_count()}, false));
      node.inputs.push_back(builder.parameter(name + ".offset", DType::F32, {1}, false));
    } else {
      node.inputs.push_back(builder.parameter(name + ".absmax", DType::F32, {shape.blocks()}, false));
    }
    return node;
  };
}

DequantizeNode fp8_block_node(const QloraOptions& options) {
  if (options.block_size < 1) fail_user("the FP8 block size must be positive, got {}", options.block_size);
  return [options](graph::GraphBuilder& builder, const graph::TensorInfo& info) {
    const graph::Shape& shape = info.type.shape;
    const quant::Fp8BlockShape blocks{shape[0], shape[1], options.block_size, options.block_size};
    graph::Node node;
    node.op = kDequantizeFp8Blocks;
    node.attrs = {{"block_size", options.block_size}, {"dtype", std::string(dtype_safetensors_name(info.type.dtype))}};
    node.inputs.push_back(builder.parameter(info.name + ".fp8", DType::F8_E4M3, shape, false));
    node.inputs.push_back(
        builder.parameter(info.name + ".scale_inv", DType::F32, {blocks.row_blocks(), blocks.col_blocks()}, false));
    return node;
  };
}

// attr four_over_six records how the pieces are quantized (nvfp4_weights reads it); the
// dequantization does not need it.
DequantizeNode nvfp4_node(const QloraOptions& options) {
  return [options](graph::GraphBuilder& builder, const graph::TensorInfo& info) {
    const quant::Nvfp4Shape shape{info.type.shape[0], info.type.shape[1]};
    graph::Node node;
    node.op = kDequantizeFp4;
    node.attrs = {{"shape", info.type.shape},
                  {"four_over_six", options.four_over_six},
                  {"dtype", std::string(dtype_safetensors_name(info.type.dtype))}};
    node.inputs.push_back(builder.parameter(info.name + ".fp4", DType::U8, {shape.rows, shape.packed_cols()}, false));
    node.inputs.push_back(
        builder.parameter(info.name + ".fp4_block_scales", DType::F8_E4M3, {shape.rows, shape.scale_cols()}, false));
    node.inputs.push_back(builder.parameter(info.name + ".fp4_tensor_scale", DType::F32, {1}, false));
    return node;
  };
}

DequantizeNode dequantize_node(const QloraOptions& options) {
  switch (options.format) {
    case WeightFormat::Fp8Block: return fp8_block_node(options);
    case WeightFormat::Nvfp4: return nvfp4_node(options);
    case WeightFormat::Nf4: return nf4_node(options);
    case WeightFormat::Fp8Tensor: break;
  }
  SUROGATE_CHECK(false, "the QLoRA rewrite has no FP8 per-tensor format (that is the fp8_hybrid recipe's)");
  return {};
}

}  // namespace

graph::Graph apply_qlora_quantization(const graph::Graph& forward, const graph::OpRegistry& registry,
                                      const QloraOptions& options) {
  const DequantizeNode make_node = dequantize_node(options);
  const std::vector<TensorId> weights = quantizable_weights(forward);
  graph::Graph rewritten = forward;
  rewritten.nodes.clear();
  for (graph::TensorInfo& info : rewritten.tensors) info.producer = graph::kNoNode;
  std::erase_if(rewritten.parameters,
                [&](TensorId id) { return std::find(weights.begin(), weights.end(), id) != weights.end(); });
  graph::GraphBuilder builder(registry, std::move(rewritten));

  // Each weight becomes an activation; its dequantization node is emitted before its first reader.
  std::unordered_map<TensorId, graph::Node> pending;
  for (TensorId id : weights) {
    builder.mutable_graph().tensor(id).role = graph::TensorRole::Activation;
    const graph::TensorInfo weight = builder.mutable_graph().tensor(id);  // a copy: make_node adds tensors
    graph::Node node = make_node(builder, weight);
    node.name = weight.name + ".dequant";
    node.recompute_group = "dequant";
    node.outputs = {id};
    pending.emplace(id, std::move(node));
  }
  for (const graph::Node& node : forward.nodes) {
    for (TensorId input : node.inputs) {
      auto found = pending.find(input);
      if (found == pending.end()) continue;
      builder.mutable_graph().add_node(std::move(found->second));
      pending.erase(found);
    }
    builder.mutable_graph().add_node(node);
  }
  return builder.finish();
}

std::vector<QuantizedWeight> nf4_weights(const graph::Graph& graph) {
  std::vector<QuantizedWeight> result;
  for (const graph::Node& node : graph.nodes) {
    if (node.op != kDequantizeNf4 || node.phase != graph::NodePhase::Forward) continue;
    const graph::TensorInfo& weight = graph.tensor(node.outputs[0]);
    QuantizedWeight entry;
    entry.name = weight.name;
    entry.shape = weight.type.shape;
    entry.format = WeightFormat::Nf4;
    entry.nf4 = {weight.type.numel(), node.attrs.at("block_size").get<int64_t>(), node.inputs.size() == 4};
    for (TensorId input : node.inputs) entry.pieces.push_back(graph.tensor(input).name);
    result.push_back(std::move(entry));
  }
  return result;
}

std::vector<QuantizedWeight> fp8_block_weights(const graph::Graph& graph) {
  std::vector<QuantizedWeight> result;
  for (const graph::Node& node : graph.nodes) {
    if (node.op != kDequantizeFp8Blocks || node.phase != graph::NodePhase::Forward) continue;
    const graph::TensorInfo& weight = graph.tensor(node.outputs[0]);
    const int64_t block = node.attrs.at("block_size").get<int64_t>();
    QuantizedWeight entry;
    entry.name = weight.name;
    entry.shape = weight.type.shape;
    entry.format = WeightFormat::Fp8Block;
    entry.fp8_blocks = {weight.type.shape[0], weight.type.shape[1], block, block};
    for (TensorId input : node.inputs) entry.pieces.push_back(graph.tensor(input).name);
    result.push_back(std::move(entry));
  }
  return result;
}

std::vector<QuantizedWeight> nvfp4_weights(const graph::Graph& graph) {
  std::vector<QuantizedWeight> result;
  for (const graph::Node& node : graph.nodes) {
    if (node.op != kDequantizeFp4 || node.phase != graph::NodePhase::Forward) continue;
    const graph::TensorInfo& weight = graph.tensor(node.outputs[0]);
    QuantizedWeight entry;
    entry.name = weight.name;
    entry.shape = weight.type.shape;
    entry.format = WeightFormat::Nvfp4;
    entry.nvfp4 = {weight.type.shape[0], weight.type.shape[1]};
    entry.nvfp4_rule = node.attrs.at("four_over_six").get<bool>() ? quant::Nvfp4ScaleRule::FourOverSix
                                                                   : quant::Nvfp4ScaleRule::Six;
    for (TensorId input : node.inputs) entry.pieces.push_back(graph.tensor(input).name);
    result.push_back(std::move(entry));
  }
  return result;
}

}  // namespace surogate::models
