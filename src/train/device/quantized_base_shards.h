// ZeRO-3 and the quantized base (persistent_quants, offload_quants): where the pieces a device
// writes itself for a quantized frozen base (QLoRA's NF4 / FP8-block / NVFP4 codes and scales, the
// FP8 copies of a frozen base under fp8_hybrid with LoRA: models/quantized_weight.h) stay between
// the steps that read them. Decided here once for the data-parallel ranks (parallel/cpu_rank_host.cpp,
// cuda_rank_host.cpp), their evaluators and the memory estimate (memory_budget.h).
//
//   Sharded (shard_weights alone, the default): the pieces are placed over the ranks by their
//     bytes (distributed::place_shards, in tensor order: a rank keeps whole pieces) and each
//     layer's pieces are gathered before use as one byte group (compiler/weight_gathering.h,
//     as_bytes), one use ahead, as the bf16 weights are: per-rank memory falls with the world size.
//   Whole (persistent_quants): every rank keeps the whole quantized base in its parameter region,
//     as without ZeRO-3: the most memory, no traffic.
//   Offloaded (persistent_quants + offload_quants): the whole quantized base lives in one host
//     image per process (pinned on GPUs), laid out as a world of one's owned buffer, and each
//     layer's pieces are copied from it into the gather buffers a use ahead: the device holds only
//     the buffers of the layers in flight.
// The pieces are the same bytes in every mode (quantized once, on the host, by the trainer), so
// the three give the same numbers bit for bit.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "compiler/weight_gathering.h"
#include "config/sections/offload.h"
#include "models/quantized_weight.h"
#include "train/quantized_weights.h"

namespace surogate::train {

enum class QuantizedBaseKeeping { Sharded, Whole, Offloaded };

// How a ZeRO-3 run keeps its quantized base (above), from persistent_quants and offload_quants.
QuantizedBaseKeeping quantized_base_keeping(const config::Offload& offload);

// The parameters that hold the quantized base (every piece of models::quantized_weights), in
// tensor order.
std::vector<graph::TensorId> quantized_base_pieces(const compiler::ExecutionPlan& plan);

// The byte-gather schedule of the quantized base of `plan` over `world_size` ranks: Sharded: the
// pieces placed over the ranks by their bytes; Offloaded: a world of one (rank 0: the host image);
// Whole, or a plan without a quantized base: empty. Make it on the plan the bf16 weights'
// gathering was applied to, and apply it after (its region follows theirs in the arena).
compiler::WeightGathering quantized_base_gathering(const compiler::ExecutionPlan& plan, QuantizedBaseKeeping keeping,
                                                   int world_size);

// The rank (Sharded) or the host image (Offloaded: keeper 0) whose owned bytes of the quantized
// base `owned` points at: gathering->owned_elements[keeper] bytes, in host or device memory.
struct QuantizedBaseShard {
  const compiler::WeightGathering* gathering = nullptr;
  int keeper = 0;
  std::byte* owned = nullptr;

  size_t bytes() const { return gathering->owned_elements[static_cast<size_t>(keeper)]; }
  // The keeper's piece of group `g`, and its length in bytes.
  std::byte* piece(size_t g) const;
  size_t piece_bytes(size_t g) const;
  // Where `tensor` lies in `owned`, or nullopt when another rank keeps it.
  std::optional<size_t> offset_of(graph::TensorId tensor) const;
  // The pieces of `weight` this keeper keeps, each handed to `write` with its offset in `owned`
  // (store_quantized: `write` copies into host or device memory).
  void keep(const compiler::ExecutionPlan& plan, const models::QuantizedWeight& weight, const QuantizedPieces& pieces,
            const std::function<void(size_t offset, std::span<const std::byte> bytes)>& write) const;
};

// A byte group's pieces as the 2-byte elements its all-gather moves (Communicator::all_gather
// takes F32 or BF16; a byte group's pieces are multiples of kGatherAlignmentBytes).
std::vector<size_t> byte_group_piece_counts(const compiler::GatherGroup& group);

// What the quantized base takes, per rank, under `keeping` on a world of `world_size`: on the
// device (its largest rank's owned bytes, or the whole when Whole; 0 when Offloaded), the gather
// buffers, and the host image (Offloaded: the whole base, once per process).
struct QuantizedBaseMemory {
  size_t device = 0, gathered = 0, host = 0;
};
QuantizedBaseMemory quantized_base_memory(const compiler::ExecutionPlan& plan, QuantizedBaseKeeping keeping,
                                          int world_size);

}  // namespace surogate::train
