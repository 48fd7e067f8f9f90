// ZeRO-1's weight exchange (train/device/shard_publish.h), written once for every multi-rank
// device: the rank's shard goes into the flat buffer, one all-gather in the backend's dtype (fp32,
// or a GPU replica's bf16) over the ranks' pieces, and every unit outside the shard comes back out;
// a group of one exchanges and copies nothing. A recording communicator and recording copies check
// the calls (the all-gather's bytes are gloo's and NCCL's, tested in tests/distributed).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "train/device/shard_publish.h"

namespace surogate::train {
namespace {

class GatherRecorder final : public distributed::Communicator {
public:
  GatherRecorder(std::vector<std::string>& log, int world_size) : log_(log), world_size_(world_size) {}
  std::string_view name() const override { return "recording"; }
  int rank() const override { return 0; }
  int world_size() const override { return world_size_; }
  void all_reduce_sum(void*, size_t, DType) override { log_.push_back("unexpected"); }
  void all_reduce_amax(float*, size_t) override { log_.push_back("unexpected"); }
  void reduce_scatter_sum(void*, std::span<const size_t>, DType) override { log_.push_back("unexpected"); }
  void all_gather(void* data, std::span<const size_t> pieces, DType dtype) override {
    log_.push_back(fmt::format("all_gather {} {} {}", data != nullptr, fmt::join(pieces, ","), dtype_size_bytes(dtype)));
  }
  void broadcast(void*, size_t, DType, int) override { log_.push_back("unexpected"); }
  void barrier() override { log_.push_back("unexpected"); }
  void all_to_all(const void*, void*, size_t, DType) override { log_.push_back("unexpected"); }
  void send(const void*, size_t, DType, int, uint32_t) override { log_.push_back("unexpected"); }
  void receive(void*, size_t, DType, int, uint32_t) override { log_.push_back("unexpected"); }
  void wait_sends() override {}

private:
  std::vector<std::string>& log_;
  int world_size_;
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

}  // namespace
}  // namespace surogate::train
