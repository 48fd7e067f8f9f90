// The fp8_hybrid recipe as a graph rewrite, run after models::apply_lora (and
// models::apply_qlora_quantization) on a BF16 (CUDA) or F32 (CPU emulation) decoder graph. Each
// projection whose weight is a 2-D tensor under "layers." read only as the weight of linear /
// linear_add nodes (q/k/v/o, gate/up/down), outside the first `skip_first_layers` and last
// `skip_last_layers` layers, becomes
//   quantize_fp8(x [, state]) -> xq, x_scale_inv       once per x, shared by its projections
//   linear_fp8(x, xq, x_scale_inv, <W>.fp8, <W>.fp8_t, <W>.scale_inv [, bias | addend] [, state] [, W])
// (ops/defs/fp8_linear_def.cpp): forward product in E4M3 × E4M3, input gradient in E5M2 (or
// `gradient_format`) × E4M3, weight gradient (trained weights) in E5M2 × E4M3. The weight's FP8
// form, per-tensor E4M3 at scale 448 / amax (ops/fp8_tensor.h):
//   <W>.fp8        F8_E4M3 [out, in]  the codes
//   <W>.fp8_t      F8_E4M3 [in, out]  the same codes transposed (the backward products' operand)
//   <W>.scale_inv  F32 [1]
// depends on where W comes from:
//   - a frozen parameter (the LoRA base): W is stored only in FP8 (its tensor becomes <W>.fp8),
//     written once as the trainer loads the weight (train/quantized_weights.h);
//   - a trainable parameter (full fine-tuning, pt): W stays a parameter in the graph's dtype (what
//     the optimizer updates and linear_fp8's gradient flows to) and the three pieces are frozen
//     parameters beside it, its FP8 copy, which the training device rewrites from W after every
//     optimizer step (train/fp8_weight_copies.h): once per step, not per micro-batch;
//   - QLoRA's dequantized base (a tensor computed by dequantize_nf4 / dequantize_fp8_blocks): a
//     quantize_fp8_weight node right after the dequantization, in its recompute group ("dequant"),
//     writes <W>.e4m3, <W>.e4m3_t and <W>.e4m3.scale_inv per micro-batch (the base is frozen, but
//     a stored FP8 copy would cost the memory QLoRA saves).
// The embeddings, the LM head, norms, attention, the loss and the LoRA adapters stay in the
// graph's dtype.
//
// With a state, an input that rmsnorm, fused_residual_rmsnorm or swiglu produces is quantized by
// that op itself ("<op>_fp8", models/fp8_fusion.h) instead of a quantize_fp8 node.
//
// Scaling of activations and gradients: with amax_history > 0 (training graphs) every quantized
// tensor is a site of the one state tensor "fp8.scaling" F32 [sites, 2 + amax_history], a frozen
// parameter that the training device zeroes, rolls after each optimizer step and checkpoints
// (quant/fp8_scaling.h); with amax_history 0 (evaluation graphs) each tensor is scaled by its own
// amax and the graph has no state and no gradient.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "models/quantized_weight.h"
#include "quant/fp8.h"

namespace surogate::models {

inline constexpr const char* kFp8ScalingState = "fp8.scaling";

struct Fp8Options {
  int64_t layers = 0;               // the model's layer count
  int64_t skip_first_layers = 0;    // skip_quant_first_layers
  int64_t skip_last_layers = 0;     // skip_quant_last_layers
  int64_t amax_history = 1024;      // fp8_amax_history; 0: current scaling, no state (evaluation)
  quant::Fp8Format gradient_format = quant::Fp8Format::E5M2;  // gradient_dtype
  // Whether trainable weights are quantized (full fine-tuning, pt). False with LoRA: the graph's
  // trainable 2-D weights are then the adapters, which stay in the graph's dtype.
  bool trained_weights = true;
  // Fold each input's quantization into the rmsnorm / swiglu that produces it (models/fp8_fusion.h;
  // training graphs, amax_history > 0). Off only in tests that compare the two forms.
  bool fuse_producers = true;
  // The attention's too (its output, o_proj's input). Off under sequence parallelism, whose
  // exchange after the attention gives o_proj another layout (distributed/sequence_parallel_graph.h;
  // config/feature_support.cpp refuses sequence_parallel_size with fp8_hybrid today).
  bool fuse_attention = true;
};

graph::Graph apply_fp8_recipe(const graph::Graph& forward, const graph::OpRegistry& registry, const Fp8Options& options);

// The frozen weights `graph` stores in FP8 (WeightFormat::Fp8Tensor), in node order.
std::vector<QuantizedWeight> fp8_weights(const graph::Graph& graph);

// A trained weight and the frozen parameters of its FP8 copy, by name.
struct Fp8TrainedWeight {
  std::string weight, codes, transposed, scale_inv;
};
// The trained weights `graph` keeps an FP8 copy of, in node order.
std::vector<Fp8TrainedWeight> fp8_trained_weights(const graph::Graph& graph);

// The projections `graph` runs in FP8 (its forward linear_fp8 nodes).
int64_t fp8_projection_count(const graph::Graph& graph);

// The scaling state of a training graph rewritten with amax_history > 0.
struct Fp8ScalingState {
  std::string name;
  int64_t sites = 0;
  int64_t history = 0;
  int64_t floats() const { return sites * (history + 2); }
};
std::optional<Fp8ScalingState> fp8_scaling_state(const graph::Graph& graph);

}  // namespace surogate::models
