// ZeRO-3 (shard_weights): each rank keeps only its shard of the weights between uses, and the
// full weights of a layer are gathered just before the steps that read them and released after.
// This pass turns that into data a backend can run, as the memory plan turns liveness into
// offsets: which weights go together (a group: the weights of one decoder layer, "layers.3.*",
// LoRA adapters included, or one weight outside the layers), during which stretches of steps
// each group must be present (its uses), when each gather starts (prefetch: one use ahead), and
// where each group's buffer lies. The weights leave the plan's parameter region; their
// placements point into gather buffers appended to the activation arena, so the steps, the
// kernels bound to them and the backends' allocation are unchanged. The backend calls a step
// observer (runtime/step_observer.h) around the steps, and the training device's observer
// moves the bytes (gloo on CPU ranks, NCCL on a side stream on GPUs): the schedule is the same
// data on every backend, so the CPU ranks test it exactly.
//
// Uses: a group's reads split into maximal runs of steps in which no other group's weight is
// read (a layer's forward is one use, its recompute and backward another; the LM head's forward
// and the start of the backward are one). Uses are ordered by their first step; use k's gather
// is issued before the first step of use k − 1 (use 0's before its own first step), so the
// next layer's weights arrive while this one computes, and must be complete before use k's
// first step. A group's buffer is busy from the issue of a use to its last step: two groups
// share memory only when no busy stretch of one overlaps one of the other (first fit, largest
// groups first), so layers alternate between two buffers and the region is about two layers
// (plus the embedding when the head reuses it). When a group's next use would be issued before
// its previous use ends, the two are one use: the weights are still there.
//
// Buffer layout: a group's weights back to back ordered by the rank that keeps them (each start
// rounded up to kGatherAlignmentElements), so rank r's weights of the group are one contiguous
// piece — exactly what an all-gather with uneven pieces (distributed/communicator.h) fills in
// place. A rank keeps its pieces of every group, in group order, as one buffer with the same
// layout (owned_offset).
//
// Bytes (as_bytes): the quantized base's pieces (codes, scales, absmax: several dtypes in one
// layer) are gathered as raw bytes, a group's dtype U8 and its sizes in bytes, each start rounded
// up to kGatherAlignmentBytes, so one layer's pieces are one group and one all-gather
// (train/device/quantized_base_shards.h).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"

namespace surogate::compiler {

// Each weight's start in a buffer is a multiple of this many elements: 256 bytes for bf16 (512
// for fp32), the alignment the parameter region gives, so cuBLASLt picks the same algorithms for
// a gathered weight as for a resident one (it takes the operands' alignment up to 256 bytes).
inline constexpr size_t kGatherAlignmentElements = 128;
// The same alignment for a byte group: 256 bytes, as the parameter region places the pieces (so the
// kernels reading a gathered piece see the alignment a resident one has). Every piece count of a
// byte group is then a multiple of it, so its all-gather can move it as 2-byte elements.
inline constexpr size_t kGatherAlignmentBytes = 256;

struct ShardedWeight {
  graph::TensorId tensor = graph::kNoTensor;
  int owner = 0;  // the rank that keeps it between uses
};

struct GatherGroup {
  std::string name;                      // "layers.3", or the weight's own name outside the layers
  DType dtype = DType::F32;              // every weight of a group has the same dtype (U8: a byte group)
  std::vector<graph::TensorId> tensors;  // buffer order: by owner, then as given
  std::vector<int> owners;               // per tensor
  std::vector<size_t> tensor_offsets;    // per tensor: elements from the buffer's start
  std::vector<size_t> piece_offsets;     // world_size + 1 bounds: rank r's piece is [r, r + 1) (elements)
  size_t elements = 0;                   // the buffer, padding included
  size_t offset = 0;                     // bytes from the gather region's start
  std::vector<size_t> owned_offsets;     // per rank: elements into that rank's owned buffer
  size_t bytes() const { return elements * dtype_size_bytes(dtype); }
  // The pieces' element counts, one per rank (Communicator::all_gather's piece_counts).
  std::vector<size_t> piece_counts() const;
};

struct GatherUse {
  size_t group = 0;
  int first_step = 0, last_step = 0;  // the steps reading the group's weights, first and last
  int issue_step = 0;                 // the gather is issued before this step
};

struct WeightGathering {
  int world_size = 1;
  std::vector<GatherGroup> groups;
  std::vector<GatherUse> uses;  // by first step
  size_t region_offset = 0;     // bytes into the arena where the gather buffers start
  size_t region_bytes = 0;
  // Per step of the plan: the uses whose gather is issued before it, that must be complete
  // before it, and whose last step it is (their buffer may be reused after it).
  std::vector<std::vector<size_t>> issue_before, wait_before, release_after;
  std::vector<size_t> owned_elements;  // per rank: its pieces of every group together

  bool empty() const { return groups.empty(); }
  // The largest owned buffer of any rank, in bytes (the groups' dtypes may differ).
  size_t largest_owned_bytes() const;
  // Where a tensor lies: its group and place in it; SUROGATE_CHECK that it is gathered.
  struct Location {
    size_t group = 0, index = 0;
  };
  Location locate(graph::TensorId tensor) const;
};

// The group a weight belongs to: "layers.<n>" for a name under a decoder layer, else the name.
std::string gather_group_name(const std::string& weight_name);

// The schedule for `weights` (parameters of `plan`, each kept by one of `world_size` ranks), as
// above. Every weight must be read by some step (an unread parameter needs no gather). `as_bytes`:
// every group is a byte group (above), whatever its tensors' dtypes.
WeightGathering schedule_weight_gathering(const ExecutionPlan& plan, std::span<const ShardedWeight> weights,
                                          int world_size, bool as_bytes = false);

// Moves the schedule's weights out of the parameter region (the others are packed again) into
// their gather buffers, appended to the arena at region_offset; the steps' placements follow.
void apply_weight_gathering(ExecutionPlan& plan, const WeightGathering& gathering);

}  // namespace surogate::compiler
