// The engine's answers to the Python DSL; see dsl_queries.h.
#include "models/dsl_queries.h"

#include <istream>
#include <ostream>
#include <vector>

#include "core/error.h"
#include "graph/json_ir.h"
#include "io/model_config.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "ops/rope.h"

namespace surogate::models {

const graph::OpRegistry& dsl_registry() {
  static const graph::OpRegistry instance = ops::make_model_registry();
  return instance;
}

nlohmann::json op_list() {
  nlohmann::json ops = nlohmann::json::array();
  for (const std::string& name : dsl_registry().names()) {
    const graph::OpDef& def = dsl_registry().get(name);
    ops.push_back({{"name", def.name}, {"inputs", def.inputs}, {"outputs", def.outputs},
                   {"variadic_inputs", def.variadic_inputs}, {"differentiable", static_cast<bool>(def.gradient)}});
  }
  return ops;
}

nlohmann::json infer_op(const std::string& op, const std::string& where, const nlohmann::json& inputs,
                        const nlohmann::json& attrs) {
  std::vector<graph::TensorType> types;
  for (const nlohmann::json& input : inputs) {
    const std::string dtype_name = input.at(0).get<std::string>();
    const auto dtype = dtype_from_safetensors_name(dtype_name);
    if (!dtype) fail_user("{}: unknown dtype '{}' (use the safetensors spelling: F32, BF16, I32, ...)", where, dtype_name);
    types.push_back({*dtype, input.at(1).get<graph::Shape>()});
  }
  nlohmann::json outputs = nlohmann::json::array();
  for (const graph::TensorType& type : dsl_registry().infer(op, where, types, attrs)) {
    outputs.push_back({std::string(dtype_safetensors_name(type.dtype)), type.shape});
  }
  return outputs;
}

nlohmann::json model_facts(const std::string& model_dir) {
  const io::ModelConfig config = io::load_model_config(model_dir);
  nlohmann::json facts{{"model_type", config.model_type},
                       {"architecture", config.architecture_class},
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

std::string verify_ir(const std::string& text) {
  return graph::graph_to_json(graph::graph_from_json(nlohmann::json::parse(text), dsl_registry())).dump();
}

nlohmann::json answer_dsl_query(const nlohmann::json& request) {
  try {
    const std::string query = request.value("query", "");
    const nlohmann::json args = request.value("args", nlohmann::json::array());
    if (query == "ops") return {{"result", op_list()}};
    if (query == "infer") return {{"result", infer_op(args.at(0), args.at(1), args.at(2), args.at(3))}};
    if (query == "model_facts") return {{"result", model_facts(args.at(0))}};
    if (query == "rope_attributes") return {{"result", rope_attributes(args.at(0), args.at(1).get<int64_t>())}};
    if (query == "parameter_table") return {{"result", parameter_table(args.at(0))}};
    if (query == "verify_ir") return {{"result", verify_ir(args.at(0))}};
    return {{"error", "unknown query '" + query + "'"}};
  } catch (const UserError& error) {
    return {{"error", error.what()}};
  } catch (const nlohmann::json::exception& error) {
    return {{"error", std::string("malformed request: ") + error.what()}};
  }
}

void serve_dsl_queries(std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json request = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    out << (request.is_discarded() ? nlohmann::json{{"error", "a request is one JSON object per line"}}
                                   : answer_dsl_query(request)).dump()
        << "\n" << std::flush;
  }
}

}  // namespace surogate::models
