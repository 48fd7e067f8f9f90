// What the Python DSL (python/surogate/dsl) learns from the engine instead of repeating it: the
// op registry (names, inputs, outputs) and each op's shape rule, the facts the engine reads from a
// model's config.json (io::ModelConfig, resolved: head_dim, per-layer sliding windows, RoPE), the
// RoPE frequencies the rope ops take as attributes, the parameter table with HF names, and the
// JSON IR import (the same verification `surogate eval --ir` and model_definition apply).
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "graph/json_ir.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "ops/rope.h"

namespace nb = nanobind;

namespace surogate::python {
namespace {

const graph::OpRegistry& registry() {
  static const graph::OpRegistry instance = ops::make_model_registry();
  return instance;
}

nlohmann::json op_list() {
  nlohmann::json ops = nlohmann::json::array();
  for (const std::string& name : registry().names()) {
    const graph::OpDef& def = registry().get(name);
    ops.push_back({{"name", def.name}, {"inputs", def.inputs}, {"outputs", def.outputs},
                   {"variadic_inputs", def.variadic_inputs}, {"differentiable", static_cast<bool>(def.gradient)}});
  }
  return ops;
}

// [[dtype, shape], ...] of the op's outputs for inputs [[dtype, shape], ...]; `where` names the
// node in a UserError.
nlohmann::json infer(const std::string& op, const std::string& where, const nlohmann::json& inputs,
                     const nlohmann::json& attrs) {
  std::vector<graph::TensorType> types;
  for (const nlohmann::json& input : inputs) {
    const std::string dtype_name = input.at(0).get<std::string>();
    const auto dtype = dtype_from_safetensors_name(dtype_name);
    if (!dtype) fail_user("{}: unknown dtype '{}' (use the safetensors spelling: F32, BF16, I32, ...)", where, dtype_name);
    types.push_back({*dtype, input.at(1).get<graph::Shape>()});
  }
  nlohmann::json outputs = nlohmann::json::array();
  for (const graph::TensorType& type : registry().infer(op, where, types, attrs)) {
    outputs.push_back({std::string(dtype_safetensors_name(type.dtype)), type.shape});
  }
  return outputs;
}

nlohmann::json model_facts(const std::string& model_dir) {
  const io::ModelConfig config = io::load_model_config(model_dir);
  nlohmann::json facts{{"model_type", std::string(io::architecture_model_type(config.architecture))},
                       {"vocab_size", config.vocab_size},
                       {"hidden_size", config.hidden_size},
                       {"intermediate_size", config.intermediate_size},
                       {"num_hidden_layers", config.num_hidden_layers},
                       {"num_attention_heads", config.num_attention_heads},
                       {"num_key_value_heads", config.num_key_value_heads},
                       {"head_dim", config.head_dim},
                       {"rms_norm_eps", config.rms_norm_eps},
                       {"max_position_embeddings", config.max_position_embeddings},
                       {"tie_word_embeddings", config.tie_word_embeddings},
                       {"qkv_bias", config.qkv_bias},
                       {"o_proj_bias", config.o_proj_bias},
                       {"mlp_bias", config.mlp_bias},
                       {"qk_norm", config.qk_norm},
                       {"hidden_act", config.hidden_act},
                       {"rope_type", std::string(io::rope_type_name(config.rope.type))}};
  std::vector<int64_t> windows;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const bool windowed = config.sliding_window && static_cast<size_t>(layer) < config.sliding_window_layers.size() &&
                          config.sliding_window_layers[static_cast<size_t>(layer)];
    windows.push_back(windowed ? *config.sliding_window : 0);
  }
  facts["sliding_window_per_layer"] = windows;  // 0: full attention
  facts["moe"] = nullptr;  // dense models
  if (config.moe) {
    const io::MoeConfig& moe = *config.moe;
    facts["moe"] = {{"experts", moe.experts},
                    {"experts_per_token", moe.experts_per_token},
                    {"expert_intermediate_size", moe.expert_intermediate_size},
                    {"normalize_top_k", moe.normalize_top_k},
                    {"shared_expert_intermediate_size", moe.shared_expert_intermediate_size},
                    {"sparse_layers", moe.sparse_layers},
                    {"output_router_logits", moe.output_router_logits},
                    {"router_aux_loss_coef", moe.router_aux_loss_coef}};
  }
  return facts;
}

// The attrs the rope ops take: inverse frequencies (float, widened) and the attention scaling.
nlohmann::json rope_attributes(const std::string& model_dir, int64_t sequence) {
  const io::ModelConfig config = io::load_model_config(model_dir);
  const ops::RopeFrequencies<float> frequencies = ops::rope_frequencies<float>(config.rope, sequence);
  return {{"inv_freq", std::vector<double>(frequencies.inverse_frequency.begin(), frequencies.inverse_frequency.end())},
          {"attention_scaling", frequencies.attention_scaling}};
}

nlohmann::json parameter_table(const std::string& model_dir) {
  nlohmann::json table = nlohmann::json::array();
  for (const models::ParameterSpec& spec : models::parameter_specs(io::load_model_config(model_dir))) {
    table.push_back({{"name", spec.name}, {"hf_name", spec.hf_name}, {"shape", spec.shape}});
  }
  return table;
}

}  // namespace

void bind_graph(nb::module_& module) {
  module.def("ops", [] { return to_python(op_list()); }, "Every registered op: name, inputs, outputs.");
  module.def(
      "infer",
      [](const std::string& op, const std::string& where, nb::handle inputs, nb::handle attrs) {
        return to_python(infer(op, where, from_python(inputs), from_python(attrs)));
      },
      "Output [dtype, shape] pairs of an op for input [dtype, shape] pairs and attrs (its shape rule).");
  module.def("model_facts", [](const std::string& model_dir) { return to_python(model_facts(model_dir)); });
  module.def("rope_attributes", [](const std::string& model_dir, int64_t sequence) {
    return to_python(rope_attributes(model_dir, sequence));
  });
  module.def("parameter_table", [](const std::string& model_dir) { return to_python(parameter_table(model_dir)); });
  module.def(
      "verify_ir",
      [](const std::string& text) {
        return graph::graph_to_json(graph::graph_from_json(nlohmann::json::parse(text), registry())).dump();
      },
      "Imports JSON IR text as the engine does (structure, then verify_graph) and returns it re-exported.");
  module.def(
      "builtin_ir",
      [](const std::string& model_dir, int64_t batch, int64_t sequence, int64_t lmhead_chunks) {
        const io::ModelConfig config = io::load_model_config(model_dir);
        return graph::graph_to_json(
                   models::build_decoder_graph(config, registry(), {batch, sequence, lmhead_chunks, false}).graph)
            .dump();
      },
      "The built-in builder's graph as JSON IR text (what `surogate ir` prints).");
}

}  // namespace surogate::python
