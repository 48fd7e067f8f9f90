// GRPO's loss graph: the LM head's weighted cross-entropy (grpo_window.h), at TRL's scoring
// temperature. TRL scores a completion with log_softmax(logits / temperature); the logits are
// hidden · headᵀ, so dividing the hidden state that enters the LM head by the temperature (the
// core op "scale", on both backends) gives logits / temperature, and its gradient the 1 /
// temperature of TRL's. Temperature 1 leaves the graph as it is.
#pragma once

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::train {

inline constexpr const char* kGrpoScoredHidden = "grpo_scored_hidden";

// The LM head's cross-entropy may be a term of `loss` (a mixture-of-experts model's router loss is
// added after it, unscaled). UserError when the graph has no lm_head_loss node, or several.
graph::Graph apply_grpo_temperature(graph::Graph forward, graph::TensorId loss, double temperature);

}  // namespace surogate::train
