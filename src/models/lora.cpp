// The LoRA graph rewrite; see lora.h.
#include "models/lora.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "graph/builder.h"

namespace surogate::models {
namespace {

bool is_matrix(const ParameterSpec& spec) { return spec.shape.size() == (spec.experts > 0 ? 3u : 2u); }

// F32 / F64 graphs (the CPU backend, gradient checks) keep the adapter as separate product, scale
// and add nodes.
bool is_full_precision(DType dtype) { return dtype == DType::F32 || dtype == DType::F64; }

// What an adapter's input dropout needs (lora.h): the seed input, the rate and the stream.
struct DroppedInput {
  graph::TensorId seed;
  double p;
  int64_t stream;
};

// The adapter of an expert_linear node (lora.h): product through the stacked A and B over the same
// expert rows, scaled and added to the base output, which `replaced` maps to the sum.
void add_expert_adapter(graph::GraphBuilder& builder, const graph::Node& node, graph::TensorId a, graph::TensorId b,
                        double scaling, const std::optional<DroppedInput>& dropout,
                        std::map<std::pair<graph::TensorId, std::string>, graph::TensorId>& dropped_inputs,
                        std::unordered_map<graph::TensorId, graph::TensorId>& replaced) {
  builder.mutable_graph().add_node(node);
  auto scope = builder.scope(node.name);
  auto group = builder.recompute_group(node.recompute_group);
  graph::TensorId x = node.inputs[0];
  const graph::TensorId offsets = node.inputs[2];
  if (dropout) {
    auto [found, fresh] = dropped_inputs.try_emplace({x, node.recompute_group}, graph::kNoTensor);
    if (fresh) {
      found->second = builder.op("dropout", {x, dropout->seed}, {{"p", dropout->p}, {"stream", dropout->stream}},
                                 "lora_dropout");
    }
    x = found->second;
  }
  const nlohmann::json none = nlohmann::json::object();
  const graph::TensorId down = builder.op("expert_linear", {x, a, offsets}, none, "lora_a");
  const graph::TensorId up = builder.op("expert_linear", {down, b, offsets}, none, "lora_b");
  const graph::TensorId scaled = builder.op("scale", {up}, {{"factor", scaling}}, "lora_scale");
  replaced[node.outputs[0]] = builder.op("add", {node.outputs[0], scaled}, none, "lora_out");
}

}  // namespace

std::string peft_key(const std::string& base_hf_name, char which) {
  std::string stem = base_hf_name.ends_with(".weight") ? base_hf_name.substr(0, base_hf_name.size() - 7) : base_hf_name;
  return "base_model.model." + stem + ".lora_" + which + ".weight";
}

std::string peft_module_name(const ParameterSpec& spec) {
  if (!spec.name.starts_with("layers.") || !spec.hf_name.ends_with(".weight") || !is_matrix(spec)) return "";
  const std::string stem = spec.hf_name.substr(0, spec.hf_name.size() - 7);
  return stem.substr(stem.rfind('.') + 1);
}

std::vector<std::string> lora_module_names(const io::ModelConfig& config) {
  std::vector<std::string> names;
  for (const ParameterSpec& spec : parameter_specs(config)) {
    const std::string module = peft_module_name(spec);
    if (!module.empty() && std::find(names.begin(), names.end(), module) == names.end()) names.push_back(module);
  }
  return names;
}

std::vector<LoraAdapter> lora_adapters(const io::ModelConfig& config, const LoraOptions& options) {
  if (options.rank <= 0) fail_user("lora_rank must be positive, got {}", options.rank);
  std::vector<LoraAdapter> adapters;
  std::map<std::string, int> matched;
  for (const std::string& module : options.target_modules) matched[module] = 0;
  for (const ParameterSpec& spec : parameter_specs(config)) {
    const std::string module = peft_module_name(spec);
    if (module.empty() || !matched.contains(module)) continue;
    ++matched[module];
    const std::string stem = spec.name.substr(0, spec.name.size() - 7);
    LoraAdapter adapter;
    adapter.base = spec;
    const int64_t out = spec.shape[spec.shape.size() - 2], in = spec.shape.back();
    graph::Shape a_shape{options.rank, in}, b_shape{out, options.rank};
    if (spec.experts > 0) {  // one adapter per expert, stacked like the experts
      a_shape.insert(a_shape.begin(), spec.experts);
      b_shape.insert(b_shape.begin(), spec.experts);
    }
    adapter.a = {stem + ".lora_A.weight", peft_key(spec.hf_name, 'A'), a_shape};
    adapter.b = {stem + ".lora_B.weight", peft_key(spec.hf_name, 'B'), b_shape};
    adapter.a.experts = adapter.b.experts = spec.experts;
    adapters.push_back(std::move(adapter));
  }
  for (const auto& [module, count] : matched) {
    if (count == 0) fail_user("lora_target_modules: the model has no projection named '{}'", module);
  }
  return adapters;
}

graph::Graph apply_lora(const graph::Graph& forward, const graph::OpRegistry& registry,
                        const std::vector<LoraAdapter>& adapters, const LoraOptions& options, bool training) {
  using graph::TensorId;
  graph::Graph rewritten = forward;
  rewritten.nodes.clear();
  for (graph::TensorInfo& info : rewritten.tensors) {
    info.producer = graph::kNoNode;
    info.trainable = false;  // the base model is frozen
  }
  graph::GraphBuilder builder(registry, std::move(rewritten));
  const bool dropout = training && options.dropout > 0.0;
  const TensorId seed = dropout ? builder.input(kDropoutSeed, DType::I32, {}) : graph::kNoTensor;

  struct Pair {
    TensorId a, b;
  };
  std::unordered_map<TensorId, Pair> by_base;
  for (const LoraAdapter& adapter : adapters) {
    TensorId base = forward.require_tensor(adapter.base.name);
    // The adapters take the base weight's dtype: F32 in CPU graphs, BF16 in the CUDA backend's
    // BF16 graphs (every op of the rewrite then runs in one dtype).
    const DType dtype = forward.tensor(base).type.dtype;
    by_base[base] = {builder.parameter(adapter.a.name, dtype, adapter.a.shape, true),
                     builder.parameter(adapter.b.name, dtype, adapter.b.shape, true)};
  }

  // Adapted projections that share their input and recompute group, in node order, when their
  // low-rank products are batched (see lora.h); keyed by the first one's node index.
  std::map<size_t, std::vector<size_t>> shared_input_groups;
  if (options.batch_shared_inputs) {
    std::map<std::pair<TensorId, std::string>, std::vector<size_t>> by_input;
    for (size_t n = 0; n < forward.nodes.size(); ++n) {
      const graph::Node& node = forward.nodes[n];
      if (node.op == "linear" && node.inputs.size() >= 2 && by_base.contains(node.inputs[1])) {
        by_input[{node.inputs[0], node.recompute_group}].push_back(n);
      }
    }
    for (auto& [key, members] : by_input) {
      if (members.size() >= 2) shared_input_groups[members.front()] = std::move(members);
    }
  }
  std::unordered_map<TensorId, TensorId> batched_down;  // base weight → its piece of a shared x·Aᵀ
  // Forward-only graphs with fuse_inference_products: base weight → its adapter's low_rank_products output.
  const bool fused_products = options.fuse_inference_products && !training;
  std::unordered_map<TensorId, TensorId> fused_up;
  // Adapter input → its dropped copy: the adapters that read one input (q/k/v, gate/up) share one
  // mask, drawn once (and the low-rank products stay batchable); see lora.h.
  std::map<std::pair<TensorId, std::string>, TensorId> dropped_inputs;

  const double scaling = lora_scaling(options);
  std::unordered_map<TensorId, TensorId> replaced;  // base linear output → output with the adapter added
  int64_t stream = 0;
  size_t adapted = 0;
  for (size_t n = 0; n < forward.nodes.size(); ++n) {
    graph::Node node = forward.nodes[n];
    for (TensorId& input : node.inputs) {
      if (auto found = replaced.find(input); found != replaced.end()) input = found->second;
    }
    const bool experts = node.op == "expert_linear";
    auto adapter = (node.op == "linear" || experts) && node.inputs.size() >= 2 ? by_base.find(node.inputs[1]) : by_base.end();
    if (adapter == by_base.end()) {
      builder.mutable_graph().add_node(node);
      continue;
    }
    ++adapted;
    if (experts) {
      add_expert_adapter(builder, node, adapter->second.a, adapter->second.b, lora_scaling(options),
                         dropout ? std::optional<DroppedInput>(DroppedInput{seed, options.dropout, stream}) : std::nullopt,
                         dropped_inputs, replaced);
      ++stream;
      continue;
    }
    // Low-precision graphs without a bias: the base product comes last, with the adapter's output
    // as its addend (below); every other form keeps the base node first.
    const bool addend_into_base =
        node.inputs.size() == 2 && !is_full_precision(forward.tensor(node.inputs[1]).type.dtype);
    if (!addend_into_base) builder.mutable_graph().add_node(node);
    auto scope = builder.scope(node.name);
    auto group = builder.recompute_group(node.recompute_group);
    TensorId x = node.inputs[0];
    if (dropout) {
      auto [found, fresh] = dropped_inputs.try_emplace({x, node.recompute_group}, graph::kNoTensor);
      if (fresh) {
        found->second = builder.op("dropout", {x, seed}, {{"p", options.dropout}, {"stream", stream}}, "lora_dropout");
      }
      x = found->second;
    }
    ++stream;
    if (fused_products && addend_into_base) {
      // Forward-only graphs: the adapter's products (of every member of its shared-input group,
      // when each of them takes the addend form) as one low_rank_products node at its first member.
      if (!fused_up.contains(node.inputs[1])) {
        std::vector<size_t> members{n};
        if (auto shared = shared_input_groups.find(n); shared != shared_input_groups.end()) {
          const bool all_addends = std::all_of(shared->second.begin(), shared->second.end(), [&](size_t member) {
            return forward.nodes[member].inputs.size() == 2;
          });
          if (all_addends) members = shared->second;
        }
        std::vector<TensorId> factors{x};
        for (size_t member : members) factors.push_back(by_base.at(forward.nodes[member].inputs[1]).a);
        for (size_t member : members) factors.push_back(by_base.at(forward.nodes[member].inputs[1]).b);
        graph::OpOutputs ups = builder.op("low_rank_products", factors, {{"scale", scaling}}, "lora_products");
        for (size_t i = 0; i < members.size(); ++i) fused_up[forward.nodes[members[i]].inputs[1]] = ups[i];
      }
      graph::Node base = node;
      base.op = "linear_add";
      base.inputs.push_back(fused_up.at(node.inputs[1]));
      builder.mutable_graph().add_node(base);
      continue;
    }
    if (auto shared = shared_input_groups.find(n); shared != shared_input_groups.end()) {
      std::vector<TensorId> a_matrices;
      std::vector<int64_t> ranks;
      for (size_t member : shared->second) {
        a_matrices.push_back(by_base.at(forward.nodes[member].inputs[1]).a);
        ranks.push_back(builder.type(a_matrices.back()).shape[0]);
      }
      TensorId a_cat = builder.op("concat", a_matrices, {{"axis", 0}}, "lora_a_cat");
      TensorId down_shared = builder.op("linear", {x, a_cat}, nlohmann::json::object(), "lora_a_shared");
      graph::OpOutputs pieces = builder.op("split", {down_shared}, {{"axis", -1}, {"sizes", ranks}}, "lora_a_part");
      for (size_t i = 0; i < shared->second.size(); ++i) {
        batched_down[forward.nodes[shared->second[i]].inputs[1]] = pieces[i];
      }
    }
    auto batched = batched_down.find(node.inputs[1]);
    TensorId down = batched != batched_down.end()
                        ? batched->second
                        : builder.op("linear", {x, adapter->second.a}, nlohmann::json::object(), "lora_a");
    if (is_full_precision(builder.type(down).dtype)) {
      TensorId up = builder.op("linear", {down, adapter->second.b}, nlohmann::json::object(), "lora_b");
      TensorId scaled = builder.op("scale", {up}, {{"factor", scaling}}, "lora_scale");
      replaced[node.outputs[0]] = builder.op("add", {node.outputs[0], scaled}, nlohmann::json::object(), "lora_out");
      continue;
    }
    // Low-precision (GPU) graphs: the scaling is the B product's factor (cuBLASLt's alpha).
    nlohmann::json attrs{{"scale", scaling}};
    if (options.fuse_low_rank_backward) attrs["fused_backward"] = true;
    if (addend_into_base) {
      // lora_b = scaling·u·Bᵀ (only written), then the base node becomes linear_add(x, W, lora_b)
      // with its own name and output: the base matmul reads the adapter output as its C in the
      // epilogue, where a compute-bound product hides it, instead of a separate pass that reads
      // the base output and writes the sum. Its gradient to lora_b is d_out itself.
      TensorId up = builder.op("linear", {down, adapter->second.b}, attrs, "lora_b");
      graph::Node base = node;
      base.op = "linear_add";
      base.inputs.push_back(up);
      builder.mutable_graph().add_node(base);
    } else {
      // With a bias the B product takes the base output as its addend instead (one matmul,
      // alpha = scaling, beta = 1).
      replaced[node.outputs[0]] =
          builder.op("linear_add", {down, adapter->second.b, node.outputs[0]}, attrs, "lora_out");
    }
  }
  SUROGATE_CHECK(adapted == adapters.size(), "every LoRA target is the weight of exactly one linear node ({} of {})",
                 adapted, adapters.size());
  for (TensorId& output : builder.mutable_graph().outputs) {
    if (auto found = replaced.find(output); found != replaced.end()) output = found->second;
  }
  return builder.finish();
}

}  // namespace surogate::models
