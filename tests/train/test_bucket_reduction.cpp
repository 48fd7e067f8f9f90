// The replica reduction's bucket schedule (train/device/bucket_reduction.h), the one piece both
// backends run: after each step it reduces exactly the buckets the plan marks ready then, in
// flat order, at the address the backend's fill() returns, as a reduce-scatter over the bucket's
// pieces (each rank receives the sums of its shard alone; never an all-reduce, which moves more
// bytes): ZeRO-1 in place in the flat buffer, whose buffers take no further call; ZeRO-2/3 in the
// slot, handing the backend the rank's own piece (its place in the slot and in the shard) only
// when it owns one, and freeing every slot.
// A recording communicator and recording buffers check the calls (the collectives' arithmetic is
// gloo's and NCCL's, tested in tests/distributed and by the data-parallel tests).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "train/device/bucket_reduction.h"
#include "train/logging_communicator.h"

namespace surogate::train {
namespace {

// Logs each collective as "<name> <element offset into the flat buffer> <counts>" (rank 1 of 2).
class RecordingCommunicator final : public LoggingCommunicator {
public:
  RecordingCommunicator(std::vector<std::string>& log, const std::byte* base) : LoggingCommunicator(log, 2), base_(base) {}
  void all_reduce_sum(void* data, size_t count, DType dtype) override {
    log(fmt::format("all_reduce {} {} {}", at(data), count, dtype_size_bytes(dtype)));
  }
  void reduce_scatter_sum(void* data, std::span<const size_t> pieces, DType) override {
    log(fmt::format("reduce_scatter {} {}", at(data), fmt::join(pieces, ",")));
  }

private:
  size_t at(const void* data) const { return static_cast<size_t>(static_cast<const std::byte*>(data) - base_) / 4; }
  const std::byte* base_;
};

// ZeRO-1's buffers: fill() returns the bucket's place in a flat fp32 buffer, and the reduced piece
// stays there (add_piece and release are the interface's, doing nothing).
class FlatBuffers final : public BucketBuffers {
public:
  explicit FlatBuffers(std::vector<std::string>& log) : log_(log) {}
  std::byte* base() { return reinterpret_cast<std::byte*>(memory_.data()); }
  std::byte* fill(size_t index, const GradientBucket& bucket) override {
    log_.push_back(fmt::format("fill {}", index));
    return base() + bucket.begin * 4;
  }

private:
  std::vector<std::string>& log_;
  std::vector<float> memory_ = std::vector<float>(64);
};

// ZeRO-2/3's buffers: fill() returns the start of the one slot; the piece added and the slot freed
// are logged.
class RecordingBuffers final : public BucketBuffers {
public:
  explicit RecordingBuffers(std::vector<std::string>& log) : log_(log) {}
  std::byte* base() { return reinterpret_cast<std::byte*>(memory_.data()); }
  std::byte* fill(size_t index, const GradientBucket&) override {
    log_.push_back(fmt::format("fill {}", index));
    return base();
  }
  void add_piece(const std::byte* reduced, size_t offset, size_t count) override {
    log_.push_back(fmt::format("add {} {} {}", (reduced - base()) / 4, offset, count));
  }
  void release(std::byte* slot) override { log_.push_back(fmt::format("release {}", (slot - base()) / 4)); }

private:
  std::vector<std::string>& log_;
  std::vector<float> memory_ = std::vector<float>(64);
};

// Five units (elements [0, 6), [6, 10), [10, 18), [18, 24), [24, 30)) in three buckets: units
// [0, 2) ready after step 2, units [2, 4) and unit 4 after step 0. Rank 1 of 2 owns units [3, 5):
// nothing of the first bucket, part of the second, the whole third.
GradientBuckets three_buckets() {
  GradientBuckets buckets;
  buckets.buckets = {{0, 2, 0, 10, 2, {10, 0}}, {2, 4, 10, 24, 0, {8, 6}}, {4, 5, 24, 30, 0, {0, 6}}};
  buckets.ready_after = {{1, 2}, {}, {0}};
  return buckets;
}

TEST(BucketReduction, ZeroOneReduceScattersEachReadyBucketInPlaceInFlatOrder) {
  const GradientBuckets buckets = three_buckets();
  const distributed::Shard shard{3, 5, 18, 30};
  std::vector<std::string> log;
  FlatBuffers buffers(log);
  RecordingCommunicator communicator(log, buffers.base());
  BucketReduction reduction(buckets, buffers, DType::F32, communicator, shard);
  for (size_t step = 0; step < 3; ++step) reduction.after_step(step);
  // Each bucket at its place in the flat buffer, over its pieces: the rank's own sums land where
  // its optimizer reads them.
  EXPECT_EQ(log, (std::vector<std::string>{"fill 1", "reduce_scatter 10 8,6", "fill 2", "reduce_scatter 24 0,6",
                                           "fill 0", "reduce_scatter 0 10,0"}));
}

TEST(BucketReduction, ZeroTwoReduceScattersTheSlotAndAddsOnlyTheOwnedPiece) {
  const GradientBuckets buckets = three_buckets();
  const distributed::Shard shard{3, 5, 18, 30};
  std::vector<std::string> log;
  RecordingBuffers buffers(log);
  RecordingCommunicator communicator(log, buffers.base());
  BucketReduction reduction(buckets, buffers, DType::F32, communicator, shard);
  for (size_t step = 0; step < 3; ++step) reduction.after_step(step);
  EXPECT_EQ(log, (std::vector<std::string>{
                     // bucket 1: elements [18, 24) are the rank's, at 8 in the slot, 0 in the shard
                     "fill 1", "reduce_scatter 0 8,6", "add 8 0 6", "release 0",
                     // bucket 2: all of it, at 0 in the slot, 6 in the shard
                     "fill 2", "reduce_scatter 0 0,6", "add 0 6 6", "release 0",
                     // bucket 0: none of it, so nothing added, but the slot is freed
                     "fill 0", "reduce_scatter 0 10,0", "release 0"}));
}

}  // namespace
}  // namespace surogate::train
