// What a plan's recomputation costs, in FLOPs: the measure the recompute choice compares plans that
// fit by (compiler/recompute_choice.h). Counted are the re-run products (linear, linear_add,
// linear_fp8, expert_linear: 2 · outputs · the input's width) and attention (2 · outputs · the
// span, below); norms, RoPE, SwiGLU and the other passes a recompute re-runs cost bandwidth, not
// FLOPs, and are left out. A FLOP of attention and one of a product are counted alike (on an
// H200, attention runs at 0.6–0.9 of the products' rate, which only favours keeping attention more).
#pragma once

#include <cstdint>

#include "graph/graph.h"

namespace surogate::compiler {

// The forward FLOPs of the graph's recompute-phase nodes. `attention_span`: Σ ℓ² over the
// documents / tokens (data/packing.h's attention_span: a row that is one document gives the row's
// length); causal attention's forward is 2 · its output's elements · that span, a sliding window
// of W tokens capping the span at 2 · W; 0 takes documents as long as the rows.
double recompute_flops(const graph::Graph& graph, int64_t attention_span);

}  // namespace surogate::compiler
