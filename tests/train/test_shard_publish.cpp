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
#include "train/logging_communicator.h"

namespace surogate::train {
namespace {

// Logs each all-gather as "all_gather <buffer given> <pieces> <element bytes>".
class GatherRecorder final : public LoggingCommunicator {
public:
  using LoggingCommunicator::LoggingCommunicator;
  void all_gather(void* data, std::span<const size_t> pieces, DType dtype) override {
    log(fmt::format("all_gather {} {} {}", data != nullptr, fmt::join(pieces, ","), dtype_size_bytes(dtype)));
  }
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
