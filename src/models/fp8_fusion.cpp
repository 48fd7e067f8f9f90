// The producer fusion of the fp8_hybrid recipe; see fp8_fusion.h.
#include "models/fp8_fusion.h"

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "graph/builder.h"

namespace surogate::models {
namespace {
using graph::NodeId;

// The forward producers whose quantize_fp8 fuse_fp8_producers folds in ("<op>_fp8").
bool fusable_producer(const std::string& op) {
  return op == "rmsnorm" || op == "fused_residual_rmsnorm" || op == "swiglu" || op == "attention";
}

// The quantize_fp8 node a producer absorbs: stateful, E4M3, reading the producer's main output.
bool absorbable(const graph::Graph& graph, const graph::Node& node, bool attention, NodeId* producer) {
  if (node.op != "quantize_fp8" || node.inputs.size() != 2 || !node.attrs.contains("format") ||
      node.attrs.at("format").get<std::string>() != "e4m3") {
    return false;
  }
  *producer = graph.tensor(node.inputs[0]).producer;
  if (*producer == graph::kNoNode) return false;
  const graph::Node& source = graph.nodes[static_cast<size_t>(*producer)];
  return fusable_producer(source.op) && (attention || source.op != "attention") && source.outputs[0] == node.inputs[0];
}

}  // namespace

graph::Graph fuse_fp8_producers(const graph::Graph& forward, const graph::OpRegistry& registry, bool attention) {
  std::unordered_map<NodeId, NodeId> absorbed_by;  // producer → the quantize node it absorbs
  for (size_t i = 0; i < forward.nodes.size(); ++i) {
    NodeId producer = graph::kNoNode;
    if (absorbable(forward, forward.nodes[i], attention, &producer)) absorbed_by.emplace(producer, static_cast<NodeId>(i));
  }
  if (absorbed_by.empty()) return forward;
  std::unordered_set<NodeId> skipped;  // the absorbed quantize nodes
  for (const auto& [producer, quantize] : absorbed_by) skipped.insert(quantize);

  graph::Graph rewritten = forward;
  rewritten.nodes.clear();
  for (graph::TensorInfo& info : rewritten.tensors) info.producer = graph::kNoNode;
  graph::GraphBuilder builder(registry, std::move(rewritten));
  graph::Graph& graph = builder.mutable_graph();
  for (size_t i = 0; i < forward.nodes.size(); ++i) {
    const NodeId id = static_cast<NodeId>(i);
    if (skipped.contains(id)) continue;
    auto found = absorbed_by.find(id);
    if (found == absorbed_by.end()) {
      graph.add_node(forward.nodes[i]);
      continue;
    }
    const graph::Node& quantize = forward.nodes[static_cast<size_t>(found->second)];
    graph::Node node = forward.nodes[i];
    node.op += "_fp8";
    node.inputs.push_back(quantize.inputs[1]);
    node.outputs.insert(node.outputs.end(), quantize.outputs.begin(), quantize.outputs.end());
    node.attrs["site"] = quantize.attrs.at("site");
    node.attrs["format"] = "e4m3";  // an input's codes
    graph.add_node(std::move(node));
  }
  return builder.finish();
}

namespace {

std::string unused_name(const graph::Graph& graph, const std::string& base) {
  std::string name = base;
  for (int suffix = 2; graph.find_tensor(name) || graph.find_tensor(name + ".scale_inv"); ++suffix) {
    name = base + "." + std::to_string(suffix);
  }
  return name;
}

// The FP8 products that quantize a gradient they read as d_out (input 0).
bool quantizes_gradient(const std::string& op) {
  return op == "linear_fp8_backward_input" || op == "linear_fp8_backward" || op == "linear_fp8_backward_accumulate";
}

// The weight-gradient products and where they read the input's codes.
int xq_input(const std::string& op) {
  if (op == "linear_fp8_backward" || op == "linear_fp8_backward_accumulate") return 1;
  if (op == "linear_fp8_backward_quantized" || op == "linear_fp8_backward_quantized_accumulate") return 3;
  return -1;
}

}  // namespace

graph::Graph share_fp8_input_transposes(graph::Graph training) {
  std::unordered_map<graph::TensorId, int> readers;  // input codes → weight-gradient products reading them
  for (const graph::Node& node : training.nodes) {
    const int xq = xq_input(node.op);
    if (xq >= 0 && !node.attrs.value("x_transposed", false)) ++readers[node.inputs[static_cast<size_t>(xq)]];
  }
  std::unordered_map<graph::TensorId, graph::TensorId> transposed;  // shared codes → their transpose
  std::unordered_map<size_t, graph::TensorId> first_reader;          // node index → the codes it transposes first
  for (size_t i = 0; i < training.nodes.size(); ++i) {
    graph::Node& node = training.nodes[i];
    const int xq = xq_input(node.op);
    if (xq < 0 || node.attrs.value("x_transposed", false)) continue;
    const graph::TensorId codes = node.inputs[static_cast<size_t>(xq)];
    if (readers[codes] < 2) continue;
    auto found = transposed.find(codes);
    if (found == transposed.end()) {
      const graph::TensorInfo info = training.tensor(codes);
      const int64_t columns = info.type.shape.back(), rows = info.type.numel() / columns;
      const graph::TensorId t = training.add_tensor(
          {unused_name(training, info.name + ".t"), {info.type.dtype, {columns, rows}}, graph::TensorRole::Activation});
      found = transposed.emplace(codes, t).first;
      first_reader.emplace(i, codes);
    }
    node.inputs[static_cast<size_t>(xq)] = found->second;
    node.attrs["x_transposed"] = true;
  }
  if (transposed.empty()) return training;
  std::vector<graph::Node> nodes = std::move(training.nodes);
  training.nodes.clear();
  for (graph::TensorInfo& info : training.tensors) info.producer = graph::kNoNode;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (auto found = first_reader.find(i); found != first_reader.end()) {
      const graph::TensorId t = transposed.at(found->second);
      graph::Node transpose{.name = training.tensor(t).name, .op = "transpose_fp8", .inputs = {found->second},
                            .outputs = {t}, .recompute_group = nodes[i].recompute_group, .phase = nodes[i].phase};
      training.add_node(std::move(transpose));
    }
    training.add_node(std::move(nodes[i]));
  }
  return training;
}

graph::Graph fuse_fp8_gradients(graph::Graph training) {
  // Each tensor's FP8-quantizing readers (as d_out), by node.
  std::unordered_map<graph::TensorId, std::vector<NodeId>> quantized_by;
  for (size_t i = 0; i < training.nodes.size(); ++i) {
    const graph::Node& node = training.nodes[i];
    if (quantizes_gradient(node.op)) quantized_by[node.inputs[0]].push_back(static_cast<NodeId>(i));
  }
  // The one FP8 product that quantizes `gradient`, or kNoNode.
  auto sole_reader = [&](graph::TensorId gradient) {
    auto found = quantized_by.find(gradient);
    return found == quantized_by.end() || found->second.size() != 1 ? graph::kNoNode : found->second[0];
  };
  // A reader's scaling state: linear_fp8_backward_input (d_out, w_t, w_scale_inv, state, ...),
  // linear_fp8_backward(_accumulate) (d_out, xq, x_scale_inv, w_t, w_scale_inv, state, ...).
  auto state_of = [&](NodeId reader) {
    const graph::Node& node = training.nodes[static_cast<size_t>(reader)];
    return node.inputs[node.op == "linear_fp8_backward_input" ? 3 : 5];
  };
  // Gives node `producer` the codes of its output `gradient` (two more outputs) and turns `reader`
  // into the product of them: linear_fp8_backward_input_quantized, or (a trained weight)
  // linear_fp8_backward_quantized(_accumulate).
  auto quantize_into_producer = [&](size_t producer, graph::TensorId gradient, NodeId reader_id, DType codes) {
    const graph::TensorInfo info = training.tensor(gradient);
    const std::string name = unused_name(training, info.name + ".fp8");
    const graph::TensorId q = training.add_tensor({name, {codes, info.type.shape}, info.role});
    const graph::TensorId scale = training.add_tensor({name + ".scale_inv", {DType::F32, {1}}, info.role});
    training.nodes[producer].outputs.push_back(q);
    training.nodes[producer].outputs.push_back(scale);
    training.tensor(q).producer = training.tensor(scale).producer = static_cast<NodeId>(producer);
    graph::Node& reader = training.nodes[static_cast<size_t>(reader_id)];
    const std::string format = reader.attrs.at("format").get<std::string>();
    const std::vector<graph::TensorId>& in = reader.inputs;
    std::vector<graph::TensorId> inputs;
    if (reader.op == "linear_fp8_backward_input") {
      // (d_out, w_t, w_scale_inv, state [, addend]) -> (d_out, d_q, d_scale_inv, w_t, w_scale_inv [, addend])
      inputs = {in[0], q, scale, in[1], in[2]};
      if (in.size() == 5) inputs.push_back(in[4]);
      reader.op = "linear_fp8_backward_input_quantized";
    } else {
      // (d_out, xq, x_scale_inv, w_t, w_scale_inv, state [, addend])
      //   -> (d_out, d_q, d_scale_inv, xq, x_scale_inv, w_t, w_scale_inv [, addend])
      inputs = {in[0], q, scale, in[1], in[2], in[3], in[4]};
      if (in.size() == 7) inputs.push_back(in[6]);
      reader.op = reader.op == "linear_fp8_backward" ? "linear_fp8_backward_quantized"
                                                     : "linear_fp8_backward_quantized_accumulate";
    }
    reader.inputs = std::move(inputs);
    reader.attrs = {{"format", format}};
  };
  auto codes_of = [](const std::string& format) { return format == "e4m3" ? DType::F8_E4M3 : DType::F8_E5M2; };
  for (size_t i = 0; i < training.nodes.size(); ++i) {
    const std::string op = training.nodes[i].op;
    if (op == "swiglu_backward") {
      const NodeId readers[2] = {sole_reader(training.nodes[i].outputs[0]), sole_reader(training.nodes[i].outputs[1])};
      if (readers[0] == graph::kNoNode || readers[1] == graph::kNoNode) continue;
      const graph::Node& gate_reader = training.nodes[static_cast<size_t>(readers[0])];
      const graph::Node& up_reader = training.nodes[static_cast<size_t>(readers[1])];
      const std::string format = gate_reader.attrs.at("format").get<std::string>();
      if (state_of(readers[0]) != state_of(readers[1]) || up_reader.attrs.at("format").get<std::string>() != format) {
        continue;
      }
      graph::Node& producer = training.nodes[i];
      producer.op = "swiglu_backward_fp8";
      producer.inputs.push_back(state_of(readers[0]));
      producer.attrs["gate_site"] = gate_reader.attrs.at("site");
      producer.attrs["up_site"] = up_reader.attrs.at("site");
      producer.attrs["format"] = format;
      const graph::TensorId gradients[2] = {producer.outputs[0], producer.outputs[1]};
      for (int k = 0; k < 2; ++k) quantize_into_producer(i, gradients[k], readers[k], codes_of(format));
    } else if (op == "fused_rmsnorm_rope_backward") {
      // Qwen3's q / k norm and RoPE (frozen or trained weight): its d_x is the q / k projection's
      // output gradient.
      const NodeId reader = sole_reader(training.nodes[i].outputs[0]);
      if (reader == graph::kNoNode) continue;
      const graph::Node& read = training.nodes[static_cast<size_t>(reader)];
      const std::string format = read.attrs.at("format").get<std::string>();
      graph::Node& producer = training.nodes[i];
      producer.op = "fused_rmsnorm_rope_backward_fp8";
      producer.inputs.push_back(state_of(reader));
      producer.attrs["site"] = read.attrs.at("site");
      producer.attrs["format"] = format;
      quantize_into_producer(i, producer.outputs[0], reader, codes_of(format));
    } else if (op == "fused_residual_rmsnorm_backward") {
      // A norm, frozen (d_input) or trained (d_input, d_weight): its d_input is the gradient of
      // the projection whose output joined the residual stream (o_proj, down_proj).
      const NodeId reader = sole_reader(training.nodes[i].outputs[0]);
      if (reader == graph::kNoNode) continue;
      const graph::Node& read = training.nodes[static_cast<size_t>(reader)];
      const std::string format = read.attrs.at("format").get<std::string>();
      graph::Node& producer = training.nodes[i];
      producer.op = "fused_residual_rmsnorm_backward_fp8";
      producer.inputs.push_back(state_of(reader));
      producer.attrs["site"] = read.attrs.at("site");
      producer.attrs["format"] = format;
      quantize_into_producer(i, producer.outputs[0], reader, codes_of(format));
    }
  }
  return share_fp8_input_transposes(std::move(training));
}

int64_t fp8_fused_producer_count(const graph::Graph& graph) {
  int64_t count = 0;
  for (const graph::Node& node : graph.nodes) {
    const bool forward = node.op.ends_with("_fp8") && fusable_producer(node.op.substr(0, node.op.size() - 4));
    count += forward || node.op == "swiglu_backward_fp8" || node.op == "fused_residual_rmsnorm_backward_fp8" ||
             node.op == "fused_rmsnorm_rope_backward_fp8";
  }
  return count;
}

}  // namespace surogate::models
