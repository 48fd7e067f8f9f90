// The fp8_hybrid rewrite; see fp8_recipe.h.
#include "models/fp8_recipe.h"

#include "models/fp8_fusion.h"

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

// Where a weight the recipe quantizes comes from.
enum class WeightSource {
  Frozen,       // a frozen parameter (the LoRA base): stored only in FP8, quantized once at load
  Trained,      // a trainable parameter (full fine-tuning, pt): kept, with an FP8 copy per step
  Dequantized,  // computed by a QLoRA dequantization node: quantized per micro-batch
};

bool is_dequantization(const graph::Graph& graph, TensorId id) {
  const graph::NodeId producer = graph.tensor(id).producer;
  return producer != graph::kNoNode && graph.nodes[static_cast<size_t>(producer)].op.starts_with("dequantize_");
}

// The 2-D "layers." weights (parameters, or QLoRA's dequantized base) that plain linear /
// linear_add nodes read only as their weight, in layers the options quantize.
std::unordered_map<TensorId, WeightSource> quantized_weight_ids(const graph::Graph& forward, const Fp8Options& options) {
  std::unordered_map<TensorId, std::pair<WeightSource, bool>> candidates;  // source, read only as a weight
  for (const graph::Node& node : forward.nodes) {
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorId input = node.inputs[i];
      const graph::TensorInfo& info = forward.tensor(input);
      if (info.type.shape.size() != 2 || is_router_weight(info.name)) continue;  // MoE routers stay
      WeightSource source;
      if (info.role == graph::TensorRole::Parameter && info.trainable && !options.trained_weights) continue;
      if (info.role == graph::TensorRole::Parameter) source = info.trainable ? WeightSource::Trained : WeightSource::Frozen;
      else if (info.role == graph::TensorRole::Activation && is_dequantization(forward, input)) source = WeightSource::Dequantized;
      else continue;
      const int64_t layer = layer_of(info.name);
      if (layer < options.skip_first_layers || layer >= options.layers - options.skip_last_layers) continue;
      auto [found, fresh] = candidates.try_emplace(input, source, true);
      found->second.second = found->second.second && i == 1 && product_is_plain(node);
    }
  }
  std::unordered_map<TensorId, WeightSource> result;
  for (const auto& [id, candidate] : candidates) {
    if (candidate.second) result.emplace(id, candidate.first);
  }
  return result;
}

std::string format_name(quant::Fp8Format format) { return format == quant::Fp8Format::E4M3 ? "e4m3" : "e5m2"; }

}  // namespace

graph::Graph apply_fp8_recipe(const graph::Graph& forward, const graph::OpRegistry& registry, const Fp8Options& options) {
  if (options.amax_history < 0) fail_user("fp8_amax_history must not be negative, got {}", options.amax_history);
  const std::unordered_map<TensorId, WeightSource> weights = quantized_weight_ids(forward, options);
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

  // A frozen weight's tensor becomes its E4M3 codes, the transpose and the scale new frozen
  // parameters; a trained weight keeps its tensor and gets all three as new frozen parameters (its
  // FP8 copy, which the training device rewrites after each optimizer step); a dequantized weight
  // gets them as the outputs of a quantize_fp8_weight node right after its dequantization.
  struct Fp8Weight {
    TensorId codes = graph::kNoTensor, transposed = graph::kNoTensor, scale_inv = graph::kNoTensor;
    TensorId trained = graph::kNoTensor;  // the trained weight itself (Trained only)
  };
  std::unordered_map<TensorId, Fp8Weight> stored;
  for (TensorId id : forward.parameters) {
    auto source = weights.find(id);
    if (source == weights.end()) continue;
    const std::string name = graph.tensor(id).name;
    const graph::Shape shape = graph.tensor(id).type.shape;
    Fp8Weight entry;
    if (source->second == WeightSource::Frozen) {
      graph.rename_tensor(id, name + ".fp8");
      graph.tensor(id).type.dtype = DType::F8_E4M3;
      entry.codes = id;
    } else {
      entry.codes = builder.parameter(name + ".fp8", DType::F8_E4M3, shape, false);
      entry.trained = id;
    }
    entry.transposed = builder.parameter(name + ".fp8_t", DType::F8_E4M3, {shape[1], shape[0]}, false);
    entry.scale_inv = builder.parameter(name + ".scale_inv", DType::F32, {1}, false);
    stored.emplace(id, entry);
  }

  std::unordered_map<TensorId, std::pair<TensorId, TensorId>> quantized_inputs;  // x → (xq, scale_inv)
  for (const graph::Node& original : forward.nodes) {
    const bool converts = product_is_plain(original) && original.inputs.size() >= 2 && stored.contains(original.inputs[1]);
    if (!converts) {
      graph.add_node(original);
      for (TensorId output : original.outputs) {
        auto source = weights.find(output);
        if (source == weights.end() || source->second != WeightSource::Dequantized) continue;
        const graph::TensorInfo& info = graph.tensor(output);
        const std::string name = info.name + ".e4m3";
        const graph::Shape shape = info.type.shape;
        graph::Node node;
        node.name = name;
        node.op = "quantize_fp8_weight";
        node.recompute_group = original.recompute_group;
        node.inputs = {output};
        Fp8Weight entry;
        entry.codes = graph.add_tensor({name, {DType::F8_E4M3, shape}, graph::TensorRole::Activation});
        entry.transposed = graph.add_tensor({name + "_t", {DType::F8_E4M3, {shape[1], shape[0]}}, graph::TensorRole::Activation});
        entry.scale_inv = graph.add_tensor({name + ".scale_inv", {DType::F32, {1}}, graph::TensorRole::Activation});
        node.outputs = {entry.codes, entry.transposed, entry.scale_inv};
        graph.add_node(std::move(node));
        stored.emplace(output, entry);
      }
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
    if (weight.trained != graph::kNoTensor) {
      node.inputs.push_back(weight.trained);
      node.attrs["trained_weight"] = true;
    }
    graph.add_node(std::move(node));
  }
  if (stateful) graph.tensor(state).type.shape = {sites, 2 + options.amax_history};
  graph::Graph result = builder.finish();
  return stateful && options.fuse_producers ? fuse_fp8_producers(result, registry, options.fuse_attention) : result;
}

namespace {

bool trains_its_weight(const graph::Node& node) {
  return node.attrs.contains("trained_weight") && node.attrs.at("trained_weight").get<bool>();
}

// The forward linear_fp8 nodes, each weight's first one.
std::vector<const graph::Node*> fp8_products(const graph::Graph& graph) {
  std::vector<const graph::Node*> result;
  std::unordered_set<TensorId> seen;
  for (const graph::Node& node : graph.nodes) {
    if (node.op != kLinear || node.phase != graph::NodePhase::Forward) continue;
    if (seen.insert(node.inputs[3]).second) result.push_back(&node);
  }
  return result;
}

}  // namespace

std::vector<QuantizedWeight> fp8_weights(const graph::Graph& graph) {
  std::vector<QuantizedWeight> result;
  for (const graph::Node* node : fp8_products(graph)) {
    const graph::TensorInfo& codes = graph.tensor(node->inputs[3]);
    if (codes.role != graph::TensorRole::Parameter || trains_its_weight(*node)) continue;
    QuantizedWeight entry;
    entry.name = codes.name.substr(0, codes.name.size() - 4);  // without ".fp8"
    entry.shape = codes.type.shape;
    entry.format = WeightFormat::Fp8Tensor;
    for (size_t i = 3; i < 6; ++i) entry.pieces.push_back(graph.tensor(node->inputs[i]).name);
    result.push_back(std::move(entry));
  }
  return result;
}

std::vector<Fp8TrainedWeight> fp8_trained_weights(const graph::Graph& graph) {
  std::vector<Fp8TrainedWeight> result;
  for (const graph::Node* node : fp8_products(graph)) {
    if (!trains_its_weight(*node)) continue;
    result.push_back({graph.tensor(node->inputs.back()).name, graph.tensor(node->inputs[3]).name,
                      graph.tensor(node->inputs[4]).name, graph.tensor(node->inputs[5]).name});
  }
  return result;
}

int64_t fp8_projection_count(const graph::Graph& graph) {
  int64_t count = 0;
  for (const graph::Node& node : graph.nodes) count += node.op == kLinear && node.phase == graph::NodePhase::Forward;
  return count;
}

std::optional<Fp8ScalingState> fp8_scaling_state(const graph::Graph& graph) {
  const std::optional<TensorId> id = graph.find_tensor(kFp8ScalingState);
  if (!id) return std::nullopt;
  const graph::Shape& shape = graph.tensor(*id).type.shape;
  return Fp8ScalingState{kFp8ScalingState, shape[0], shape[1] - quant::kFp8StateHeader};
}

}  // namespace surogate::models
