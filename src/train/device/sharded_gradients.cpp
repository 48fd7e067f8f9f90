// ZeRO-2/3's sharded gradient accumulators; see sharded_gradients.h.
#include "train/device/sharded_gradients.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace surogate::train {

BucketPiece owned_piece(const GradientBucket& bucket, const distributed::Shard& shard) {
  return {std::clamp(shard.begin, bucket.begin, bucket.end), std::clamp(shard.end, bucket.begin, bucket.end)};
}

BucketSegment bucket_segment(const GradientBucket& bucket, size_t offset, size_t count) {
  const size_t begin = std::clamp(offset, bucket.begin, bucket.end);
  const size_t end = std::clamp(offset + count, bucket.begin, bucket.end);
  return {begin - std::min(begin, offset), begin - bucket.begin, end - begin};
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
  const std::vector<GradientBucket> buckets = cut_gradient_buckets(unit_sizes, bucket_elements, true);
  return largest_shard + static_cast<size_t>(staging_slots) * largest_bucket_elements(buckets);
}

CpuShardedGradients::CpuShardedGradients(const GradientBuckets& buckets, std::vector<std::span<float>> gradients,
                                         const distributed::Shard& shard, distributed::Communicator& communicator)
    : buckets_(buckets), gradients_(std::move(gradients)), shard_(shard), communicator_(communicator),
      accumulators_(shard.size(), 0.0f), staging_(largest_bucket_elements(buckets.buckets), 0.0f),
      reduction_(buckets, *this, DType::F32, communicator, shard_) {
  size_t offset = 0;
  for (const std::span<float> gradient : gradients_) {
    offsets_.push_back(offset);
    offset += gradient.size();
  }
  SUROGATE_CHECK(buckets_.buckets.empty() || buckets_.buckets.back().end == offset,
                 "the buckets cover the gradients' flat buffer");
}

std::byte* CpuShardedGradients::fill(size_t, const GradientBucket& bucket) {
  // This micro-batch's gradients of the bucket, which leave the plan's tensors zeroed for the
  // next micro-batch's backward to add into.
  for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) {
    const BucketSegment segment = bucket_segment(bucket, offsets_[unit], gradients_[unit].size());
    const std::span<float> part = gradients_[unit].subspan(segment.from, segment.count);
    std::ranges::copy(part, staging_.begin() + static_cast<std::ptrdiff_t>(segment.into));
    std::ranges::fill(part, 0.0f);
  }
  return reinterpret_cast<std::byte*>(staging_.data());
}

void CpuShardedGradients::add_piece(const std::byte* reduced, size_t offset, size_t count) {
  const auto* values = reinterpret_cast<const float*>(reduced);
  float* accumulator = accumulators_.data() + offset;
  for (size_t i = 0; i < count; ++i) accumulator[i] += values[i];
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
    const auto part = [&](size_t unit) {
      const BucketSegment segment = bucket_segment(bucket, offsets_[unit], trainable[unit].values.size());
      return std::pair{trainable[unit].values.subspan(segment.from, segment.count), staging_.data() + segment.into};
    };
    for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) {
      if (const auto [values, slot] = part(unit); own(unit)) std::ranges::copy(values, slot);
    }
    communicator_.all_gather(staging_.data(), bucket.piece_counts, DType::F32);
    for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) {
      if (const auto [values, slot] = part(unit); !own(unit)) std::copy_n(slot, values.size(), values.begin());
    }
  }
}

}  // namespace surogate::train
