// debug_time_breakdown's tally (train/observe/time_breakdown.h): the first step is the warm-up,
// left out of the mean once a later step was added, reported alone (and said so) otherwise.
#include <gtest/gtest.h>

#include <string>

#include "train/observe/time_breakdown.h"

namespace surogate::train {
namespace {

double ms_of(const nlohmann::json& record, const std::string& op) {
  for (const nlohmann::json& entry : record["ops"]) {
    if (entry["op"] == op) return entry["ms"].get<double>();
  }
  ADD_FAILURE() << op << " not in " << record.dump();
  return -1.0;
}

TEST(TimeBreakdown, TheFirstStepIsTheWarmUpAndLeftOutOfTheMean) {
  TimeBreakdown tally;
  EXPECT_TRUE(tally.empty());
  tally.add({{"forward:linear", 100.0}, {"backward:attention_backward", 10.0}});  // the warm-up
  EXPECT_FALSE(tally.empty());
  tally.add({{"forward:linear", 4.0}, {"backward:attention_backward", 10.0}});
  tally.add({{"forward:linear", 6.0}, {"backward:attention_backward", 12.0}});
  const nlohmann::json record = tally.record();
  EXPECT_EQ(record["micro_batches"].get<int64_t>(), 2);
  EXPECT_TRUE(record["warm_up_left_out"].get<bool>());
  EXPECT_DOUBLE_EQ(ms_of(record, "forward:linear"), 5.0);
  EXPECT_DOUBLE_EQ(ms_of(record, "backward:attention_backward"), 11.0);
  EXPECT_DOUBLE_EQ(record["total_ms"].get<double>(), 16.0);
  EXPECT_EQ(record["ops"][0]["op"], "backward:attention_backward") << "largest first";
  const std::string table = tally.table();
  EXPECT_NE(table.find("2 steps after the first, its warm-up left out"), std::string::npos) << table;
}

TEST(TimeBreakdown, AnOnlyStepIsReportedAndSaidToIncludeTheWarmUp) {
  TimeBreakdown tally;
  tally.add({});  // a device without timing adds nothing
  EXPECT_TRUE(tally.empty());
  tally.add({{"forward:linear", 7.0}});
  const nlohmann::json record = tally.record();
  EXPECT_EQ(record["micro_batches"].get<int64_t>(), 1);
  EXPECT_FALSE(record["warm_up_left_out"].get<bool>());
  EXPECT_DOUBLE_EQ(ms_of(record, "forward:linear"), 7.0);
  const std::string table = tally.table("host time per step (wall clock)", "ms");
  EXPECT_NE(table.find("host time per step (wall clock): mean of the first step only, its warm-up included"),
            std::string::npos)
      << table;
}

}  // namespace
}  // namespace surogate::train
