// ZeRO-2/3's sharded gradient accumulators; see sharded_gradients.h.
#include "train/device/sharded_gradients.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace surogate::train {

BucketPiece owned_piece(const GradientBucket& bucket, const distributed::Shard& shard) {
  return {std::clamp(shard.begin, bucket.begin, bucket.end), std::clamp(shard.end, bucket.begin, bucket.end)};
}

size_t largest_bucket_elements(std::span<const GradientBucket> buckets) {
  size_t largest = 0;
  for (const GradientBucket& bucket : buckets) largest = std::max(largest, bucket.size());
  return largest;
}

size_t sharded_accumulator_elements(std::span<const size_t> unit_sizes, int ranks, size_t bucket_elements,
                                    int staging_slots) {
  size_t largest_shard = 0;
  for (const distributed::Shard& shard : distributed::place_shards(unit_sizes, ranks)) {
    largest_shard = std::max(largest_shard, shard.size());
  }
  const std::vector<GradientBucket> buckets = cut_gradient_buckets(unit_sizes, bucket_elements);
  return largest_shard + static_cast<size_t>(staging_slots) * largest_bucket_elements(buckets);
}

CpuShardedGradients::CpuShardedGradients(const GradientBuckets& buckets, std::vector<std::span<float>> gradients,
                                         const distributed::Shard& shard, distributed::Communicator& communicator)
    : buckets_(buckets), gradients_(std::move(gradients)), shard_(shard), communicator_(communicator),
      accumulators_(shard.size(), 0.0f), staging_(largest_bucket_elements(buckets.buckets), 0.0f) {
  size_t offset = 0;
  for (const std::span<float> gradient : gradients_) {
    offsets_.push_back(offset);
    offset += gradient.size();
  }
  SUROGATE_CHECK(buckets_.buckets.empty() || buckets_.buckets.back().end == offset,
                 "the buckets cover the gradients' flat buffer");
}

void CpuShardedGradients::after_step(size_t step) {
  for (size_t b : buckets_.ready_after[step]) {
    const GradientBucket& bucket = buckets_.buckets[b];
    // This micro-batch's gradients of the bucket, which leave the plan's tensors zeroed for the
    // next micro-batch's backward to add into.
    for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) {
      std::ranges::copy(gradients_[unit], staging_.begin() + static_cast<std::ptrdiff_t>(offsets_[unit] - bucket.begin));
      std::ranges::fill(gradients_[unit], 0.0f);
    }
    communicator_.reduce_scatter_sum(staging_.data(), bucket.piece_counts, DType::F32);
    const BucketPiece piece = owned_piece(bucket, shard_);
    const float* reduced = staging_.data() + (piece.begin - bucket.begin);
    float* accumulator = accumulators_.data() + (piece.begin - shard_.begin);
    for (size_t i = 0; i < piece.size(); ++i) accumulator[i] += reduced[i];
  }
}

float* CpuShardedGradients::accumulator(size_t unit) {
  SUROGATE_CHECK(unit >= shard_.first_unit && unit < shard_.end_unit, "a rank accumulates its shard's gradients only");
  return accumulators_.data() + (offsets_[unit] - shard_.begin);
}

void CpuShardedGradients::zero() { std::ranges::fill(accumulators_, 0.0f); }

void CpuShardedGradients::all_gather(std::span<const WeightView> trainable) {
  SUROGATE_CHECK(trainable.size() == gradients_.size(), "one weight per gradient");
  const auto own = [&](size_t unit) { return unit >= shard_.first_unit && unit < shard_.end_unit; };
  for (const GradientBucket& bucket : buckets_.buckets) {
    const auto in_slot = [&](size_t unit) { return staging_.data() + (offsets_[unit] - bucket.begin); };
    for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) {
      if (own(unit)) std::ranges::copy(trainable[unit].values, in_slot(unit));
    }
    communicator_.all_gather(staging_.data(), bucket.piece_counts, DType::F32);
    for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) {
      if (!own(unit)) std::copy_n(in_slot(unit), trainable[unit].values.size(), trainable[unit].values.begin());
    }
  }
}

}  // namespace surogate::train
