// The fp8_hybrid recipe as a graph rewrite, run after models::apply_lora on a BF16 (CUDA) or F32
// (CPU emulation) decoder graph. Each projection whose weight is a frozen 2-D parameter under
// "layers." read only as the weight of linear / linear_add nodes (q/k/v/o, gate/up/down of the
// LoRA base), outside the first `skip_first_layers` and last `skip_last_layers` layers, becomes
//   quantize_fp8(x [, state]) -> xq, x_scale_inv       once per x, shared by its projections
//   linear_fp8(x, xq, x_scale_inv, <W>.fp8, <W>.fp8_t, <W>.scale_inv [, bias | addend] [, state])
// (ops/defs/fp8_linear_def.cpp): forward product in E4M3 × E4M3, input gradient in E5M2 (or
// `gradient_format`) × E4M3 through linear_fp8_backward_input. The weight is stored only in FP8:
//   <W>.fp8        F8_E4M3 [out, in]  the weight at its per-tensor scale (448 / amax, exact)
//   <W>.fp8_t      F8_E4M3 [in, out]  the same codes transposed (the backward product's operand)
//   <W>.scale_inv  F32 [1]
// written once as the trainer loads the weight (train/quantized_weights.h): frozen, so one
// quantization serves the whole run. The embeddings, the LM head, norms, attention, the loss and
// the LoRA adapters stay in the graph's dtype.
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
};

graph::Graph apply_fp8_recipe(const graph::Graph& forward, const graph::OpRegistry& registry, const Fp8Options& options);

// The weights `graph` stores in FP8 (WeightFormat::Fp8Tensor), in node order.
std::vector<QuantizedWeight> fp8_weights(const graph::Graph& graph);

// The scaling state of a training graph rewritten with amax_history > 0.
struct Fp8ScalingState {
  std::string name;
  int64_t sites = 0;
  int64_t history = 0;
  int64_t floats() const { return sites * (history + 2); }
};
std::optional<Fp8ScalingState> fp8_scaling_state(const graph::Graph& graph);

}  // namespace surogate::models
