// ZeRO-1's weight exchange (train/device/shard_publish.h), written once for every multi-rank
// device: the rank's shard goes into the flat buffer, one all-gather in the backend's dtype (fp32,
// or a GPU replica's bf16) over the ranks' pieces, and every unit outside the shard comes back out;
// a group of one exchanges and copies nothing. In buckets (ZeRO-1's publish, which a GPU overlaps
// with the next micro-batch), each bucket of whole units is one all-gather at its place in the flat
// buffer with the shards' pieces of it, the rank's units of it going in before and the others out
// after, then the bucket's callback; and the next micro-batch waits for each bucket before the
// first step reading one of its weights. A recording communicator and recording copies check the
// calls (the all-gather's bytes are gloo's and NCCL's, tested in tests/distributed).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "train/device/gradient_buckets.h"
#include "train/device/shard_publish.h"
#include "train/logging_communicator.h"

namespace surogate::train {
namespace {

// Logs each all-gather as "all_gather <buffer given> <pieces> <element bytes>".
class GatherRecorder final : public LoggingCommunicator {
public:
  using LoggingCommunicator::LoggingCommunicator;
  void all_gather(void* data, std::span<const size_t> pieces, DType dtype) override {
    log(fmt::format("all_gather {} {} {}", data != nullptr, fmt::join(pieces, ","), dtype_size_bytes(dtype)));
    last_data = data;
  }
  void* last_data = nullptr;
};

ShardCopies recording_copies(std::vector<std::string>& log) {
  return {[&log](size_t first, size_t end) { log.push_back(fmt::format("into {} {}", first, end)); },
          [&log](size_t first, size_t end) { log.push_back(fmt::format("from {} {}", first, end)); }};
}

TEST(ShardPublish, TheShardGoesInOneAllGatherInTheBuffersDtypeCarriesItAndTheOtherUnitsComeOut) {
  std::vector<std::string> log;
  GatherRecorder group(log, 3);
  std::vector<std::byte> flat(64);
  const std::vector<size_t> pieces = {6, 10, 0};
  const distributed::Shard shard{2, 5, 6, 16};  // units [2, 5) of 7, elements [6, 16)
  publish_shard(group, flat.data(), pieces, DType::BF16, shard, 7, recording_copies(log));
  EXPECT_EQ(log, (std::vector<std::string>{"into 2 5", "all_gather true 6,10,0 2", "from 0 2", "from 5 7"}));

  log.clear();
  publish_shard(group, flat.data(), pieces, DType::F32, shard, 7, recording_copies(log));
  EXPECT_EQ(log[1], "all_gather true 6,10,0 4");
}

TEST(ShardPublish, AGroupOfOneExchangesAndCopiesNothing) {
  std::vector<std::string> log;
  GatherRecorder group(log, 1);
  std::vector<std::byte> flat(64);
  const std::vector<size_t> pieces = {16};
  publish_shard(group, flat.data(), pieces, DType::BF16, distributed::Shard{0, 7, 0, 16}, 7, recording_copies(log));
  EXPECT_TRUE(log.empty());
}

// Units of 3, 3, 4, 6, 2, 2 elements; shards: rank 0 units [0, 2) = elements [0, 6), rank 1 unit 2
// = [6, 10), rank 2 units [3, 6) = [10, 20). Buckets of at least 6 elements: [0, 2), [2, 4), [4, 6).
std::vector<GradientBucket> three_publish_buckets() {
  const std::vector<size_t> sizes = {3, 3, 4, 6, 2, 2};
  const std::vector<distributed::Shard> shards = {{0, 2, 0, 6}, {2, 3, 6, 10}, {3, 6, 10, 20}};
  compiler::ExecutionPlan plan;
  return plan_gradient_buckets(plan, std::vector<graph::TensorId>(sizes.size(), graph::kNoTensor), sizes, shards, 6)
      .buckets;
}

TEST(ShardPublish, InBucketsEachBucketIsOneAllGatherAtItsPlaceWithTheUnitsInBeforeAndOutAfter) {
  const std::vector<GradientBucket> buckets = three_publish_buckets();
  ASSERT_EQ(buckets.size(), 3u);
  std::vector<std::string> log;
  GatherRecorder group(log, 3);
  std::vector<std::byte> flat(80);
  const distributed::Shard shard{2, 3, 6, 10};  // rank 1: unit 2 only, in the middle bucket
  std::vector<void*> places;
  publish_shard_in_buckets(group, flat.data(), buckets, DType::BF16, shard, recording_copies(log), [&](size_t b) {
    log.push_back(fmt::format("published {}", b));
    places.push_back(group.last_data);
  });
  EXPECT_EQ(log, (std::vector<std::string>{"all_gather true 6,0,0 2", "from 0 2", "published 0",
                                           "into 2 3", "all_gather true 0,4,6 2", "from 3 4", "published 1",
                                           "all_gather true 0,0,4 2", "from 4 6", "published 2"}));
  // Each bucket's all-gather starts at its first element (bf16: 2 bytes each).
  EXPECT_EQ(places, (std::vector<void*>{flat.data(), flat.data() + 12, flat.data() + 32}));

  // Rank 2 steps the middle bucket's last unit and the whole last bucket.
  log.clear();
  publish_shard_in_buckets(group, flat.data(), buckets, DType::F32, distributed::Shard{3, 6, 10, 20},
                           recording_copies(log), nullptr);
  EXPECT_EQ(log, (std::vector<std::string>{"all_gather true 6,0,0 4", "from 0 2", "into 3 4",
                                           "all_gather true 0,4,6 4", "from 2 3", "into 4 6",
                                           "all_gather true 0,0,4 4"}));

  log.clear();
  GatherRecorder alone(log, 1);
  publish_shard_in_buckets(alone, flat.data(), std::vector<GradientBucket>{{0, 6, 0, 20, 0, {20}}}, DType::BF16,
                           distributed::Shard{0, 6, 0, 20}, recording_copies(log), nullptr);
  EXPECT_TRUE(log.empty());
}

// Six weights read in the order w0, w1 (step 0), w2 (step 1), w3 (step 2), w0 again (step 3: a tied
// head) and w5 (step 4); w4 is read by no step.
TEST(ShardPublish, TheNextMicroBatchWaitsForEachBucketBeforeTheFirstStepReadingOneOfItsWeights) {
  compiler::ExecutionPlan plan;
  std::vector<graph::TensorId> weights;
  for (int w = 0; w < 6; ++w) {
    weights.push_back(plan.graph.add_tensor({fmt::format("w{}", w), {}, graph::TensorRole::Parameter}));
  }
  const std::vector<std::vector<int>> reads = {{0, 1}, {2}, {3}, {0}, {5}};
  for (size_t step = 0; step < reads.size(); ++step) {
    graph::Node node{fmt::format("step{}", step), "toy"};
    for (int w : reads[step]) node.inputs.push_back(weights[static_cast<size_t>(w)]);
    plan.steps.push_back({plan.graph.add_node(std::move(node))});
  }
  std::vector<GradientBucket> buckets = three_publish_buckets();  // units [0, 2), [2, 4), [4, 6)
  std::vector<std::vector<size_t>> waits = publish_waits(plan, buckets, weights);
  ASSERT_EQ(waits.size(), 5u);
  EXPECT_EQ(waits[0], (std::vector<size_t>{0}));
  EXPECT_EQ(waits[1], (std::vector<size_t>{1}));  // w2 at step 1 before w3 at step 2
  EXPECT_TRUE(waits[2].empty());
  EXPECT_TRUE(waits[3].empty());                  // w0's second read: waited for at step 0
  EXPECT_EQ(waits[4], (std::vector<size_t>{2}));  // w5 (w4 is never read)

  // A bucket none of whose weights is read is waited for before the first step.
  buckets = {{0, 2, 0, 6, 0, {6, 0, 0}}, {2, 4, 6, 16, 0, {0, 4, 6}}, {4, 5, 16, 18, 0, {0, 0, 2}}};
  waits = publish_waits(plan, buckets, weights);
  EXPECT_EQ(waits[0], (std::vector<size_t>{0, 2}));
}

}  // namespace
}  // namespace surogate::train
