// The sequence-parallel graph pass: the forward graph of one micro-batch [B, T] turned into the
// graph each rank of a sequence group of N runs on its slice of T/N tokens (docs/architecture.md,
// "Sequence parallel"). Every op of a decoder but attention works token by token, so the pass only
// retypes: the token inputs (input_ids, position_ids, targets, loss_weights: every [B, T] input
// that is not read as attention's document ids) become [B, T/N] and every node's outputs are
// inferred again. Each attention node becomes
//   sequence_to_heads(q), (k), (v) → attention over all T tokens of H/N heads → heads_to_sequence
// (distributed/sequence_exchange_ops.h), reading the whole micro-batch's document ids [B, T], which
// stay an input of full length: packed documents keep their masks across the slices. Position ids
// are the slice of the packed row's, so RoPE sees the global positions; RoPE frequencies were fixed
// when the graph was built for T. Tensor names are kept, so parameters, inputs and the loss are
// found as in the graph given. Rank s of the group is fed tokens [s·T/N, (s+1)·T/N) of every row.
//
// Refused with a UserError naming sequence_parallel_size: T not a multiple of N, query or key/value
// heads not a multiple of N, and a graph with an op that mixes tokens other than attention (only
// the decoder's per-token ops are known to be safe: fp8_hybrid's quantizers take one amax over all
// tokens, so that recipe is refused earlier, in config/feature_support.cpp).
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::distributed {

// `registry` must hold the exchange ops (register_sequence_exchange_ops). ranks == 1 returns the
// graph unchanged.
graph::Graph apply_sequence_parallel(const graph::Graph& forward, const graph::OpRegistry& registry, int64_t ranks);

}  // namespace surogate::distributed
