// The MoE block and the router loss as graph ops; see moe_block.h.
#include "models/moe_block.h"

namespace surogate::models {

using graph::TensorId;

graph::TensorId build_moe_block(graph::GraphBuilder& b, const io::MoeConfig& moe, const std::string& prefix,
                                TensorId x, const ParameterLookup& parameter, RouterLoss* router_loss) {
  const nlohmann::json none = nlohmann::json::object();
  auto group = b.recompute_group("ffn");
  const TensorId logits = b.op("linear", {x, parameter(prefix + ".mlp.router.weight")}, none, "router");
  graph::OpOutputs routing = b.op("router_topk", {logits},
                                  {{"top_k", moe.experts_per_token}, {"normalize", moe.normalize_top_k}}, "route");
  const TensorId weights = routing[0], indices = routing[1], probs = routing[2];
  graph::OpOutputs dispatch = b.op("moe_dispatch", {indices}, {{"experts", moe.experts}}, "dispatch");
  const TensorId order = dispatch[0], position = dispatch[1], offsets = dispatch[2];
  const TensorId sorted = b.op("moe_permute", {x, order, position}, none, "permute");
  auto experts = [&](TensorId input, const std::string& projection, const std::string& label) -> TensorId {
    return b.op("expert_linear", {input, parameter(prefix + ".mlp.experts." + projection + ".weight"), offsets}, none,
                label);
  };
  const TensorId gate = experts(sorted, "gate_proj", "experts_gate");
  const TensorId up = experts(sorted, "up_proj", "experts_up");
  TensorId activated;
  {
    auto inner = b.recompute_group("swiglu");
    activated = b.op("swiglu", {gate, up}, none, "experts_swiglu");
  }
  const TensorId down = experts(activated, "down_proj", "experts_down");
  TensorId out = b.op("moe_unpermute", {down, weights, position}, none, "experts_out");
  if (moe.shared_expert_intermediate_size > 0) {
    auto shared = [&](TensorId input, const std::string& projection, const std::string& label) -> TensorId {
      return b.op("linear", {input, parameter(prefix + ".mlp.shared_expert." + projection + ".weight")}, none, label);
    };
    const TensorId shared_gate = shared(x, "gate_proj", "shared_gate");
    const TensorId shared_up = shared(x, "up_proj", "shared_up");
    TensorId shared_activated;
    {
      auto inner = b.recompute_group("swiglu");
      shared_activated = b.op("swiglu", {shared_gate, shared_up}, none, "shared_swiglu");
    }
    const TensorId shared_out = shared(shared_activated, "down_proj", "shared_down");
    const TensorId gate_logit = b.op("linear", {x, parameter(prefix + ".mlp.shared_expert_gate.weight")}, none,
                                     "shared_expert_gate");
    out = b.op("sigmoid_gated_add", {out, shared_out, gate_logit}, none, "moe_out");
  }
  if (router_loss != nullptr) add_router_statistics(b, probs, indices, *router_loss);
  return out;
}

void add_router_statistics(graph::GraphBuilder& b, TensorId probs, TensorId indices, RouterLoss& router_loss) {
  const nlohmann::json none = nlohmann::json::object();
  graph::OpOutputs statistics = b.op("router_statistics", {probs, indices}, none, "router_statistics");
  if (router_loss.layers == 0) {
    router_loss.probability_sum = statistics[0];
    router_loss.counts = statistics[1];
  } else {
    router_loss.probability_sum = b.op("add", {router_loss.probability_sum, statistics[0]}, none, "router_probability_sum");
    router_loss.counts = b.op("add", {router_loss.counts, statistics[1]}, none, "router_counts");
  }
  ++router_loss.layers;
}

graph::TensorId build_router_aux_loss(graph::GraphBuilder& b, const io::MoeConfig& moe, const RouterLoss& router_loss,
                                      int64_t tokens) {
  const double rows = static_cast<double>(router_loss.layers) * static_cast<double>(tokens);
  const double scale = static_cast<double>(moe.experts) / (rows * rows);
  return b.op("router_aux_loss", {router_loss.probability_sum, router_loss.counts}, {{"scale", scale}},
              "router_aux_loss");
}

RouterLossTerms add_router_loss(graph::GraphBuilder& b, const io::MoeConfig& moe, const RouterLoss& router_loss,
                                TensorId lm_loss, int64_t tokens, int64_t micro_batches) {
  RouterLossTerms terms;
  terms.router_aux_loss = build_router_aux_loss(b, moe, router_loss, tokens);
  const double weight = moe.router_aux_loss_coef / static_cast<double>(micro_batches);
  const TensorId weighted = b.op("scale", {terms.router_aux_loss}, {{"factor", weight}}, "router_aux_loss_weighted");
  terms.loss = b.op("add", {lm_loss, weighted}, nlohmann::json::object(), "loss");
  return terms;
}

}  // namespace surogate::models
