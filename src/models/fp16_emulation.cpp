// The fp16 emulation rewrite; see fp16_emulation.h.
#include "models/fp16_emulation.h"

#include <unordered_map>

namespace surogate::models {
namespace {
using graph::TensorId;

constexpr const char* kRoundFp16 = "round_fp16";

}  // namespace

std::set<std::string> sixteen_bit_tensors(const graph::Graph& twin) {
  std::set<std::string> names;
  for (const graph::TensorInfo& info : twin.tensors) {
    if (info.type.dtype == DType::BF16 || info.type.dtype == DType::F16) names.insert(info.name);
  }
  return names;
}

graph::Graph apply_fp16_emulation(const graph::Graph& forward, const std::set<std::string>& sixteen_bit) {
  graph::Graph rewritten = forward;
  rewritten.nodes.clear();
  for (graph::TensorInfo& info : rewritten.tensors) info.producer = graph::kNoNode;
  std::unordered_map<TensorId, TensorId> rounded;  // tensor → its fp16-rounded copy
  auto round = [&](TensorId id, const std::string& group) {
    graph::TensorInfo copy = rewritten.tensor(id);
    copy.name += ".fp16";
    copy.role = graph::TensorRole::Activation;
    copy.trainable = false;
    copy.producer = graph::kNoNode;
    const TensorId out = rewritten.add_tensor(copy);
    graph::Node node;
    node.name = copy.name;
    node.op = kRoundFp16;
    node.inputs = {id};
    node.outputs = {out};
    node.recompute_group = group;
    rewritten.add_node(std::move(node));
    rounded.emplace(id, out);
    return out;
  };
  auto is_sixteen_bit = [&](TensorId id) {
    const graph::TensorInfo& info = forward.tensor(id);
    return dtype_is_floating(info.type.dtype) && sixteen_bit.contains(info.name);
  };
  for (const graph::Node& original : forward.nodes) {
    graph::Node node = original;
    for (TensorId& input : node.inputs) {
      if (auto found = rounded.find(input); found != rounded.end()) {
        input = found->second;
      } else if (forward.tensor(input).role == graph::TensorRole::Parameter && is_sixteen_bit(input)) {
        input = round(input, "");  // the compute copy, kept through the backward like the weight
      }
    }
    const std::vector<TensorId> outputs = node.outputs;
    const std::string group = node.recompute_group;
    rewritten.add_node(std::move(node));
    for (TensorId output : outputs) {
      if (is_sixteen_bit(output)) round(output, group);
    }
  }
  return rewritten;
}

}  // namespace surogate::models
