// LoRA (low-rank adapters) as a rewrite of a decoder forward graph (models/decoder_graph.h).
// For every linear node whose weight W [out, in] is a targeted projection:
//   y = linear(x, W[, b])  becomes  y' = y + (alpha / r) · linear(linear(dropout(x), A), B)
// with trainable A [r, in] ("<base>.lora_A.weight") and B [out, r] ("<base>.lora_B.weight"),
// where <base> is the projection's engine name without ".weight" ("layers.0.attn.q_proj").
// Every parameter of the base model is marked non-trainable, so autodiff emits no gradient for
// it (activation gradients still flow through the frozen weights to earlier adapters).
// Dropout (training graphs with dropout > 0 only) reads the graph input "dropout_seed"
// (I32 []), which the trainer writes per micro-batch. The input is dropped once, and the adapters
// that read it (q/k/v of a layer, gate/up) share that mask: one dropout pass per distinct input
// instead of one per adapter, and the batched low-rank product below still applies. (PEFT draws a
// mask per adapter; each adapter here still sees its input dropped with rate p, only the masks of
// adapters on one input coincide.) Evaluation graphs have no dropout, as PEFT in eval mode.
// The LoRA nodes carry the recompute group of the linear they adapt.
// MoE experts (expert_linear over a stacked weight [E, out, in]) get stacked adapters, one per
// expert as PEFT adapts each expert of a transformers 4.x model: A [E, r, in], B [E, out, r], and
// y' = y + (alpha / r) · expert_linear(expert_linear(dropout(x), A, offsets), B, offsets) (product,
// product, scale, add in every dtype; their PEFT keys are per expert, models/model_spec.h).
// With batch_shared_inputs, adapters whose projections read the same tensor get
// lora_a_cat = concat(A_1, A_2, ...) (rows), lora_a_shared = linear(x, lora_a_cat) and
// lora_a_part = split(lora_a_shared) (columns, one piece per adapter) at the first of them, and
// each adapter's B product reads its piece: one pass over x forward and backward instead of one
// per adapter, and one input-gradient product for x instead of one per adapter.
// Node form: F32 / F64 graphs (the CPU backend) emit lora_a = linear(x, A), lora_b = linear(·, B),
// lora_scale = scale(·), lora_out = add(y, ·); low-precision graphs (BF16 on the CUDA backend)
// emit lora_a, lora_b = linear(lora_a, B){scale = alpha / r} and turn the base node itself into
// linear_add(x, W, lora_b): the base matmul adds the adapter output in its epilogue (beta = 1).
// A base with a bias keeps its node and gets lora_out = linear_add(lora_a, B, y){scale} instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/model_spec.h"

namespace surogate::models {

inline constexpr const char* kDropoutSeed = "dropout_seed";

struct LoraOptions {
  int64_t rank = 16;
  double alpha = 32.0;
  double dropout = 0.0;
  // PEFT module names of the projections to adapt ("q_proj", ..., "down_proj"), already resolved
  // (train/lora_targets.h expands "all-linear").
  std::vector<std::string> target_modules;
  // Engine-internal, not a configuration option: adapters that read the same input (q/k/v,
  // gate/up) share one low-rank product x·[A_1; A_2; ...]ᵀ (concat, linear, split) instead of one
  // product each. Off here (the CPU
  // backend's graphs keep one product per adapter); the trainer turns it on for the CUDA backend
  // (H100 8B LoRA +1.3%), as does bench/surogate_train_bench (--batch-lora-inputs).
  bool batch_shared_inputs = false;
  // Engine-internal too: low-precision graphs take both gradients of each B product from one pass
  // over d_out (linear_add's `fused_backward`: linear_backward_low_rank, cuda/kernels/
  // low_rank_backward.h) instead of two skinny matmuls. On for the CUDA trainer, as above.
  bool fuse_low_rank_backward = false;
  // Engine-internal too: forward-only graphs (not `training`) of a low-precision dtype write each
  // adapter's two products — of every adapter of a shared-input group at once — as one
  // low_rank_products node (ops/defs/low_rank_products_def.cpp: two launches on CUDA instead of
  // concat, product, split and one product per adapter), the base node still linear_add. Set for
  // every decode graph with an adapter (generate/kv_cache_plans.cpp for the live one of GRPO's
  // rollouts, models/session_loading.cpp for one loaded from disk: the same kernels, the same
  // tokens); F32 graphs ignore it. GRPO's 1.7B rollouts 6.7 → 6.3 s a step, HISTORY.md 2026-11-30.
  bool fuse_inference_products = false;
};

inline double lora_scaling(const LoraOptions& options) {
  return options.alpha / static_cast<double>(options.rank);
}

// One adapted projection.
struct LoraAdapter {
  ParameterSpec base;   // the frozen projection weight (engine and HF names, [out, in])
  ParameterSpec a;      // lora_A [r, in]; hf_name is PEFT's key
  ParameterSpec b;      // lora_B [out, r]; hf_name is PEFT's key
};

// What a LoRA run needs to rebuild its graphs: the options and the resolved adapters.
struct LoraSetup {
  LoraOptions options;
  std::vector<LoraAdapter> adapters;
};

// PEFT's key for an adapter matrix of the HF weight `base_hf_name` ("model.layers.0.self_attn.q_proj.weight"
// → "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"); which is 'A' or 'B'.
std::string peft_key(const std::string& base_hf_name, char which);

// PEFT's module name of a layer matrix (the HF name's last part: "q_proj", "gate_proj", Mixtral's
// "w1", the router "gate"); "" for anything else (norms, embedding, head).
std::string peft_module_name(const ParameterSpec& spec);
// The module names of every adaptable matrix of the model, in parameter order without repeats.
std::vector<std::string> lora_module_names(const io::ModelConfig& config);

// The adapters for `config`, in parameter order. A target module the model has no projection
// of is a UserError.
std::vector<LoraAdapter> lora_adapters(const io::ModelConfig& config, const LoraOptions& options);

// The rewritten graph (see the file comment). `training` adds the dropout nodes when
// options.dropout > 0.
graph::Graph apply_lora(const graph::Graph& forward, const graph::OpRegistry& registry,
                        const std::vector<LoraAdapter>& adapters, const LoraOptions& options, bool training);

}  // namespace surogate::models
