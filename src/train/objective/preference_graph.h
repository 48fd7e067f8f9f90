// The preference objective's graph: the decoder's forward graph with its LM-head cross-entropy
// (lm_head_loss) replaced by per-sequence completion log-probabilities and the preference loss:
//   policy_logps, policy_logit_sums, logsumexp = sequence_logps(hidden, head, targets, sequence_ids)
//   loss = preference_loss(policy_logps, reference_logps, sequence_lengths, preference_labels, preference_scales)
// New inputs, written per micro-batch of B pairs (preference_objective.cpp):
//   sequence_ids I32 [B, T]        the sequence each target belongs to: row r's chosen r, rejected B + r, −1 none
//   reference_logps F32 [2B]       the reference model's summed completion log-probs (0 when not used)
//   sequence_lengths F32 [2B]      completion tokens per sequence (0: a padding row)
//   preference_labels F32 [B]      KTO's desirable flags (0 otherwise)
//   preference_scales F32 [2]      1 / pairs and 1 / chosen tokens of the window (ops/preference_loss.h)
// policy_logps and policy_logit_sums are graph outputs: the objective reads them after each micro-batch.
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "ops/preference_loss.h"
#include "train/objective/training_objective.h"

namespace surogate::train {

inline constexpr const char* kPolicyLogps = "policy_logps";
inline constexpr const char* kPolicyLogitSums = "policy_logit_sums";
inline constexpr const char* kSequenceIds = "sequence_ids";
inline constexpr const char* kReferenceLogps = "reference_logps";
inline constexpr const char* kSequenceLengths = "sequence_lengths";
inline constexpr const char* kPreferenceLabels = "preference_labels";
inline constexpr const char* kPreferenceScales = "preference_scales";

// `loss` is the forward graph's loss, which must be lm_head_loss's output (a UserError otherwise:
// a model whose loss adds other terms, the MoE router loss, cannot be preference-tuned yet).
ObjectiveGraph apply_preference_loss(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry,
                                      const ops::PreferenceLossOptions& options, int64_t batch, int64_t sequence);

}  // namespace surogate::train
