// ZeRO-1's weight exchange, written once for every multi-rank device (the CPU and CUDA data-parallel
// and pipeline devices): after each rank of a group stepped the optimizer for its shard (a
// contiguous run of whole units of one flat buffer: distributed::place_shards), the rank's updated
// units go into its piece of the flat buffer, one all-gather over the group gives every rank every
// piece, and each rank takes the other ranks' units back out of it. The backend says how a run of
// units travels between its tensors and the flat buffer, and in which dtype: CPU ranks: fp32
// copies; a GPU replica under ZeRO-1: its bf16 weights, rounded from the fp32 masters the
// optimizer updated into the gradient accumulators' memory (free after the step), half the bytes
// of the masters, copied out of it — the other units' fp32 masters stay behind until a download
// gathers them; a GPU under ZeRO-2 or in a pipeline stage: the flat buffer is the fp32 masters the
// optimizer updates in place, and the bf16 weights are rewritten from them.
//
// ZeRO-1 replicas publish in buckets (publish_shard_in_buckets): the gradient buckets' runs of
// whole units (gradient_buckets.h), each exchanged on its own in flat order, so a GPU can run the
// exchange on its side stream while the next step's first micro-batch waits for each bucket only
// before the step that first reads its weights (cuda_publish_overlap.h). CPU ranks publish in the
// same buckets, so CI runs the GPUs' algorithm.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "core/dtype.h"
#include "distributed/communicator.h"
#include "distributed/shard_placement.h"
#include "train/checkpoint_io.h"
#include "train/device/gradient_buckets.h"

namespace surogate::train {

// The flat buffer a group all-gathers (null: none) and its elements' dtype.
struct PublishedWeights {
  void* data = nullptr;
  DType dtype = DType::F32;
};

// How units [first, end) of the flat buffer travel: `into_flat` (null: the rank's updated units
// already are in the flat buffer) and `from_flat`.
struct ShardCopies {
  std::function<void(size_t first, size_t end)> into_flat;
  std::function<void(size_t first, size_t end)> from_flat;
};

// `flat`: the group's flat buffer of `units` units, in `dtype`, whose piece of rank g holds
// `pieces[g]` elements; `shard`: this rank's units (the piece it publishes). A group of one has
// nothing to exchange: nothing is copied.
void publish_shard(distributed::Communicator& group, void* flat, std::span<const size_t> pieces, DType dtype,
                   const distributed::Shard& shard, size_t units, const ShardCopies& copies);

// The same exchange bucket by bucket, in order: for each of `buckets` (runs of whole units of the
// flat buffer, piece_counts per rank) the rank's units of it go in, the bucket's pieces are
// all-gathered in place and its other units come out; then `published(b)`. A group of one
// exchanges nothing.
void publish_shard_in_buckets(distributed::Communicator& group, void* flat, std::span<const GradientBucket> buckets,
                              DType dtype, const distributed::Shard& shard, const ShardCopies& copies,
                              const std::function<void(size_t bucket)>& published);

// CPU ranks: unit u is `weights[u]`, at `offsets[u]` of the fp32 buffer `flat`.
ShardCopies cpu_shard_copies(std::span<const WeightView> weights, std::span<const size_t> offsets, float* flat);

}  // namespace surogate::train
