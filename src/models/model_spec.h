// The parameters of a Llama-family decoder (Llama 1/2/3.x, Mistral, Qwen2/2.5, Qwen3) and of the
// mixture-of-experts decoders (Qwen2-MoE, Qwen3-MoE, Mixtral) and of OLMo-2 as the engine names them, with their
// shapes and their Hugging Face names. The list is derived from io::ModelConfig alone (flags:
// qkv / o_proj / mlp bias, Qwen3 qk-norm, tied embeddings, the MoE layers), so the graph builder,
// the loader and the writer all agree on it by construction.
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
// OLMo-2 has no ln1; its q/k norms span the whole projection ([heads·head_dim], [kv_heads·head_dim]);
//   layers.{i}.post_mlp_norm.weight       model.layers.{i}.post_feedforward_layernorm.weight
// An MoE layer has instead of the MLP (Qwen2/3-MoE names; Mixtral's in model_spec.cpp):
//   layers.{i}.mlp.router.weight          [E, H]      model.layers.{i}.mlp.gate.weight
//   layers.{i}.mlp.experts.{gate,up}_proj.weight [E, I, H]  model.layers.{i}.mlp.experts.{e}.{gate,up}_proj.weight
//   layers.{i}.mlp.experts.down_proj.weight      [E, H, I]  model.layers.{i}.mlp.experts.{e}.down_proj.weight
//   layers.{i}.mlp.shared_expert.{gate,up,down}_proj.weight, layers.{i}.mlp.shared_expert_gate.weight (Qwen2-MoE)
// The experts of a layer are one stacked engine parameter per projection (what the grouped expert
// matmul reads) and E tensors in the checkpoint: transformers 4.x and 5.x both save one tensor per
// expert ("{expert}" in hf_name; 5.x fuses them into gate_up_proj only in memory).
// The dense architectures share the Llama names; the table is chosen per architecture
// (hf_name_table) so an architecture that renames a tensor changes one table.
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
  // A stack of `experts` per-expert tensors along dimension 0 (0: a plain tensor): the checkpoint
  // holds one tensor per expert, named hf_name with "{expert}" replaced by its index, of shape
  // shape[1:] (hf_pieces).
  int64_t experts = 0;
};

// One checkpoint tensor of a parameter: its HF name, shape and first element in the parameter.
struct HfPiece {
  std::string name;
  graph::Shape shape;
  int64_t offset = 0;  // elements
};
// The checkpoint tensors of `spec`: the spec itself, or one per expert in expert order.
std::vector<HfPiece> hf_pieces(const ParameterSpec& spec);

inline constexpr std::string_view kExpertSlot = "{expert}";

// One row of an architecture's name table; "{layer}" stands for the layer index, "{expert}" for
// the expert index of a stacked parameter's pieces (HF side only).
struct NameMapping {
  std::string_view engine;
  std::string_view hf;
};
std::vector<NameMapping> hf_name_table(io::Architecture architecture);

// Every parameter of the model described by `config`, in a fixed order (embedding, layers in
// order, final norm, lm head); a model definition's own table when config.defined_parameters is
// set (models/defined_weights.h), in the definition's order. Without one, a config Surogate has no
// C++ for raises its builtin_refusal (io/model_config.h).
std::vector<ParameterSpec> parameter_specs(const io::ModelConfig& config);

// The elements of every tensor of `specs`: the model's parameter count.
int64_t parameter_count(std::span<const ParameterSpec> specs);

// An MoE router (layers.{i}.mlp.router.weight, layers.{i}.mlp.shared_expert_gate.weight): quantized
// formats (QLoRA, FP8) leave it in the model's dtype, since its rounding would move tokens between
// experts.
bool is_router_weight(std::string_view engine_name);

// Name conversion through the architecture's table. Unknown names return std::nullopt. A
// per-expert HF name converts to its stacked engine parameter; the HF name of a stacked parameter
// keeps the "{expert}" slot.
std::optional<std::string> hf_name_for(io::Architecture architecture, std::string_view engine_name);
std::optional<std::string> engine_name_for(io::Architecture architecture, std::string_view hf_name);

}  // namespace surogate::models
