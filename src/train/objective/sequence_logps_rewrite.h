// The rewrite DPO's and GRPO's loss graphs share: the forward graph's LM-head cross-entropy node
//   lm_head_loss(hidden, head, targets, scale[, weights]) -> (loss, logsumexp)
// turned into
//   sequence_logps(hidden, head, targets, sequence_ids){sequences} -> (logps, logit_sums, logsumexp)
// in place (ops/preference_logps.h): the tensor `loss` becomes the logps [sequences] (renamed), its
// dtype kept (the statistic dtype), and a logit_sums tensor is added.
#pragma once

#include <cstdint>
#include <string>

#include "graph/graph.h"

namespace surogate::train {

// `loss`'s producer must be lm_head_loss (the caller checks, naming its mode). Returns the
// logit_sums tensor.
graph::TensorId rewrite_to_sequence_logps(graph::Graph& forward, graph::TensorId loss, graph::TensorId sequence_ids,
                                          int64_t sequences, const std::string& logps_name,
                                          const std::string& logit_sums_name);

}  // namespace surogate::train
