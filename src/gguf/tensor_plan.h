// Which tensors a GGUF export holds, under llama.cpp's names, in which shape and encoding.
//
// Names (engine parameter → GGUF): embed → token_embd, final_norm → output_norm, lm_head → output,
// layers.i.ln1 / ln2 → blk.i.attn_norm / ffn_norm, attn.{q,k,v,o}_proj → attn_{q,k,v,output},
// attn.{q,k}_norm → attn_{q,k}_norm, mlp.{gate,up,down}_proj → ffn_{gate,up,down}, mlp.router →
// ffn_gate_inp, mlp.experts.X_proj → ffn_X_exps (the experts stacked, as the engine holds them),
// mlp.shared_expert.X_proj → ffn_X_shexp, mlp.shared_expert_gate → ffn_gate_inp_shexp. Dimensions
// are the HF shape reversed (ggml order). Llama-layout models (llama, mistral, mixtral) get
// rope_freqs.weight first when config.json asks for llama3 RoPE scaling.
//
// Encodings, as llama.cpp's tools choose them:
//  - convert_hf_to_gguf.py (f16, bf16, q8_0): 1-D tensors, *_norm.weight, biases, ffn_gate_inp and
//    ffn_gate_inp_shexp stay F32; every other weight takes the type; q8_0 falls back to F16 for a
//    row length that is not a multiple of 32.
//  - llama-quantize Q4_K_M (from an f16 file, so the values quantized are the weights rounded to
//    f16 first): only weights with two or more dimensions (after
//    dropping trailing 1s) that are not norms or ffn_gate_inp are quantized, the rest stay F32. Q4_K
//    by default; output.weight (token_embd.weight when the embeddings are tied) Q6_K (Q8_0 when its
//    rows are not whole super-blocks); attn_v and ffn_down* Q6_K in the layers where use_more_bits
//    holds (the first and last eighth, and every third layer between); with 8 experts attn_v and
//    attn_k Q8_0 and attn_output Q5_K; a llama / qwen2 70B (80 layers, grouped-query) gets Q5_K for
//    attn_v where Q4_K was chosen. A row length that is not a multiple of 256 falls back: Q4_K → Q5_0,
//    Q5_K → Q5_1, Q6_K → Q8_0, and to F16 when not a multiple of 32 either.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/export_type.h"
#include "gguf/gguf_writer.h"
#include "io/model_config.h"
#include "models/model_spec.h"

namespace surogate::gguf {

struct PlannedTensor {
  TensorInfo info;
  std::optional<size_t> spec_index;  // the engine parameter; nullopt for rope_freqs.weight
  // Llama-layout q / k projections: the number of heads whose rows are regrouped from HF's
  // half-split rotary layout into llama.cpp's interleaved pairs (0: copied as is).
  int64_t permute_heads = 0;
};

struct ModelFacts {
  std::string architecture;  // general.architecture
  bool llama_layout = false;  // q / k rows permuted, rope_freqs for llama3 scaling
  int64_t layers = 0;
  int64_t experts = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
};

// The GGUF name of an engine parameter.
std::string gguf_tensor_name(std::string_view engine_name);

std::vector<PlannedTensor> plan_tensors(const ModelFacts& facts, const io::ModelConfig& config,
                                        std::span<const models::ParameterSpec> specs, ExportType type);

// llama-quantize's use_more_bits: layer i of n gets more bits in the Q4_K_M mix.
bool use_more_bits(int64_t layer, int64_t layers);

}  // namespace surogate::gguf
