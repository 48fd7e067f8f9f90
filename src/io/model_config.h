// Hugging Face `config.json` for the decoder architectures Surogate trains (Llama, Mistral,
// Qwen2, Qwen3, the mixture-of-experts Qwen2-MoE, Qwen3-MoE, Mixtral, and OLMo-2, whose graph comes
// from a model definition: examples/dsl/olmo2.py) → one typed ModelConfig, with every default resolved the way transformers
// resolves it, so later stages never look at JSON again. Any other `architectures` value, and a
// `hidden_act` other than silu, is read too (Architecture::Defined): a model definition
// (models/model_definition.h) brings the graph and the weights; without one, the first use of the
// built-in tables (models::parameter_specs, the graph builder) raises `builtin_refusal`. RoPE is accepted in both spellings:
// the legacy `rope_theta` + `rope_scaling` and the newer `rope_parameters` object; either way
// the result is a fully resolved RopeConfig. Bad or unsupported configs raise one UserError
// naming config.json and the key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace surogate::io {

// Defined: an architecture with no C++ entry (GPTNeoXForCausalLM, Phi3ForCausalLM, ...); only a
// model definition's graph and weight table can train it.
enum class Architecture { Llama, Mistral, Qwen2, Qwen3, Qwen2Moe, Qwen3Moe, Mixtral, Olmo2, Defined };

// "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
// "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "Olmo2ForCausalLM".
std::string_view architecture_class_name(Architecture architecture);
// "llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mixtral", "olmo2" (config.json's model_type).
// Defined has neither: ModelConfig::architecture_class / model_type hold what config.json says.
std::string_view architecture_model_type(Architecture architecture);

enum class RopeType { Default, Linear, Dynamic, Yarn, Llama3 };
std::string_view rope_type_name(RopeType type);  // "default", "linear", "dynamic", "yarn", "llama3"

// Everything needed to compute RoPE inverse frequencies and the attention scaling, with the
// same meaning as transformers' modeling_rope_utils. Let d = rotary_dim (even) and
// base_inv_freq[i] = 1 / theta^(2i/d) for i in [0, d/2).
//  - Default: inv_freq = base_inv_freq.
//  - Linear:  inv_freq = base_inv_freq / factor (positions stretched by `factor`).
//  - Dynamic: NTK-aware; for a sequence of length L > original_max_position_embeddings use
//             theta' = theta * ((factor * L / original_max) - (factor - 1))^(d / (d - 2)),
//             otherwise the default frequencies.
//  - Yarn:    interpolation/extrapolation blend between base_inv_freq / factor and
//             base_inv_freq over the correction range found from beta_fast / beta_slow
//             (floored/ceiled when `truncate`), against original_max_position_embeddings;
//             cos and sin are multiplied by attention_factor (already resolved here from
//             mscale / mscale_all_dim / factor when the config did not give it).
//  - Llama3:  wavelengths 2*pi/inv_freq longer than original_max / low_freq_factor are
//             divided by factor, shorter than original_max / high_freq_factor are kept, and
//             those in between are smoothly interpolated.
struct RopeConfig {
  RopeType type = RopeType::Default;
  double theta = 10000.0;                 // rope_theta: the frequency base
  double partial_rotary_factor = 1.0;     // fraction of head_dim that is rotated
  int64_t rotary_dim = 0;                 // head_dim * partial_rotary_factor, rounded down to even
  double factor = 1.0;                    // linear / dynamic / yarn / llama3 scaling factor
  // The pre-scaling context length: rope_scaling's original_max_position_embeddings, or
  // max_position_embeddings when the config does not give one (the transformers fallback).
  int64_t original_max_position_embeddings = 0;
  double low_freq_factor = 1.0;           // llama3
  double high_freq_factor = 4.0;          // llama3
  double beta_fast = 32.0;                // yarn
  double beta_slow = 1.0;                 // yarn
  double attention_factor = 1.0;          // yarn: multiplies cos/sin (1.0 for other types)
  std::optional<double> mscale;           // yarn: as given (already folded into attention_factor)
  std::optional<double> mscale_all_dim;   // yarn: as given (already folded into attention_factor)
  bool truncate = true;                   // yarn: round the correction range to integers
};

// A checkpoint saved in FP8 with block scales (quantization_config quant_method "fp8" with
// weight_block_size [rows, cols]; io/model_config_quantization.h): its quantized weights are F8_E4M3
// with `<name>_scale_inv` beside them (quant/fp8_blocks.h); other tensors are plain floats.
struct Fp8BlockCheckpoint {
  int64_t block_rows = 128;
  int64_t block_cols = 128;
};

// A checkpoint saved by bitsandbytes in 4 bits (quantization_config quant_method "bitsandbytes" with
// load_in_4bit, as transformers' BitsAndBytesConfig writes it; io/model_config_quantization.h): each
// quantized weight is U8 packed codes with its quant state beside it (models/bnb_checkpoint.h);
// the other tensors are plain floats.
struct Bnb4bitCheckpoint {
  std::string quant_type = "nf4";  // bnb_4bit_quant_type: nf4 or fp4
  bool double_quant = false;       // bnb_4bit_use_double_quant
};

// The mixture-of-experts block of Qwen2-MoE, Qwen3-MoE and Mixtral (io/model_config_moe.h): a
// router picks `experts_per_token` of `experts` SwiGLU experts per token by softmax top-k, their
// outputs are summed with the (optionally renormalised) router probabilities; Qwen2-MoE adds a
// shared expert scaled by sigmoid(shared_expert_gate · x). Layers listed dense (mlp_only_layers,
// decoder_sparse_step) keep the plain MLP of `intermediate_size`.
struct MoeConfig {
  int64_t experts = 0;                          // num_experts / num_local_experts
  int64_t experts_per_token = 0;                // num_experts_per_tok (top-k)
  int64_t expert_intermediate_size = 0;         // moe_intermediate_size (Mixtral: intermediate_size)
  bool normalize_top_k = false;                 // norm_topk_prob (Mixtral: always)
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE's shared expert; 0: none
  std::vector<bool> sparse_layers;              // per layer: MoE block (true) or dense MLP
  std::vector<int64_t> mlp_only_layers;         // as given, written back by save_model_config
  int64_t decoder_sparse_step = 1;              // as given (Qwen2/3-MoE)
  bool output_router_logits = false;            // adds the load-balancing loss to the training loss
  double router_aux_loss_coef = 0.001;          // its weight
};

// A weight of a model definition's own table (the `checkpoint_names` of its IR file,
// models/model_definition.h): engine name, checkpoint name ("{expert}" marks a stack of per-expert
// tensors along dimension 0) and shape.
struct DefinedParameter {
  std::string name;
  std::string hf_name;
  std::vector<int64_t> shape;
};

struct ModelConfig {
  Architecture architecture = Architecture::Llama;
  std::string architecture_class;  // config.json's class name (Defined: as given, e.g. GPTNeoXForCausalLM)
  std::string model_type;          // config.json's model_type (Defined: as given; may be empty)
  // Why the built-in graph and weight table cannot serve this config (an architecture without a
  // C++ entry, a hidden_act other than silu): the UserError message, naming config.json and the
  // key, raised where they are used without a model definition. Empty: nothing refused.
  std::string builtin_refusal;
  // Set from a model definition that declares its weights: replaces the built-in weight table
  // (models::parameter_specs). Empty: the architecture's table.
  std::vector<DefinedParameter> defined_parameters;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;        // defaults to num_attention_heads
  int64_t head_dim = 0;                   // defaults to hidden_size / num_attention_heads (Qwen3: 128)
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;                  // bias on q/k/v projections (Qwen2: always)
  bool o_proj_bias = false;               // bias on the attention output projection
  bool mlp_bias = false;                  // bias on gate/up/down projections (Llama mlp_bias)
  bool qk_norm = false;                   // RMSNorm on q and k: per head (Qwen3), whole projection (OLMo-2)
  // Sliding-window attention: the window (tokens), and per layer whether it applies.
  std::optional<int64_t> sliding_window;
  std::vector<bool> sliding_window_layers;  // size num_hidden_layers
  RopeConfig rope;
  std::optional<DType> torch_dtype;        // `dtype` (new) or `torch_dtype` (legacy)
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;      // config.json may hold one id or a list
  std::optional<int64_t> pad_token_id;
  std::string hidden_act = "silu";         // the built-in graphs need silu; a definition picks its own
  std::optional<Fp8BlockCheckpoint> fp8_block_checkpoint;  // config.json's quantization_config
  std::optional<Bnb4bitCheckpoint> bnb_4bit_checkpoint;    // likewise (at most one of the two)
  std::optional<MoeConfig> moe;            // the MoE architectures only
  // The original config.json text (empty when built in code): save_model_config keeps the
  // keys Surogate does not interpret.
  std::string source_json;
};

// Reads `model_dir/config.json`. Throws UserError for a missing file, invalid JSON, missing
// required keys, non-positive sizes, head counts that do not divide, an unsupported RoPE type, a
// quantization_config other than FP8 with block scales or bitsandbytes 4-bit. An architecture
// without a C++ entry or another hidden_act is not refused here: see builtin_refusal.
ModelConfig load_model_config(const std::filesystem::path& model_dir);
// Same from text; `source` names the file in error messages.
ModelConfig parse_model_config(std::string_view json_text, const std::string& source);

// Raises config.builtin_refusal when it is set (callers about to use the built-in tables).
void require_builtin_support(const ModelConfig& config);

// Writes `model_dir/config.json` (atomically) so that transformers' AutoConfig loads it:
// the source config's keys are kept and the interpreted fields overwritten; RoPE is written in
// the spelling the source used (rope_parameters when it had one, else the legacy rope_theta /
// rope_scaling form, which every transformers version reads). quantization_config is dropped: the
// weights Surogate writes are full precision.
void save_model_config(const ModelConfig& config, const std::filesystem::path& model_dir);
// The JSON text save_model_config writes.
std::string model_config_to_json(const ModelConfig& config);

}  // namespace surogate::io
