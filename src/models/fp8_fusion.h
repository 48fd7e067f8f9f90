// The fp8_hybrid recipe's producer fusion, run by apply_fp8_recipe (models/fp8_recipe.h) on a
// training graph it rewrote with a scaling state: each quantize_fp8 of an input (E4M3, with a
// state row) whose tensor is the main output of rmsnorm, fused_residual_rmsnorm or swiglu is
// folded into that producer, which becomes "<op>_fp8" (ops/defs/fp8_output_def.cpp) with the
// state as its last input and the quantize node's outputs (q, scale_inv) as its last outputs.
// The producer keeps its name, place and recompute group; the tensors keep their ids, so the
// consumers of q are untouched. The result is the same numbers (bit for bit on the CPU, whose
// fused ops run the two steps; on the GPU the quantization becomes the producer kernel's
// epilogue and saves a pass that reads the bf16 tensor).
//
// The attention's output (o_proj's input) likewise becomes attention_fp8's, unless `attention` is
// false (sequence parallelism exchanges it first). Inputs quantized from other producers (a LoRA
// dropout) keep their
// quantize_fp8 node, as do evaluation graphs (no state: each tensor is scaled by its own amax,
// which needs the whole tensor before the first code).
#pragma once

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::models {

// `attention`: the attention's output quantization too (attention_fp8).
graph::Graph fuse_fp8_producers(const graph::Graph& forward, const graph::OpRegistry& registry, bool attention = true);

// The same for the backward, on the training graph autodiff derived (compiler::CompileOptions::
// rewrite_training_graph): a swiglu_backward whose d_gate and d_up each feed exactly one FP8
// product — and no other — becomes swiglu_backward_fp8, which quantizes both gradients at those
// nodes' sites; the two nodes read its codes: linear_fp8_backward_input_quantized for a frozen
// projection (LoRA's base), linear_fp8_backward_quantized(_accumulate) for a trained one (full
// fine-tuning, whose weight gradient takes the same codes). Likewise a norm's (frozen or trained)
// fused_residual_rmsnorm_backward, whose d_input is the o_proj / down_proj output's
// gradient, becomes fused_residual_rmsnorm_backward_fp8, and Qwen3's q / k norm + RoPE backward
// (fused_rmsnorm_rope_backward, frozen or trained weight) quantizes the q / k projection's output
// gradient (fused_rmsnorm_rope_backward_fp8). The bf16 gradients stay (the adapters' backward and
// the residual stream read them). Bit for bit the unfused graph on the CPU.
// Ends with share_fp8_input_transposes.
graph::Graph fuse_fp8_gradients(graph::Graph training);

// Trained projections that read the same input codes (q / k / v, gate / up: full fine-tuning,
// pt) each transposed those codes for their weight gradient (FP8 products take the tokens
// contiguous). One transpose_fp8 node (ops/defs/fp8_transpose_def.cpp), placed before the first
// of them, now makes the transpose they all read with {x_transposed: true}: for Qwen3 three
// transposes of a [tokens, hidden] tensor fewer per layer and micro-batch. Bit for bit the same.
graph::Graph share_fp8_input_transposes(graph::Graph training);

// How many producers `graph` quantizes in their own kernel (its "_fp8" nodes, forward and backward).
int64_t fp8_fused_producer_count(const graph::Graph& graph);

}  // namespace surogate::models
