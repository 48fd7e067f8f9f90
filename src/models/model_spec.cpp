// Parameter list and HF name tables for the Llama family (see model_spec.h).
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

// Matches `name` against `pattern`; on success returns the text standing for "{layer}" (empty
// when the pattern has none). The layer must be a decimal number without a leading zero.
std::optional<std::string> match(std::string_view pattern, std::string_view name) {
  size_t slot = pattern.find(kLayer);
  if (slot == std::string_view::npos) {
    if (pattern == name) return std::string();
    return std::nullopt;
  }
  std::string_view prefix = pattern.substr(0, slot);
  std::string_view suffix = pattern.substr(slot + kLayer.size());
  if (name.size() <= prefix.size() + suffix.size()) return std::nullopt;
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  std::string_view layer = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  for (char c : layer) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  if (layer.size() > 1 && layer.front() == '0') return std::nullopt;
  return std::string(layer);
}

std::string substitute(std::string_view pattern, std::string_view layer) {
  std::string out(pattern);
  size_t slot = out.find(kLayer);
  if (slot != std::string::npos) out.replace(slot, kLayer.size(), layer);
  return out;
}

}  // namespace

std::span<const NameMapping> hf_name_table(io::Architecture architecture) {
  switch (architecture) {
    case io::Architecture::Llama:
    case io::Architecture::Mistral:
    case io::Architecture::Qwen2:
    case io::Architecture::Qwen3:
      return kLlamaFamilyNames;
  }
  return kLlamaFamilyNames;
}

std::optional<std::string> hf_name_for(io::Architecture architecture, std::string_view engine_name) {
  for (const NameMapping& row : hf_name_table(architecture)) {
    if (auto layer = match(row.engine, engine_name)) return substitute(row.hf, *layer);
  }
  return std::nullopt;
}

std::optional<std::string> engine_name_for(io::Architecture architecture, std::string_view hf_name) {
  for (const NameMapping& row : hf_name_table(architecture)) {
    if (auto layer = match(row.hf, hf_name)) return substitute(row.engine, *layer);
  }
  return std::nullopt;
}

std::vector<ParameterSpec> parameter_specs(const io::ModelConfig& config) {
  const int64_t hidden = config.hidden_size;
  const int64_t head_dim = config.head_dim;
  const int64_t q_width = config.num_attention_heads * head_dim;
  const int64_t kv_width = config.num_key_value_heads * head_dim;
  const int64_t intermediate = config.intermediate_size;
  std::vector<ParameterSpec> specs;
  auto add = [&](std::string name, graph::Shape shape) {
    std::optional<std::string> hf = hf_name_for(config.architecture, name);
    SUROGATE_CHECK(hf.has_value(), "no HF name for engine parameter {}", name);
    specs.push_back(ParameterSpec{std::move(name), std::move(*hf), std::move(shape), config.fp8_block_checkpoint,
                                  config.bnb_4bit_checkpoint.has_value()});
  };
  add("embed.weight", {config.vocab_size, hidden});
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const std::string prefix = fmt::format("layers.{}.", layer);
    add(prefix + "ln1.weight", {hidden});
    auto projection = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
      add(prefix + name + ".weight", {out, in});
      if (bias) add(prefix + name + ".bias", {out});
    };
    projection("attn.q_proj", q_width, hidden, config.qkv_bias);
    projection("attn.k_proj", kv_width, hidden, config.qkv_bias);
    projection("attn.v_proj", kv_width, hidden, config.qkv_bias);
    projection("attn.o_proj", hidden, q_width, config.o_proj_bias);
    if (config.qk_norm) {
      add(prefix + "attn.q_norm.weight", {head_dim});
      add(prefix + "attn.k_norm.weight", {head_dim});
    }
    add(prefix + "ln2.weight", {hidden});
    projection("mlp.gate_proj", intermediate, hidden, config.mlp_bias);
    projection("mlp.up_proj", intermediate, hidden, config.mlp_bias);
    projection("mlp.down_proj", hidden, intermediate, config.mlp_bias);
  }
  add("final_norm.weight", {hidden});
  if (!config.tie_word_embeddings) add("lm_head.weight", {config.vocab_size, hidden});
  return specs;
}

}  // namespace surogate::models
