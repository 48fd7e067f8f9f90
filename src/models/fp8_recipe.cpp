// The fp8_hybrid rewrite; see fp8_recipe.h.
#include "models/fp8_recipe.h"

#include "models/model_spec.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "graph/builder.h"
#include "quant/fp8_scaling.h"

namespace surogate::models {
namespace {
using graph::TensorId;

constexpr const char* kLinear = "linear_fp8";

bool product_is_plain(const graph::Node& node) {
  if (node.op != "linear" && node.op != "linear_add") return false;
  return !node.attrs.contains("scale") || node.attrs.at("scale").get<double>() == 1.0;
}

// The layer index of "layers.<N>.…", or -1.
int64_t layer_of(const std::string& name) {
  if (!name.starts_with("layers.")) return -1;
  int64_t layer = -1;
  const char* begin = name.data() + 7;
  std::from_chars(begin, name.data() + name.size(), layer);
  return layer;
}

// The frozen 2-D "layers." parameters that plain linear / linear_add nodes read only as their
// weight, in layers the options quantize.
std::unordered_set<TensorId> quantized_weight_ids(const graph::Graph& forward, const Fp8Options& options) {
  std::unordered_map<TensorId, bool> only_weight;
  for (const graph::Node& node : forward.nodes) {
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorId input = node.inputs[i];
      const graph::TensorInfo& info = forward.tensor(input);
      if (info.role != graph::TensorRole::Parameter || info.trainable || info.type.shape.size() != 2 ||
          is_router_weight(info.name)) {
        continue;
      }
      const int64_t layer = layer_of(info.name);
      if (layer < options.skip_first_layers || layer >= options.layers - options.skip_last_layers) continue;
      auto [found, fresh] = only_weight.try_emplace(input, true);
      found->second = found->second && i == 1 && product_is_plain(node);
    }
  }
  std::unordered_set<TensorId> result;
  for (const auto& [id, ok] : only_weight) {
    if (ok) result.insert(id);
  }
  return result;
}

std::string format_name(quant::Fp8Format format) { return format == quant::Fp8Format::E4M3 ? "e4m3" : "e5m2"; }

}  // namespace

graph::Graph apply_fp8_recipe(const graph::Graph& forward, const graph::OpRegistry& registry, const Fp8Options& options) {
  if (options.amax_history < 0) fail_user("fp8_amax_history must not be negative, got {}", options.amax_history);
  const std::unordered_set<TensorId> weights = quantized_weight_ids(forward, options);
  graph::Graph rewritten = forward;
  rewritten.nodes.clear();
  for (graph::TensorInfo& info : rewritten.tensors) info.producer = graph::kNoNode;
  graph::GraphBuilder builder(registry, std::move(rewritten));
  graph::Graph& graph = builder.mutable_graph();
  if (weights.empty()) {
    for (const graph::Node& node : forward.nodes) graph.add_node(node);
    return builder.finish();
  }

  const bool stateful = options.amax_history > 0;
  // The state's shape is known once every site is counted; its tensor exists from the start.
  TensorId state = graph::kNoTensor;
  if (stateful) state = builder.parameter(kFp8ScalingState, DType::F32, {1, 2 + options.amax_history}, false);
  int64_t sites = 0;

  // Each weight's tensor becomes its E4M3 codes; the transpose and the scale are new parameters.
  struct Fp8Weight {
    TensorId codes, transposed, scale_inv;
  };
  std::unordered_map<TensorId, Fp8Weight> stored;
  for (TensorId id : forward.parameters) {
    if (!weights.contains(id)) continue;
    const std::string name = graph.tensor(id).name;
    const graph::Shape shape = graph.tensor(id).type.shape;
    graph.rename_tensor(id, name + ".fp8");
    graph.tensor(id).type.dtype = DType::F8_E4M3;
    Fp8Weight entry{id, builder.parameter(name + ".fp8_t", DType::F8_E4M3, {shape[1], shape[0]}, false),
                    builder.parameter(name + ".scale_inv", DType::F32, {1}, false)};
    stored.emplace(id, entry);
  }

  std::unordered_map<TensorId, std::pair<TensorId, TensorId>> quantized_inputs;  // x → (xq, scale_inv)
  for (const graph::Node& original : forward.nodes) {
    const bool converts = product_is_plain(original) && original.inputs.size() >= 2 && stored.contains(original.inputs[1]);
    if (!converts) {
      graph.add_node(original);
      continue;
    }
    const TensorId x = original.inputs[0];
    auto quantized = quantized_inputs.find(x);
    if (quantized == quantized_inputs.end()) {
      const graph::TensorInfo& info = graph.tensor(x);
      graph::Node node;
      node.name = info.name + ".fp8";
      node.op = "quantize_fp8";
      node.recompute_group = original.recompute_group;
      node.inputs = {x};
      node.attrs = {{"format", "e4m3"}};
      if (stateful) {
        node.inputs.push_back(state);
        node.attrs["site"] = sites++;
      }
      const graph::Shape shape = info.type.shape;
      const TensorId codes = graph.add_tensor({node.name, {DType::F8_E4M3, shape}, graph::TensorRole::Activation});
      const TensorId scale = graph.add_tensor({node.name + ".scale_inv", {DType::F32, {1}}, graph::TensorRole::Activation});
      node.outputs = {codes, scale};
      graph.add_node(std::move(node));
      quantized = quantized_inputs.emplace(x, std::make_pair(codes, scale)).first;
    }
    const Fp8Weight& weight = stored.at(original.inputs[1]);
    graph::Node node = original;
    node.op = kLinear;
    node.attrs = nlohmann::json::object();
    node.inputs = {x, quantized->second.first, quantized->second.second, weight.codes, weight.transposed, weight.scale_inv};
    if (original.inputs.size() == 3) {
      node.inputs.push_back(original.inputs[2]);
      node.attrs["extra"] = original.op == "linear_add" ? "addend" : "bias";
    }
    if (stateful) {
      node.inputs.push_back(state);
      node.attrs["grad_site"] = sites++;
      node.attrs["grad_format"] = format_name(options.gradient_format);
    }
    graph.add_node(std::move(node));
  }
  if (stateful) graph.tensor(state).type.shape = {sites, 2 + options.amax_history};
  return builder.finish();
}

std::vector<QuantizedWeight> fp8_weights(const graph::Graph& graph) {
  std::vector<QuantizedWeight> result;
  std::unordered_set<TensorId> seen;
  for (const graph::Node& node : graph.nodes) {
    if (node.op != kLinear || node.phase != graph::NodePhase::Forward) continue;
    if (!seen.insert(node.inputs[3]).second) continue;
    const graph::TensorInfo& codes = graph.tensor(node.inputs[3]);
    QuantizedWeight entry;
    entry.name = codes.name.substr(0, codes.name.size() - 4);  // without ".fp8"
    entry.shape = codes.type.shape;
    entry.format = WeightFormat::Fp8Tensor;
    for (size_t i = 3; i < 6; ++i) entry.pieces.push_back(graph.tensor(node.inputs[i]).name);
    result.push_back(std::move(entry));
  }
  return result;
}

std::optional<Fp8ScalingState> fp8_scaling_state(const graph::Graph& graph) {
  const std::optional<TensorId> id = graph.find_tensor(kFp8ScalingState);
  if (!id) return std::nullopt;
  const graph::Shape& shape = graph.tensor(*id).type.shape;
  return Fp8ScalingState{kFp8ScalingState, shape[0], shape[1] - quant::kFp8StateHeader};
}

}  // namespace surogate::models
