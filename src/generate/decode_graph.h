// The decode graph: a model's forward graph turned into one step of generation over a KV cache.
//
// From the forward graph of a [B, T] batch (the built-in builder or a DSL IR, any dtype, LoRA
// applied unmerged — models/session_loading.h), for B rows of T new tokens each:
//   * every "attention" node becomes "cached_attention" (ops/defs/cached_attention_def.cpp) over
//     the same q / k / v and attrs (window, scale, heads): its keys and values go into the layer's
//     cache "layers.{i}.k_cache" / "layers.{i}.v_cache" [slots, capacity, Hkv, D] (q's dtype),
//     and it attends over everything its slot holds;
//   * the caches are CONSTANTS of the graph: persistent tensors of the plan's Parameters region,
//     zeroed when a backend loads it, never in the activation arena, never rewritten by the caller
//     per execute — the op writes them in place. Two plans of the same model with the same
//     [slots, capacity] name them alike, so a backend that shares parameters with another
//     (Cpu/CudaBackend::share_parameters_with) shares the caches with them as it does the weights;
//   * new inputs I32 [B]: slot_ids, cache_lengths (what each row's slot holds before this step),
//     new_lengths (its real new tokens, the rest of the row padding). The caller writes
//     position_ids = cache_length + t for real tokens; document_ids, where the graph still reads
//     them, are 0 (one document) for real tokens and 1 for padding;
//   * the loss goes (lm_head_loss and whatever only it reads: targets, loss_scale, the router's
//     aux loss), and the output is "logits" = linear(hidden, head) on the loss node's two inputs,
//     as ModelSession computes them, but only at each row's last real token: [B, 1, V] when
//     T = 1; for T > 1 the rows are gathered first (moe_permute with k = 1 by the input
//     "last_rows" I32 [B·T], whose first B entries are b·T + new_lengths[b] − 1, then the first
//     B rows split off), so the head's product and the read-back cost B·V, not B·T·V;
//     "last_row_positions" I32 [B, T, 1] is the permute's position input, which its forward never
//     reads (any values).
// Nodes nothing needs any more (the loss's, document masking's) are dropped; every parameter
// stays, so the checkpoint loads by name as into the training graph.
// UserError naming the definition: a graph without attention nodes, a loss that is not
// lm_head_loss.
#pragma once

#include <cstdint>
#include <string>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::generate {

struct DecodeShape {
  int64_t slots = 1;     // N: sequences the caches hold
  int64_t capacity = 1;  // S: positions per slot (the context)
};

// The inputs of every row, I32 [B].
inline constexpr const char* kSlotIds = "slot_ids";
inline constexpr const char* kCacheLengths = "cache_lengths";
inline constexpr const char* kNewLengths = "new_lengths";

// The number of cache layers of a decode graph (its cached_attention nodes).
int64_t cache_layers(const graph::Graph& decode);

// The gather's inputs (T > 1 only), and the output: [B, V], or [B, 1, V] when T = 1.
inline constexpr const char* kLastRows = "last_rows";
inline constexpr const char* kLastRowPositions = "last_row_positions";
inline constexpr const char* kDecodeLogits = "logits";

// The greedy choice of each row (ops/defs/greedy_tokens_def.cpp), I32 [B] ([B, 1] when T = 1).
inline constexpr const char* kDecodeGreedyTokens = "greedy_tokens";

// `forward` is the forward graph of a [B, T] batch (its input_ids give B and T); `source` names
// the definition in errors.
graph::Graph build_decode_graph(const graph::Graph& forward, const graph::OpRegistry& registry,
                                const DecodeShape& shape, const std::string& source);

// A decode graph with a second output after its logits: greedy_tokens(logits), so that a round
// whose every row is greedy copies back the ids alone (generate/kv_cache_model.cpp).
graph::Graph add_greedy_tokens(graph::Graph decode, const graph::OpRegistry& registry);

}  // namespace surogate::generate
