// The parameters of a Llama-family decoder (Llama 1/2/3.x, Mistral, Qwen2/2.5, Qwen3) as the
// engine names them, with their shapes and their Hugging Face names. The list is derived from
// io::ModelConfig alone (flags: qkv / o_proj / mlp bias, Qwen3 qk-norm, tied embeddings), so
// the graph builder, the loader and the writer all agree on it by construction.
//
// Engine names are stable and architecture-free:
//   embed.weight                          model.embed_tokens.weight
//   layers.{i}.ln1.weight                 model.layers.{i}.input_layernorm.weight
//   layers.{i}.attn.{q,k,v,o}_proj.weight model.layers.{i}.self_attn.{q,k,v,o}_proj.weight
//   layers.{i}.attn.{q,k,v,o}_proj.bias   model.layers.{i}.self_attn.{q,k,v,o}_proj.bias
//   layers.{i}.attn.{q,k}_norm.weight     model.layers.{i}.self_attn.{q,k}_norm.weight (Qwen3)
//   layers.{i}.ln2.weight                 model.layers.{i}.post_attention_layernorm.weight
//   layers.{i}.mlp.{gate,up,down}_proj.*  model.layers.{i}.mlp.{gate,up,down}_proj.*
//   final_norm.weight                     model.norm.weight
//   lm_head.weight                        lm_head.weight            (absent when tied)
// The four architectures share these HF names today; the table is still chosen per
// architecture (hf_name_table) so an architecture that renames a tensor changes one table.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "io/model_config.h"

namespace surogate::models {

struct ParameterSpec {
  std::string name;     // engine name
  std::string hf_name;  // Hugging Face checkpoint name
  graph::Shape shape;
  // Set when config.json says the checkpoint is saved in FP8 with block scales: the tensor may be
  // F8_E4M3 codes with `<hf_name>_scale_inv` beside it (models/weight_io.h).
  std::optional<io::Fp8BlockCheckpoint> checkpoint_fp8_blocks = std::nullopt;
  // Set when config.json says the checkpoint is saved by bitsandbytes in 4 bits: the tensor may be U8
  // packed codes with its quant state beside it (models/bnb_checkpoint.h).
  bool checkpoint_bnb_4bit = false;
};

// One row of an architecture's name table; "{layer}" stands for the layer index.
struct NameMapping {
  std::string_view engine;
  std::string_view hf;
};
std::span<const NameMapping> hf_name_table(io::Architecture architecture);

// Every parameter of the model described by `config`, in a fixed order (embedding, layers in
// order, final norm, lm head).
std::vector<ParameterSpec> parameter_specs(const io::ModelConfig& config);

// Name conversion through the architecture's table. Unknown names return std::nullopt.
std::optional<std::string> hf_name_for(io::Architecture architecture, std::string_view engine_name);
std::optional<std::string> engine_name_for(io::Architecture architecture, std::string_view hf_name);

}  // namespace surogate::models
