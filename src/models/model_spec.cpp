// Parameter list and HF name tables of the Llama family, the MoE decoders and OLMo-2 (see model_spec.h).
#include "models/model_spec.h"

#include <array>
#include <cctype>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::models {
namespace {

constexpr std::string_view kLayer = "{layer}";

// Llama, Mistral, Qwen2 and Qwen3 (transformers' modeling_*.py) share these names.
constexpr std::array kLlamaFamilyNames{
    NameMapping{"embed.weight", "model.embed_tokens.weight"},
    NameMapping{"layers.{layer}.ln1.weight", "model.layers.{layer}.input_layernorm.weight"},
    NameMapping{"layers.{layer}.attn.q_proj.weight", "model.layers.{layer}.self_attn.q_proj.weight"},
    NameMapping{"layers.{layer}.attn.q_proj.bias", "model.layers.{layer}.self_attn.q_proj.bias"},
    NameMapping{"layers.{layer}.attn.k_proj.weight", "model.layers.{layer}.self_attn.k_proj.weight"},
    NameMapping{"layers.{layer}.attn.k_proj.bias", "model.layers.{layer}.self_attn.k_proj.bias"},
    NameMapping{"layers.{layer}.attn.v_proj.weight", "model.layers.{layer}.self_attn.v_proj.weight"},
    NameMapping{"layers.{layer}.attn.v_proj.bias", "model.layers.{layer}.self_attn.v_proj.bias"},
    NameMapping{"layers.{layer}.attn.o_proj.weight", "model.layers.{layer}.self_attn.o_proj.weight"},
    NameMapping{"layers.{layer}.attn.o_proj.bias", "model.layers.{layer}.self_attn.o_proj.bias"},
    NameMapping{"layers.{layer}.attn.q_norm.weight", "model.layers.{layer}.self_attn.q_norm.weight"},
    NameMapping{"layers.{layer}.attn.k_norm.weight", "model.layers.{layer}.self_attn.k_norm.weight"},
    NameMapping{"layers.{layer}.ln2.weight", "model.layers.{layer}.post_attention_layernorm.weight"},
    NameMapping{"layers.{layer}.mlp.gate_proj.weight", "model.layers.{layer}.mlp.gate_proj.weight"},
    NameMapping{"layers.{layer}.mlp.gate_proj.bias", "model.layers.{layer}.mlp.gate_proj.bias"},
    NameMapping{"layers.{layer}.mlp.up_proj.weight", "model.layers.{layer}.mlp.up_proj.weight"},
    NameMapping{"layers.{layer}.mlp.up_proj.bias", "model.layers.{layer}.mlp.up_proj.bias"},
    NameMapping{"layers.{layer}.mlp.down_proj.weight", "model.layers.{layer}.mlp.down_proj.weight"},
    NameMapping{"layers.{layer}.mlp.down_proj.bias", "model.layers.{layer}.mlp.down_proj.bias"},
    NameMapping{"final_norm.weight", "model.norm.weight"},
    NameMapping{"lm_head.weight", "lm_head.weight"},
};

// The MoE layers' names (Qwen2-MoE, Qwen3-MoE: modeling_qwen2_moe.py / modeling_qwen3_moe.py as
// saved, one tensor per expert); the attention, norms and the dense MLP of mlp_only_layers are the
// Llama names above.
constexpr std::array kQwenMoeNames{
    NameMapping{"layers.{layer}.mlp.router.weight", "model.layers.{layer}.mlp.gate.weight"},
    NameMapping{"layers.{layer}.mlp.experts.gate_proj.weight", "model.layers.{layer}.mlp.experts.{expert}.gate_proj.weight"},
    NameMapping{"layers.{layer}.mlp.experts.up_proj.weight", "model.layers.{layer}.mlp.experts.{expert}.up_proj.weight"},
    NameMapping{"layers.{layer}.mlp.experts.down_proj.weight", "model.layers.{layer}.mlp.experts.{expert}.down_proj.weight"},
    NameMapping{"layers.{layer}.mlp.shared_expert.gate_proj.weight", "model.layers.{layer}.mlp.shared_expert.gate_proj.weight"},
    NameMapping{"layers.{layer}.mlp.shared_expert.up_proj.weight", "model.layers.{layer}.mlp.shared_expert.up_proj.weight"},
    NameMapping{"layers.{layer}.mlp.shared_expert.down_proj.weight", "model.layers.{layer}.mlp.shared_expert.down_proj.weight"},
    NameMapping{"layers.{layer}.mlp.shared_expert_gate.weight", "model.layers.{layer}.mlp.shared_expert_gate.weight"},
};

// Mixtral's block_sparse_moe (modeling_mixtral.py as saved): w1 = gate, w3 = up, w2 = down.
constexpr std::array kMixtralNames{
    NameMapping{"layers.{layer}.mlp.router.weight", "model.layers.{layer}.block_sparse_moe.gate.weight"},
    NameMapping{"layers.{layer}.mlp.experts.gate_proj.weight", "model.layers.{layer}.block_sparse_moe.experts.{expert}.w1.weight"},
    NameMapping{"layers.{layer}.mlp.experts.up_proj.weight", "model.layers.{layer}.block_sparse_moe.experts.{expert}.w3.weight"},
    NameMapping{"layers.{layer}.mlp.experts.down_proj.weight", "model.layers.{layer}.block_sparse_moe.experts.{expert}.w2.weight"},
};

// OLMo-2 (modeling_olmo2.py) normalises each half's output instead of its input: the attention's
// norm keeps the Llama name (post_attention_layernorm, engine ln2), the MLP's is its own.
constexpr std::array kOlmo2Names{
    NameMapping{"layers.{layer}.post_mlp_norm.weight", "model.layers.{layer}.post_feedforward_layernorm.weight"},
};

constexpr std::array<std::string_view, 2> kSlots{kLayer, kExpertSlot};

// Matches `name` against `pattern`, whose "{layer}" / "{expert}" slots stand for decimal numbers
// without a leading zero; on success returns the text of each slot (empty when absent).
std::optional<std::array<std::string, 2>> match(std::string_view pattern, std::string_view name) {
  std::array<std::string, 2> captured;
  while (true) {
    size_t slot = std::string_view::npos, which = 0;
    for (size_t i = 0; i < kSlots.size(); ++i) {
      size_t found = pattern.find(kSlots[i]);
      if (found < slot) {
        slot = found;
        which = i;
      }
    }
    if (slot == std::string_view::npos) {
      if (pattern == name) return captured;
      return std::nullopt;
    }
    if (!name.starts_with(pattern.substr(0, slot))) return std::nullopt;
    name.remove_prefix(slot);
    pattern.remove_prefix(slot + kSlots[which].size());
    size_t digits = 0;
    while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
    if (digits == 0 || (digits > 1 && name.front() == '0')) return std::nullopt;
    captured[which] = std::string(name.substr(0, digits));
    name.remove_prefix(digits);
  }
}

std::string substitute(std::string_view pattern, const std::array<std::string, 2>& captured) {
  std::string out(pattern);
  for (size_t i = 0; i < kSlots.size(); ++i) {
    size_t slot = out.find(kSlots[i]);
    if (slot != std::string::npos && !captured[i].empty()) out.replace(slot, kSlots[i].size(), captured[i]);
  }
  return out;
}

}  // namespace

std::vector<NameMapping> hf_name_table(io::Architecture architecture) {
  std::vector<NameMapping> table(kLlamaFamilyNames.begin(), kLlamaFamilyNames.end());
  switch (architecture) {
    case io::Architecture::Qwen2Moe:
    case io::Architecture::Qwen3Moe:
      table.insert(table.end(), kQwenMoeNames.begin(), kQwenMoeNames.end());
      break;
    case io::Architecture::Mixtral:
      table.insert(table.end(), kMixtralNames.begin(), kMixtralNames.end());
      break;
    case io::Architecture::Olmo2:
      table.insert(table.end(), kOlmo2Names.begin(), kOlmo2Names.end());
      break;
    default:
      break;
  }
  return table;
}

std::optional<std::string> hf_name_for(io::Architecture architecture, std::string_view engine_name) {
  for (const NameMapping& row : hf_name_table(architecture)) {
    if (auto slots = match(row.engine, engine_name)) return substitute(row.hf, *slots);
  }
  return std::nullopt;
}

std::optional<std::string> engine_name_for(io::Architecture architecture, std::string_view hf_name) {
  for (const NameMapping& row : hf_name_table(architecture)) {
    if (auto slots = match(row.hf, hf_name)) return substitute(row.engine, *slots);
  }
  return std::nullopt;
}

bool is_router_weight(std::string_view engine_name) {
  return engine_name.starts_with("layers.") &&
         (engine_name.ends_with(".mlp.router.weight") || engine_name.ends_with(".mlp.shared_expert_gate.weight"));
}

std::vector<HfPiece> hf_pieces(const ParameterSpec& spec) {
  if (spec.experts == 0) return {HfPiece{spec.hf_name, spec.shape, 0}};
  const graph::Shape piece_shape(spec.shape.begin() + 1, spec.shape.end());
  const int64_t piece_size = graph::shape_numel(piece_shape);
  const size_t slot = spec.hf_name.find(kExpertSlot);
  SUROGATE_CHECK(slot != std::string::npos, "stacked parameter {} has no {{expert}} slot in {}", spec.name, spec.hf_name);
  std::vector<HfPiece> pieces;
  pieces.reserve(static_cast<size_t>(spec.experts));
  for (int64_t expert = 0; expert < spec.experts; ++expert) {
    std::string name = spec.hf_name;
    name.replace(slot, kExpertSlot.size(), std::to_string(expert));
    pieces.push_back(HfPiece{std::move(name), piece_shape, expert * piece_size});
  }
  return pieces;
}

namespace {

// The table a model definition declared (models/defined_weights.h).
std::vector<ParameterSpec> defined_parameter_specs(const io::ModelConfig& config) {
  std::vector<ParameterSpec> specs;
  for (const io::DefinedParameter& parameter : config.defined_parameters) {
    const bool stacked = parameter.hf_name.find(kExpertSlot) != std::string::npos;
    if (stacked && parameter.shape.empty()) {
      fail_user("parameter '{}': checkpoint name '{}' holds {} but the parameter is a scalar", parameter.name,
                parameter.hf_name, kExpertSlot);
    }
    specs.push_back(ParameterSpec{parameter.name, parameter.hf_name, parameter.shape, config.fp8_block_checkpoint,
                                  config.bnb_4bit_checkpoint.has_value(), stacked ? parameter.shape.front() : 0});
  }
  return specs;
}

}  // namespace

std::vector<ParameterSpec> parameter_specs(const io::ModelConfig& config) {
  if (!config.defined_parameters.empty()) return defined_parameter_specs(config);
  io::require_builtin_support(config);
  const int64_t hidden = config.hidden_size;
  const int64_t head_dim = config.head_dim;
  const int64_t q_width = config.num_attention_heads * head_dim;
  const int64_t kv_width = config.num_key_value_heads * head_dim;
  const int64_t intermediate = config.intermediate_size;
  std::vector<ParameterSpec> specs;
  auto add = [&](std::string name, graph::Shape shape, int64_t experts = 0) {
    std::optional<std::string> hf = hf_name_for(config.architecture, name);
    SUROGATE_CHECK(hf.has_value(), "no HF name for engine parameter {}", name);
    specs.push_back(ParameterSpec{std::move(name), std::move(*hf), std::move(shape), config.fp8_block_checkpoint,
                                  config.bnb_4bit_checkpoint.has_value(), experts});
  };
  add("embed.weight", {config.vocab_size, hidden});
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const std::string prefix = fmt::format("layers.{}.", layer);
    const bool olmo2 = config.architecture == io::Architecture::Olmo2;
    if (!olmo2) add(prefix + "ln1.weight", {hidden});
    auto projection = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
      add(prefix + name + ".weight", {out, in});
      if (bias) add(prefix + name + ".bias", {out});
    };
    projection("attn.q_proj", q_width, hidden, config.qkv_bias);
    projection("attn.k_proj", kv_width, hidden, config.qkv_bias);
    projection("attn.v_proj", kv_width, hidden, config.qkv_bias);
    projection("attn.o_proj", hidden, q_width, config.o_proj_bias);
    if (config.qk_norm) {
      add(prefix + "attn.q_norm.weight", {olmo2 ? q_width : head_dim});
      add(prefix + "attn.k_norm.weight", {olmo2 ? kv_width : head_dim});
    }
    add(prefix + "ln2.weight", {hidden});
    if (olmo2) add(prefix + "post_mlp_norm.weight", {hidden});
    if (config.moe && config.moe->sparse_layers[static_cast<size_t>(layer)]) {
      const io::MoeConfig& moe = *config.moe;
      const int64_t experts = moe.experts, expert_width = moe.expert_intermediate_size;
      add(prefix + "mlp.router.weight", {experts, hidden});
      add(prefix + "mlp.experts.gate_proj.weight", {experts, expert_width, hidden}, experts);
      add(prefix + "mlp.experts.up_proj.weight", {experts, expert_width, hidden}, experts);
      add(prefix + "mlp.experts.down_proj.weight", {experts, hidden, expert_width}, experts);
      if (const int64_t shared = moe.shared_expert_intermediate_size; shared > 0) {
        projection("mlp.shared_expert.gate_proj", shared, hidden, false);
        projection("mlp.shared_expert.up_proj", shared, hidden, false);
        projection("mlp.shared_expert.down_proj", hidden, shared, false);
        add(prefix + "mlp.shared_expert_gate.weight", {1, hidden});
      }
      continue;
    }
    projection("mlp.gate_proj", intermediate, hidden, config.mlp_bias);
    projection("mlp.up_proj", intermediate, hidden, config.mlp_bias);
    projection("mlp.down_proj", hidden, intermediate, config.mlp_bias);
  }
  add("final_norm.weight", {hidden});
  if (!config.tie_word_embeddings) add("lm_head.weight", {config.vocab_size, hidden});
  return specs;
}

int64_t parameter_count(std::span<const ParameterSpec> specs) {
  int64_t count = 0;
  for (const ParameterSpec& spec : specs) count += graph::shape_numel(spec.shape);
  return count;
}

}  // namespace surogate::models
