// Save-vs-recompute planning. Backward nodes read forward activations. For each one, either the
// activation stays alive from forward until its last backward use (saved), or, when the
// recompute group of the node that produced it is enabled, that node is re-emitted (phase
// "recompute") right before the first backward node that needs it, and backward reads the
// copy. Recomputation recurses through inputs that are themselves recomputable; a tensor whose
// producer has no enabled group (e.g. the residual stream between blocks) is a checkpoint and
// is kept. Kernels are deterministic, so gradients are bit-identical with or without recompute.
// The fused residual add + norm (fused_residual_rmsnorm, tagged "rmsnorm") produces the residual
// stream itself: that output stays a checkpoint, and its norm outputs are recomputed by an
// rmsnorm of the kept stream, so the option saves what it saved on the unfused add + rmsnorm.
//
// Groups (Node::recompute_group) and the options that enable them, following the configuration
// hierarchy (block => att, ffn, rmsnorm; att => qkv; ffn => swiglu):
//   "rmsnorm"  recompute_rmsnorm | recompute_block
//   "qkv"      recompute_qkv | recompute_att | recompute_block
//   "att"      recompute_att | recompute_block
//   "swiglu"   recompute_swiglu | recompute_ffn | recompute_block
//   "ffn"      recompute_ffn | recompute_block
//   "block", "block:<layer>"   recompute_block
//   "dequant"  always (a QLoRA weight's dequantized copy, models/qlora.h, is never kept)
//
// block_inputs_only (below) goes one step further: ln2's residual_out, the stream inside a block,
// is recomputed with its fused node, so each block keeps only its input (as gradient
// checkpointing per layer does).
//
// Within the enabled groups, keep_expensive_layers lets the planner keep what is expensive to
// re-run — the outputs of matmuls (linear, linear_add) and attention (its output and log-sum-exp)
// — for the layers [0, keep_expensive_layers) and recompute only the cheap ops around them
// (norms, RoPE, SwiGLU, dropout, concat / split). compiler/recompute_choice.h picks the largest
// count whose plan fits the device; 0 recomputes everything the options enable.
// keep_all_layers goes the other way from there: the layers [0, keep_all_layers) keep every
// output, cheap ones included, so nothing of theirs is re-run (a quantized weight's dequantized
// copy excepted); the choice uses it when every layer's expensive outputs fit with memory to spare.
// keep_attention_layers keeps attention's outputs alone (its output and log-sum-exp) in the layers
// [0, keep_attention_layers) when the rest of them is recomputed: the backward then re-runs the
// products and norms that give attention its inputs but not attention itself. Over documents of S
// tokens attention's forward costs about S FLOPs per byte it writes, a product about its input
// width (the hidden size), so at long context this is the cheapest memory to keep; the choice
// spends on it what its other tiers leave.
#pragma once

#include <string>
#include <string_view>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::compiler {

// The recompute_* options of the run configuration, as the planner needs them.
struct RecomputePolicy {
  bool rmsnorm = false;
  bool qkv = false;
  bool att = false;
  bool swiglu = false;
  bool ffn = false;
  bool block = false;
  int64_t keep_expensive_layers = 0;
  int64_t keep_all_layers = 0;
  int64_t keep_attention_layers = 0;
  // With `block`: the residual stream inside each block (ln2's residual_out, after attention) is
  // recomputed too, by re-running ln2's fused add + norm from the block's input and the
  // recomputed attention half; only each block's input stays a checkpoint. Saves one hidden-size
  // tensor per token and layer for an extra o_proj product and add per layer in the backward (the
  // attention forward is recomputed either way once matmuls and attention are). The choice's last
  // tier (compiler/recompute_choice.h).
  bool block_inputs_only = false;

  bool recomputes(std::string_view group) const;
  bool any() const { return rmsnorm || qkv || att || swiglu || ffn || block; }
  // Whether the outputs of `producer` (a forward node of an enabled group) stay saved.
  bool keeps_outputs_of(const graph::Node& producer) const;
  static RecomputePolicy none() { return {}; }
  static RecomputePolicy all() { return {true, true, true, true, true, true}; }
};

// Matmuls and attention: re-running them costs real compute (see keep_expensive_layers).
bool is_expensive_to_recompute(std::string_view op);
// Attention (bf16 or fp8_hybrid's): what keep_attention_layers keeps.
bool is_attention(std::string_view op);
// The decoder layer a node belongs to, from its scope ("layers.3.q" → 3; the backward's
// "grad.layers.3.…" and recompute's "recompute.layers.3.…" too); -1 outside the layers.
int64_t layer_of(const graph::Node& node);
// Whether forward activation `id` is a checkpoint: kept under every policy, because its producer
// is untagged (the embeddings, the final norm) or it is the residual stream a
// fused_residual_rmsnorm writes. What stays of a layer under recompute_block.
bool is_checkpoint(const graph::Graph& graph, graph::TensorId id);
// `base`, or `base.2`, `base.3`, ... : the first that names no tensor of `graph` (for the copies a
// pass adds: "recompute.<x>", "host.<x>").
std::string unique_tensor_name(const graph::Graph& graph, const std::string& base);

struct RecomputeResult {
  graph::Graph graph;  // nodes in execution order: forward, then backward with recompute nodes interleaved
  size_t recomputed_nodes = 0;
};

// `training_graph` holds forward nodes (phase forward) followed by backward nodes. Tensor ids
// of the input graph stay valid in the result; recompute copies get new tensors.
RecomputeResult apply_recompute(const graph::Graph& training_graph, const RecomputePolicy& policy);

}  // namespace surogate::compiler
