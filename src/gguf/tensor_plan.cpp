#include "gguf/tensor_plan.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::gguf {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }
bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The dimension count ggml sees: trailing 1s do not count.
size_t ggml_dimension_count(const std::vector<int64_t>& dims) {
  size_t count = dims.size();
  while (count > 1 && dims[count - 1] == 1) --count;
  return count;
}

int64_t layer_of(std::string_view gguf_name) {
  if (!gguf_name.starts_with("blk.")) return -1;
  return std::stoll(std::string(gguf_name.substr(4, gguf_name.find('.', 4) - 4)));
}

// convert_hf_to_gguf.py's choice for --outtype f16 / bf16 / q8_0.
GgmlType converter_type(const std::string& name, const std::vector<int64_t>& dims, ExportType type) {
  const bool forced_f32 = dims.size() <= 1 || ends_with(name, "_norm.weight") || !ends_with(name, ".weight") ||
                          contains(name, "ffn_gate_inp.weight") || contains(name, "ffn_gate_inp_shexp.weight");
  if (forced_f32) return GgmlType::F32;
  switch (type) {
    case ExportType::F16: return GgmlType::F16;
    case ExportType::BF16: return GgmlType::BF16;
    case ExportType::Q8_0: return dims[0] % 32 == 0 ? GgmlType::Q8_0 : GgmlType::F16;
    case ExportType::Q4_K_M: break;
  }
  SUROGATE_CHECK(false, "converter_type called for q4_k_m");
  return GgmlType::F32;
}

GgmlType shape_fallback(GgmlType chosen, int64_t row) {
  if (row % block_elements(chosen) == 0) return chosen;
  GgmlType fallback = chosen;
  switch (chosen) {
    case GgmlType::Q4_K: fallback = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: fallback = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: fallback = GgmlType::Q8_0; break;
    default: break;
  }
  return row % block_elements(fallback) == 0 ? fallback : GgmlType::F16;
}

// llama-quantize's llama_tensor_get_type for LLAMA_FTYPE_MOSTLY_Q4_K_M without an importance
// matrix or overrides.
GgmlType q4_k_m_type(const ModelFacts& facts, const std::string& name, const std::vector<int64_t>& dims,
                     bool has_output) {
  const bool quantizable = ggml_dimension_count(dims) >= 2 && ends_with(name, "weight") &&
                           !contains(name, "_norm.weight") && !contains(name, "ffn_gate_inp.weight");
  if (!quantizable) return GgmlType::F32;  // what the f16 file holds for these
  const int64_t layer = layer_of(name);
  const bool seventy_b = (facts.architecture == "llama" && facts.layers == 80 && facts.heads != facts.kv_heads) ||
                         (facts.architecture == "qwen2" && facts.layers == 80);
  GgmlType type = GgmlType::Q4_K;
  if (name == "output.weight" || (!has_output && name == "token_embd.weight")) {
    type = dims[0] % kSuperBlock != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
  } else if (name == "token_embd.weight") {
    // the default type
  } else if (contains(name, "attn_v.weight")) {
    if (use_more_bits(layer, facts.layers)) type = GgmlType::Q6_K;
    if (seventy_b && type == GgmlType::Q4_K) type = GgmlType::Q5_K;
    if (facts.experts == 8) type = GgmlType::Q8_0;
  } else if (contains(name, "attn_k.weight")) {
    if (facts.experts == 8) type = GgmlType::Q8_0;
  } else if (contains(name, "attn_q.weight")) {
    // the default type
  } else if (contains(name, "attn_output.weight")) {
    if (facts.experts == 8) type = GgmlType::Q5_K;
  } else if (contains(name, "ffn_down")) {
    if (use_more_bits(layer, facts.layers)) type = GgmlType::Q6_K;
  }
  return shape_fallback(type, dims[0]);
}

const std::map<std::string, std::string, std::less<>>& layer_names() {
  static const std::map<std::string, std::string, std::less<>> table = {
      {"ln1.weight", "attn_norm.weight"},
      {"ln2.weight", "ffn_norm.weight"},
      {"attn.q_proj.weight", "attn_q.weight"},
      {"attn.q_proj.bias", "attn_q.bias"},
      {"attn.k_proj.weight", "attn_k.weight"},
      {"attn.k_proj.bias", "attn_k.bias"},
      {"attn.v_proj.weight", "attn_v.weight"},
      {"attn.v_proj.bias", "attn_v.bias"},
      {"attn.o_proj.weight", "attn_output.weight"},
      {"attn.o_proj.bias", "attn_output.bias"},
      {"attn.q_norm.weight", "attn_q_norm.weight"},
      {"attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.gate_proj.bias", "ffn_gate.bias"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.up_proj.bias", "ffn_up.bias"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.down_proj.bias", "ffn_down.bias"},
      {"mlp.router.weight", "ffn_gate_inp.weight"},
      {"mlp.experts.gate_proj.weight", "ffn_gate_exps.weight"},
      {"mlp.experts.up_proj.weight", "ffn_up_exps.weight"},
      {"mlp.experts.down_proj.weight", "ffn_down_exps.weight"},
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
  };
  return table;
}

}  // namespace

bool use_more_bits(int64_t layer, int64_t layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

std::string gguf_tensor_name(std::string_view engine_name) {
  if (engine_name == "embed.weight") return "token_embd.weight";
  if (engine_name == "final_norm.weight") return "output_norm.weight";
  if (engine_name == "lm_head.weight") return "output.weight";
  if (engine_name.starts_with("layers.")) {
    const size_t dot = engine_name.find('.', 7);
    const std::string_view layer = engine_name.substr(7, dot - 7);
    const auto found = layer_names().find(engine_name.substr(dot + 1));
    if (found != layer_names().end()) return fmt::format("blk.{}.{}", layer, found->second);
  }
  // The architectures export accepts have no other parameters (gguf/model_metadata.h refuses the rest).
  SUROGATE_CHECK(false, "no GGUF name for parameter {}", engine_name);
  return {};
}

std::vector<PlannedTensor> plan_tensors(const ModelFacts& facts, const io::ModelConfig& config,
                                        std::span<const models::ParameterSpec> specs, ExportType type) {
  std::vector<PlannedTensor> planned;
  if (facts.llama_layout && config.rope.type == io::RopeType::Llama3) {
    planned.push_back({TensorInfo{"rope_freqs.weight", {config.rope.rotary_dim / 2}, GgmlType::F32}, std::nullopt, 0});
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    PlannedTensor tensor;
    tensor.info.name = gguf_tensor_name(specs[i].name);
    tensor.info.dims.assign(specs[i].shape.rbegin(), specs[i].shape.rend());
    tensor.spec_index = i;
    if (facts.llama_layout && (contains(specs[i].name, "attn.q_proj.") || contains(specs[i].name, "attn.k_proj."))) {
      tensor.permute_heads = contains(specs[i].name, "attn.q_proj.") ? facts.heads : facts.kv_heads;
    }
    planned.push_back(std::move(tensor));
  }
  const bool has_output = std::any_of(planned.begin(), planned.end(),
                                      [](const PlannedTensor& t) { return t.info.name == "output.weight"; });
  for (PlannedTensor& tensor : planned) {
    if (!tensor.spec_index) continue;
    tensor.info.type = type == ExportType::Q4_K_M ? q4_k_m_type(facts, tensor.info.name, tensor.info.dims, has_output)
                                                  : converter_type(tensor.info.name, tensor.info.dims, type);
  }
  return planned;
}

}  // namespace surogate::gguf
