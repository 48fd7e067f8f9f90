// Gradient buckets; see gradient_buckets.h.
#include "train/device/gradient_buckets.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace surogate::train {

std::vector<GradientBucket> cut_gradient_buckets(std::span<const size_t> unit_sizes, size_t bucket_elements,
                                                 bool split_units) {
  bucket_elements = std::max<size_t>(bucket_elements, 1);
  std::vector<GradientBucket> buckets;
  size_t offset = 0;
  bool closed = true;  // the next unit starts a bucket
  for (size_t unit = 0; unit < unit_sizes.size(); ++unit) {
    if (split_units && unit_sizes[unit] > bucket_elements) {
      for (size_t begin = offset; begin < offset + unit_sizes[unit]; begin += bucket_elements) {
        buckets.push_back({unit, unit + 1, begin, std::min(begin + bucket_elements, offset + unit_sizes[unit]), -1, {}});
      }
      offset += unit_sizes[unit];
      closed = true;
      continue;
    }
    if (closed || buckets.back().size() >= bucket_elements) {
      closed = false;
      buckets.push_back({unit, unit, offset, offset, -1, {}});
    }
    offset += unit_sizes[unit];
    buckets.back().end_unit = unit + 1;
    buckets.back().end = offset;
  }
  return buckets;
}

GradientBuckets plan_gradient_buckets(const compiler::ExecutionPlan& plan, std::span<const graph::TensorId> gradients,
                                      std::span<const size_t> unit_sizes, std::span<const distributed::Shard> shards,
                                      size_t bucket_elements, bool split_units) {
  SUROGATE_CHECK(gradients.size() == unit_sizes.size(), "one size per gradient");
  // The last step writing each gradient tensor (an accumulate node, or an accumulating product).
  std::map<graph::TensorId, int> last_write;
  for (size_t step = 0; step < plan.steps.size(); ++step) {
    for (graph::TensorId id : plan.graph.node(plan.steps[step].node).outputs) last_write[id] = static_cast<int>(step);
  }
  const int final_step = std::max(0, static_cast<int>(plan.steps.size()) - 1);
  GradientBuckets result;
  result.ready_after.assign(plan.steps.size(), {});
  result.buckets = cut_gradient_buckets(unit_sizes, bucket_elements, split_units);
  for (size_t b = 0; b < result.buckets.size(); ++b) {
    GradientBucket& bucket = result.buckets[b];
    for (size_t unit = bucket.first_unit; unit < bucket.end_unit; ++unit) {
      auto written = last_write.find(gradients[unit]);
      // A gradient no step writes (no path to the loss) stays zero: ready after the last step.
      bucket.ready_step = std::max(bucket.ready_step, written == last_write.end() ? final_step : written->second);
    }
    for (const distributed::Shard& shard : shards) {
      const size_t begin = std::clamp(shard.begin, bucket.begin, bucket.end);
      const size_t end = std::clamp(shard.end, bucket.begin, bucket.end);
      bucket.piece_counts.push_back(end - begin);
    }
    if (!result.ready_after.empty()) result.ready_after[static_cast<size_t>(bucket.ready_step)].push_back(b);
  }
  return result;
}

std::vector<std::vector<size_t>> publish_waits(const compiler::ExecutionPlan& plan,
                                               std::span<const GradientBucket> buckets,
                                               std::span<const graph::TensorId> weights) {
  // The first step reading each tensor.
  std::map<graph::TensorId, size_t> first_read;
  for (size_t step = 0; step < plan.steps.size(); ++step) {
    for (graph::TensorId id : plan.graph.node(plan.steps[step].node).inputs) first_read.try_emplace(id, step);
  }
  std::vector<std::vector<size_t>> waits(std::max<size_t>(plan.steps.size(), 1));
  for (size_t b = 0; b < buckets.size(); ++b) {
    size_t first = plan.steps.size();
    for (size_t unit = buckets[b].first_unit; unit < buckets[b].end_unit; ++unit) {
      SUROGATE_CHECK(unit < weights.size(), "a weight per unit of the publish buckets");
      if (auto read = first_read.find(weights[unit]); read != first_read.end()) first = std::min(first, read->second);
    }
    waits[first == plan.steps.size() ? 0 : first].push_back(b);
  }
  return waits;
}

}  // namespace surogate::train
