// Gradient communication in buckets, overlapped with the backward. A data-parallel rank's gradients
// are one flat buffer (the trainable tensors in the device's order); instead of one reduce-scatter
// of the whole buffer after the last micro-batch (each rank receiving the sums of the tensors it
// steps), the buffer is cut into buckets of whole tensors (about kGradientBucketBytes each, in flat
// order), and each bucket is reduced as soon as the last micro-batch's backward has written the
// last of its gradients: the plan says at which step that is (the last step with one of the
// bucket's gradient tensors as output). The later layers' gradients are complete first, so while
// the backward computes the earlier layers the later buckets travel. Every rank runs the same plan,
// so the buckets are reduced in the same order everywhere.
//
// The schedule is plain data; each device runs it with one step observer (bucket_reduction.h: the
// algorithm written once over Communicator) and its own buffer operations: CPU ranks pack the
// bucket's gradients into the flat buffer and call gloo at once (cpu_gradient_reducer.h: the same
// bucketing logic the GPUs run, tested in CI); GPUs add the micro-batch's bf16 gradients of the
// bucket into the flat accumulators on the compute stream and reduce them on the rank's side
// stream, ordered by an event (cuda_gradient_reducer.h).
// That is ZeRO-1's reduce-scatter in full-size accumulators. ZeRO-2/3 reduce-scatter the same
// buckets during every micro-batch instead, into accumulators of the rank's shard
// (sharded_gradients.h).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "distributed/shard_placement.h"

namespace surogate::train {

// About 32 MiB of fp32 gradients per bucket (PyTorch DDP's default is 25 MB).
inline constexpr size_t kGradientBucketBytes = size_t{32} << 20;

struct GradientBucket {
  size_t first_unit = 0, end_unit = 0;  // the trainable tensors [first_unit, end_unit)
  size_t begin = 0, end = 0;            // their elements [begin, end) of the flat buffer (split: a part of one)
  int ready_step = 0;                   // the last step writing one of their gradients
  std::vector<size_t> piece_counts;     // per rank: its shard's elements within the bucket
  size_t size() const { return end - begin; }
};

struct GradientBuckets {
  std::vector<GradientBucket> buckets;            // in flat order
  std::vector<std::vector<size_t>> ready_after;   // per step of the plan: the buckets complete after it
};

// The buckets' extents alone (no ready steps, no pieces): consecutive runs of whole units, each
// closed once it holds at least `bucket_elements` elements. With `split_units` (ZeRO-2/3, whose
// staging slots hold one bucket: sharded_gradients.h) a unit larger than `bucket_elements` is cut
// into buckets of its own of at most that many elements (an embedding would otherwise size the
// slots), so no bucket reaches 2 × bucket_elements. What plan_gradient_buckets cuts, and what the
// memory estimate sizes the staging by.
std::vector<GradientBucket> cut_gradient_buckets(std::span<const size_t> unit_sizes, size_t bucket_elements,
                                                 bool split_units = false);

// `gradients`: each trainable tensor's gradient in the plan (flat order); `unit_sizes`: its
// elements in the flat buffer (padding included); `shards`: the ranks' shards of the flat
// buffer; `bucket_elements`: a bucket is closed once it holds at least this many elements.
GradientBuckets plan_gradient_buckets(const compiler::ExecutionPlan& plan, std::span<const graph::TensorId> gradients,
                                      std::span<const size_t> unit_sizes, std::span<const distributed::Shard> shards,
                                      size_t bucket_elements, bool split_units = false);

// ZeRO-1's publish in the same buckets (shard_publish.h), overlapped on a GPU with the next step's
// first micro-batch (cuda_publish_overlap.h): per step of `plan`, the buckets it is the first step
// to read a weight of (`weights`: each unit's tensor in the plan, flat order), i.e. the buckets
// whose exchange the micro-batch waits for before that step. A bucket whose weights no step reads
// is waited for before step 0.
std::vector<std::vector<size_t>> publish_waits(const compiler::ExecutionPlan& plan,
                                               std::span<const GradientBucket> buckets,
                                               std::span<const graph::TensorId> weights);

}  // namespace surogate::train
