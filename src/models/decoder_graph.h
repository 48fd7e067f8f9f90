// The forward graph of a Llama-family decoder (Llama, Mistral, Qwen2, Qwen3) or of an MoE decoder
// (Qwen2-MoE, Qwen3-MoE, Mixtral: models/moe_block.h in place of the MLP of sparse layers) for one micro-batch
// of B × T tokens, built from io::ModelConfig with the parameter names of models/model_spec.h.
// Inputs (written by the trainer per micro-batch):
//   input_ids, position_ids, document_ids, targets  I32 [B, T]  (targets already shifted)
//   loss_scale                                      F32 []      (1 / loss tokens of the window)
// Output: "loss" = loss_scale · Σ token cross-entropy; with `with_accuracy`, also "correct"
// (scored tokens whose argmax prediction is the target), for evaluation graphs. With
// router_aux_loss_micro_batches > 0 and an MoE config whose output_router_logits is set, the
// cross-entropy is "lm_loss", "loss" = lm_loss + router_aux_loss_coef · router_aux_loss /
// micro-batches, and "router_aux_loss" (the unweighted load-balancing loss of this micro-batch) is
// a second output: the window's loss is the mean cross-entropy plus the coefficient times the mean
// of the micro-batches' aux losses (transformers' for one micro-batch).
// Recompute groups follow docs/architecture.md: rmsnorm, qkv, att, swiglu, ffn. The residual
// adds are fused into the norms that follow them (fused_residual_rmsnorm: ln2, the next layer's
// ln1, final_norm), and Qwen3's q/k norm into RoPE (fused_rmsnorm_rope); the residual stream
// stays a checkpoint (compiler/recompute.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "graph/builder.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/model_config.h"

namespace surogate::models {

struct DecoderGraphOptions {
  int64_t batch = 1;
  int64_t sequence = 1;
  int64_t lmhead_chunks = 1;
  bool with_accuracy = false;
  // Floating dtype of parameters and activations: F32 (the CPU backend) or BF16 (the CUDA
  // backend's bf16 recipe; RoPE tables in BF16 as transformers casts them). loss_scale, the loss,
  // rstd and logsumexp stay F32 (ops/defs/statistic_dtype.h).
  DType dtype = DType::F32;
  // An input "loss_weights" F32 [B, T] (shifted like targets) weighing each token's loss
  // (loss_scale strategies hermes / react); without it the loss op reads no weights at all.
  bool token_weights = false;
  // use_fused_rope: models without q/k norm rotate q and k with fused_rope (cos/sin computed from
  // the position ids inside the op) instead of rope_cos_sin tables read by rope. Qwen3's
  // fused_rmsnorm_rope always computes them inside.
  bool fused_rope = false;
  // attn_bwd_chunks: the attention backward runs on this many slices of the batch rows (the
  // attention nodes' `backward_chunks` attribute, written only when > 1).
  int64_t attention_backward_chunks = 1;
  // Training graphs of MoE models: the micro-batches of one optimizer step (gradient accumulation ×
  // data-parallel ranks); 0 leaves the router loss out (evaluation).
  int64_t router_aux_loss_micro_batches = 0;
  // Qwen2-VL / Qwen2.5-VL's M-RoPE: position_ids is I32 [3, B, T] (temporal, height, width) and
  // the rotary tables come from mrope_cos_sin with these sections (no fused_rope; a q/k norm is
  // then rmsnorm per head followed by rope). Empty: ordinary positions [B, T].
  std::vector<int64_t> mrope_section = {};
  // Qwen3-VL's interleaved M-RoPE layout (mrope_cos_sin's mrope_interleaved; ops/mrope.h).
  bool mrope_interleaved = false;
  // Entry i is called with layer i's output stream [B, T, H] (its block outputs added) and returns
  // what layer i + 1 reads (Qwen3-VL's DeepStack adds image features after its first layers,
  // models/qwen3_vl_model.h). Layers past the list's end are untouched (and keep the fused
  // residual add).
  std::vector<std::function<graph::TensorId(graph::GraphBuilder&, graph::TensorId)>> after_layer = {};
  // Returns what the layers read from the token embeddings [B, T, H] (the vision-language model's
  // splice of image features, models/vision_model.h). Empty: the embeddings themselves.
  std::function<graph::TensorId(graph::GraphBuilder&, graph::TensorId)> splice_embeddings = {};
};

struct DecoderGraph {
  graph::Graph graph;
  graph::TensorId loss = graph::kNoTensor;
  graph::TensorId correct = graph::kNoTensor;  // kNoTensor unless with_accuracy
  graph::TensorId router_aux_loss = graph::kNoTensor;  // kNoTensor unless the router loss is added
};

// The name of the router aux loss output (training graphs of MoE models).
inline constexpr const char* kRouterAuxLoss = "router_aux_loss";

DecoderGraph build_decoder_graph(const io::ModelConfig& config, const graph::OpRegistry& registry,
                                 const DecoderGraphOptions& options);

}  // namespace surogate::models
