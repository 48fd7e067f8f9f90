// The two ops of sequence parallelism's attention (DeepSpeed-Ulysses; docs/architecture.md,
// "Sequence parallel"). A sequence group of N ranks holds one micro-batch's T tokens as N
// consecutive slices of T/N; attention needs every token, so its q, k and v change hands before it
// (each rank then holds every token of H/N heads) and its output changes back after it:
//   sequence_to_heads(x [B, T/N, H·D]) -> [B, T, (H/N)·D]    attrs {ranks: N, heads: H, head_dim: D}
//     rank r receives from rank s the tokens [s·T/N, (s+1)·T/N) of heads [r·H/N, (r+1)·H/N).
//   heads_to_sequence(y [B, T, (H/N)·D]) -> [B, T/N, H·D]    the same attrs (H = every head)
//     the inverse: rank r gets back its own tokens of every head group.
// Each is one all-to-all of the group (Communicator::all_to_all): it moves values and adds none,
// so each op is the other's gradient, exactly. H must be a multiple of N (the pass that inserts
// them checks it with a message naming sequence_parallel_size).
//
// The ops need the rank's sequence-group communicator at run time, which an op registry cannot
// know when a plan is compiled: register_sequence_exchange_ops(registry, nullptr) gives the shape
// and gradient rules for planning (binding a CPU kernel from it is an internal error), and each
// rank binds its backend from a registry of its own made with its communicator. CPU kernels run
// F32 (pack, all-to-all, unpack through buffers sized at bind time).
#pragma once

#include "distributed/communicator.h"
#include "graph/op_registry.h"

namespace surogate::distributed {

inline constexpr const char* kSequenceToHeads = "sequence_to_heads";
inline constexpr const char* kHeadsToSequence = "heads_to_sequence";

// `sequence_group` may be null (planning only). It must outlive every backend bound from `registry`.
void register_sequence_exchange_ops(graph::OpRegistry& registry, Communicator* sequence_group);

}  // namespace surogate::distributed
