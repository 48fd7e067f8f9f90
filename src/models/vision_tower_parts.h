// What the Qwen2.5-VL and Qwen3-VL towers (vision_tower.cpp, qwen3_vision_tower.cpp) and their
// config readers share: the parameters by checkpoint name, a linear with bias, and the
// vision_config object of config.json with its common checks.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "graph/builder.h"
#include "io/json_fields.h"

namespace surogate::models::vision_parts {

struct TowerParameters {
  std::map<std::string, graph::TensorId> ids;
  graph::TensorId get(const std::string& name) const { return ids.at(name); }
};

// linear(x, prefix.weight, prefix.bias).
inline graph::TensorId biased_linear(graph::GraphBuilder& b, const TowerParameters& p, graph::TensorId x,
                                     const std::string& prefix, const std::string& label) {
  return b.op("linear", {x, p.get(prefix + ".weight"), p.get(prefix + ".bias")}, nlohmann::json::object(), label);
}

// A vision block's attention half: hidden + proj(attention(rope(q), rope(k), v)) over `normed`,
// q / k / v from the biased qkv linear of `prefix` (visual.blocks.N), bidirectional within
// `documents` (windows or frames), the 2-D rotary tables cos / sin.
inline graph::TensorId vision_attention_residual(graph::GraphBuilder& b, const TowerParameters& p,
                                                 graph::TensorId hidden, graph::TensorId normed,
                                                 const std::string& prefix, graph::TensorId cos, graph::TensorId sin,
                                                 graph::TensorId documents, int64_t hidden_size, int64_t heads) {
  const int64_t head_dim = hidden_size / heads;
  graph::OpOutputs pieces = b.op("split", {biased_linear(b, p, normed, prefix + ".attn.qkv", "qkv")},
                                 {{"axis", -1}, {"sizes", {hidden_size, hidden_size, hidden_size}}}, "qkv_split");
  const nlohmann::json rope_attrs{{"heads", heads}, {"head_dim", head_dim}};
  const graph::TensorId q = b.op("rope", {pieces[0], cos, sin}, rope_attrs, "q_rope");
  const graph::TensorId k = b.op("rope", {pieces[1], cos, sin}, rope_attrs, "k_rope");
  const nlohmann::json attention_attrs{
      {"query_heads", heads}, {"kv_heads", heads}, {"head_dim", head_dim}, {"causal", false}};
  const graph::TensorId context = b.op("attention", {q, k, pieces[2], documents}, attention_attrs, "attention");
  return b.op("add", {hidden, biased_linear(b, p, context, prefix + ".attn.proj", "proj")}, nlohmann::json::object(),
              "attention_residual");
}

// The 2-D rotary tables (cos, sin) of the (frame, row, column) positions: mrope_cos_sin with
// inv_freq = [f, f] and mrope_section [0, head_dim / 4, head_dim / 4] (vision/patch_positions.h).
graph::OpOutputs vision_rope_tables(graph::GraphBuilder& b, graph::TensorId position_ids, int64_t head_dim,
                                    double rope_theta, DType dtype);

// config.json's vision_config object; a missing file, bad JSON or no vision_config is a UserError
// naming the file.
nlohmann::json read_vision_config(const std::filesystem::path& config_json);

// A head_dim that is not whole or not a multiple of 4 (the 2-D rotary embedding's quarters) is a
// UserError naming num_heads.
void require_rotary_heads(const io::JsonFields& fields, int64_t hidden_size, int64_t num_heads);

// vision_config.rope_parameters' rope_theta (rope_type axial or default), else `fallback`.
double vision_rope_theta(const nlohmann::json& vision, const std::filesystem::path& config_json, double fallback);

}  // namespace surogate::models::vision_parts
