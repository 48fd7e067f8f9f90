// Prompt sharing's graph pass (data/prompt_sharing.h): the forward graph of a preference micro-batch
// in the shared layout [B, T] (each pair's prompt once) with every attention node run in the
// layout the pairs were packed in, [B, E] (chosen and rejected sequences whole), where its document
// masks keep the two completions apart and let each see the prompt:
//   q_e = gather_rows(q, shared_expand_index, shared_expand_sources)      (and k_e, v_e)
//   out_e, logsumexp = attention(q_e, k_e, v_e, expanded_document_ids)
//   out = gather_rows(out_e, shared_take_index, shared_take_sources)
// Every other node (projections, norms, RoPE at the tokens' own positions, the MLP, the LM head)
// runs on the T shared tokens. The gathers' gradients are gather_rows_sum: a prompt token's k / v
// gradient is the sum of its two copies', its q gradient its first copy's (the second copy's
// output is not taken, so its d_out is zero). New inputs, bound per micro-batch from the batch's
// SharedPromptLayout (train/objective/preference_objective.cpp):
//   expanded_document_ids I32 [B, E], shared_expand_index I32 [B, E], shared_expand_sources I32 [B, T, 2],
//   shared_take_index I32 [B, T], shared_take_sources I32 [B, E, 1].
// The graph's document_ids [B, T] input stays (bound, read by nothing).
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::train {

inline constexpr const char* kExpandedDocumentIds = "expanded_document_ids";
inline constexpr const char* kSharedExpandIndex = "shared_expand_index";
inline constexpr const char* kSharedExpandSources = "shared_expand_sources";
inline constexpr const char* kSharedTakeIndex = "shared_take_index";
inline constexpr const char* kSharedTakeSources = "shared_take_sources";

// `forward`: micro-batches of [batch, shared] tokens; `expanded` ≥ shared.
graph::Graph apply_prompt_sharing(const graph::Graph& forward, const graph::OpRegistry& registry, int64_t batch,
                                  int64_t shared, int64_t expanded);

}  // namespace surogate::train
