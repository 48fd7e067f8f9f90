// offload_residual: the residual stream waits for the backward in host memory instead of the
// activation arena. Its checkpoints (compiler/recompute.h: what recompute keeps of a layer under
// every policy, all that recompute_block keeps) are the one activation that grows with depth once
// the blocks are recomputed; moved out, the arena holds a few layers' worth whatever the depth.
//
// A checkpoint x is moved when the backward reads it, all its backward readers belong to one
// decoder layer L (by scope: the embeddings belong to layer 0, whose ln1 reads them), and L is
// not the layer whose backward comes first (the top one: its checkpoints are read right after
// the forward, where a copy could only be waited for). For each:
//   offload_to_host(x) -> host.<x>         right after x's last forward read; host.<x> lives in the
//                                          plan's host region (memory_plan.h)
//   fetch_from_host(host.<x>) -> fetched.<x>  in the backward, just before the first backward read
//                                          of the layer above L's checkpoints: one layer ahead of
//                                          its own first reader, so the copy overlaps that layer;
//                                          every backward read of x then reads fetched.<x>.
// Both are asynchronous steps (HostTransfers): a backend may run them on a side stream (the CUDA
// backend does, runtime/cuda_host_copies.h; the CPU backend copies at once). A fetch must be
// complete by its first reader; an offload by the last offload of the layer above (its source
// then stays allocated for about one more layer, time for the copy), or, for the last layer
// offloaded, by the first step after the forward, ahead of every fetch.
// The copies move bytes, so the pass changes no value: gradients are bit-identical with and
// without it.
#pragma once

#include <cstddef>

#include "compiler/memory_plan.h"
#include "graph/graph.h"

namespace surogate::compiler {

struct ResidualOffloadResult {
  graph::Graph graph;       // the input's nodes with the copies inserted and backward reads rewired
  HostTransfers transfers;  // host.<x> tensors and the copies' completion steps, for plan_memory
  size_t offloaded_tensors = 0;
  size_t offloaded_layers = 0;
};

// `training_graph`: forward nodes, then backward and recompute nodes (apply_recompute's result).
// Tensor ids stay valid; the copies get new tensors.
ResidualOffloadResult apply_residual_offload(const graph::Graph& training_graph);

}  // namespace surogate::compiler
