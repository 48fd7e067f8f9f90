// The mixture-of-experts feed-forward block of Qwen2-MoE, Qwen3-MoE and Mixtral as graph ops
// (ops/defs/moe_*_def.cpp, expert_linear_def.cpp), called by models/decoder_graph.cpp for every
// sparse layer in place of the dense MLP:
//
//   logits  = linear(x, router)                         [B, T, E]      (HF: mlp.gate)
//   weights, indices, probs = router_topk(logits){k, normalize}
//   order, position, offsets = moe_dispatch(indices){E}  tokens sorted by expert
//   sorted  = moe_permute(x, order, position)            [B·T·k, H]
//   up/gate = expert_linear(sorted, experts.{gate,up}_proj, offsets) → swiglu → expert_linear(down)
//   out     = moe_unpermute(down, weights, position)     [B, T, H]   Σ_j w_j · expert_j(x)
//   Qwen2-MoE: out = sigmoid_gated_add(out, shared_expert(x), linear(x, shared_expert_gate))
//
// The router statistics of every sparse layer are summed for the load-balancing loss
// (RouterLoss), which the decoder adds to the language-model loss when config.json sets
// output_router_logits (transformers' load_balancing_loss_func, docs/models.md).
// Recompute groups: the router and dispatch in "ffn", the swiglu in "swiglu", as the dense MLP.
#pragma once

#include <functional>
#include <string>

#include "graph/builder.h"
#include "io/model_config.h"

namespace surogate::models {

// The summed router statistics of the sparse layers built so far.
struct RouterLoss {
  graph::TensorId probability_sum = graph::kNoTensor;  // [E], Σ over layers and tokens of the probabilities
  graph::TensorId counts = graph::kNoTensor;           // [E], Σ over layers of the top-k assignments
  int64_t layers = 0;
};

using ParameterLookup = std::function<graph::TensorId(const std::string& name)>;

// The MoE block of layer `prefix` ("layers.3") on the normalised hidden states `x` [B, T, H].
graph::TensorId build_moe_block(graph::GraphBuilder& builder, const io::MoeConfig& moe, const std::string& prefix,
                                graph::TensorId x, const ParameterLookup& parameter, RouterLoss* router_loss);

// Adds one sparse layer's router_statistics(probs, indices) (router_topk's third and second outputs)
// to the sums, in the builder's current scope and recompute group.
void add_router_statistics(graph::GraphBuilder& builder, graph::TensorId probs, graph::TensorId indices,
                           RouterLoss& router_loss);

// transformers' load-balancing loss from the summed statistics of `tokens` tokens per layer:
// E · Σ_e (counts_e / (L·N)) · (probability_sum_e / (L·N)), an F32 scalar named
// "router_aux_loss".
graph::TensorId build_router_aux_loss(graph::GraphBuilder& builder, const io::MoeConfig& moe,
                                      const RouterLoss& router_loss, int64_t tokens);

struct RouterLossTerms {
  graph::TensorId loss = graph::kNoTensor;             // "loss" = lm_loss + weighted router_aux_loss
  graph::TensorId router_aux_loss = graph::kNoTensor;  // "router_aux_loss", unweighted
};

// The training loss of a micro-batch: lm_loss + router_aux_loss_coef · router_aux_loss / micro_batches
// (nodes "router_aux_loss", "router_aux_loss_weighted", "loss"), as models/decoder_graph.h describes.
RouterLossTerms add_router_loss(graph::GraphBuilder& builder, const io::MoeConfig& moe, const RouterLoss& router_loss,
                                graph::TensorId lm_loss, int64_t tokens, int64_t micro_batches);

}  // namespace surogate::models
