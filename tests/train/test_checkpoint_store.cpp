#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "core/error.h"
#include "train/checkpoint_store.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

class CheckpointStoreTest : public ::testing::Test {
protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("surogate-ckpt-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write_weights(const fs::path& folder, const std::string& contents) {
    std::ofstream(folder / "weights.bin") << contents;
  }

  fs::path root_;
};

TEST_F(CheckpointStoreTest, SavesAndFindsTheLatest) {
  CheckpointStore store(root_, 5);
  store.save(10, [](const fs::path& p) { write_weights(p, "a"); });
  store.save(20, [](const fs::path& p) { write_weights(p, "bb"); });
  ASSERT_TRUE(store.latest().has_value());
  EXPECT_EQ(store.latest()->filename(), "checkpoint-20");
  EXPECT_EQ(CheckpointStore::step_of(*store.latest()), 20);
}

TEST_F(CheckpointStoreTest, RotationKeepsTheNewest) {
  CheckpointStore store(root_, 2);
  for (int step : {1, 2, 3, 4}) store.save(step, [](const fs::path& p) { write_weights(p, "x"); });
  auto all = store.complete_checkpoints();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].filename(), "checkpoint-3");
  EXPECT_EQ(all[1].filename(), "checkpoint-4");
}

// A leftover folder whose number does not fit int64 used to end a finished run in an internal error
// (std::stoll) when the next save rotated the checkpoints, before the model was written.
TEST_F(CheckpointStoreTest, FolderNamesPastInt64AreNotCheckpoints) {
  fs::create_directories(root_ / "checkpoint-9223372036854775808");
  fs::create_directories(root_ / "checkpoint-99999999999999999999999");
  EXPECT_EQ(CheckpointStore::step_of(root_ / "checkpoint-9223372036854775808"), std::nullopt);
  EXPECT_EQ(CheckpointStore::step_of(root_ / "checkpoint-9223372036854775807"), INT64_MAX);
  CheckpointStore store(root_, 1);
  store.save(1, [](const fs::path& p) { write_weights(p, "a"); });
  store.save(2, [](const fs::path& p) { write_weights(p, "b"); });
  ASSERT_TRUE(store.latest().has_value());
  EXPECT_EQ(store.latest()->filename(), "checkpoint-2");
  EXPECT_EQ(store.latest_verified({}), root_ / "checkpoint-2");
  EXPECT_TRUE(fs::exists(root_ / "checkpoint-9223372036854775808"));  // not ours: left alone
}

TEST_F(CheckpointStoreTest, AnInterruptedSaveNeverBecomesTheLatest) {
  CheckpointStore store(root_, 5);
  store.save(10, [](const fs::path& p) { write_weights(p, "good"); });
  // The writer dies half-way (an exception stands in for a kill).
  EXPECT_THROW(store.save(20, [](const fs::path& p) {
                 write_weights(p, "half");
                 throw std::runtime_error("killed");
               }),
               std::runtime_error);
  EXPECT_EQ(store.latest()->filename(), "checkpoint-10");
  EXPECT_TRUE(fs::exists(root_ / "checkpoint-20.partial"));
  // The next save cleans the leftover up.
  store.save(30, [](const fs::path& p) { write_weights(p, "next"); });
  EXPECT_FALSE(fs::exists(root_ / "checkpoint-20.partial"));
  EXPECT_EQ(store.latest()->filename(), "checkpoint-30");
}

TEST_F(CheckpointStoreTest, ARemovalCutShortLeavesNoHalfDeletedCheckpoint) {
  CheckpointStore store(root_, 2);
  for (int step : {1, 2}) store.save(step, [](const fs::path& p) { write_weights(p, "x"); });
  // What a kill during rotation leaves: the oldest checkpoint renamed aside, half removed.
  fs::rename(root_ / "checkpoint-1", root_ / "checkpoint-1.deleting");
  fs::remove(root_ / "checkpoint-1.deleting" / "weights.bin");
  store.save(3, [](const fs::path& p) { write_weights(p, "x"); });
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(root_)) left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"checkpoint-2", "checkpoint-3"}));
}

TEST_F(CheckpointStoreTest, ACheckpointWithATruncatedFileIsNotComplete) {
  CheckpointStore store(root_, 5);
  store.save(10, [](const fs::path& p) { write_weights(p, "good"); });
  auto latest = store.save(20, [](const fs::path& p) { write_weights(p, "longer contents"); });
  fs::resize_file(latest / "weights.bin", 3);
  EXPECT_FALSE(CheckpointStore::is_complete(latest));
  EXPECT_EQ(store.latest()->filename(), "checkpoint-10");
}

TEST_F(CheckpointStoreTest, TheManifestRecordsEveryFilesSizeAndChecksum) {
  CheckpointStore store(root_, 5);
  fs::path saved = store.save(10, [](const fs::path& p) { write_weights(p, "contents"); });
  std::ifstream in(saved / "complete.json");
  nlohmann::json manifest = nlohmann::json::parse(in);
  EXPECT_EQ(manifest["step"], 10);
  ASSERT_TRUE(manifest["files"].contains("weights.bin"));
  EXPECT_EQ(manifest["files"]["weights.bin"]["bytes"], 8);
  // XXH3-64 of "contents", computed independently of the store's file reader.
  EXPECT_EQ(manifest["files"]["weights.bin"]["xxh3_64"], fmt::format("{:016x}", XXH3_64bits("contents", 8)));
  EXPECT_EQ(CheckpointStore::verification_problem(saved), "");
}

// The newest checkpoint has every file of its size, but a byte changed on disk: only the
// checksum tells. Resume takes the one before it and says which one it skipped and why.
TEST_F(CheckpointStoreTest, LatestVerifiedSkipsADamagedNewestCheckpointAndNamesIt) {
  CheckpointStore store(root_, 5);
  store.save(10, [](const fs::path& p) { write_weights(p, "good"); });
  fs::path damaged = store.save(20, [](const fs::path& p) { write_weights(p, "good"); });
  {
    std::fstream file(damaged / "weights.bin", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(1);
    file.put('X');
  }
  EXPECT_TRUE(CheckpointStore::is_complete(damaged));  // sizes alone cannot see it
  std::vector<std::string> warnings;
  auto latest = store.latest_verified([&](const std::string& warning) { warnings.push_back(warning); });
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->filename(), "checkpoint-10");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(damaged.string()), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("checksum"), std::string::npos) << warnings[0];
}

TEST_F(CheckpointStoreTest, LatestVerifiedSkipsTruncatedAndManifestlessFolders) {
  CheckpointStore store(root_, 5);
  store.save(10, [](const fs::path& p) { write_weights(p, "good"); });
  fs::path truncated = store.save(20, [](const fs::path& p) { write_weights(p, "longer contents"); });
  fs::resize_file(truncated / "weights.bin", 3);
  fs::create_directories(root_ / "checkpoint-30");  // renamed by hand, or another tool's folder
  write_weights(root_ / "checkpoint-30", "x");
  std::vector<std::string> warnings;
  auto latest = store.latest_verified([&](const std::string& warning) { warnings.push_back(warning); });
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->filename(), "checkpoint-10");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("checkpoint-30"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("complete.json"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("checkpoint-20"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[1].find("truncated"), std::string::npos) << warnings[1];
}

// save_total_limit counts and deletes complete checkpoints only: a folder that is not one is
// neither counted against the limit nor removed.
TEST_F(CheckpointStoreTest, RotationDeletesOnlyCompleteCheckpoints) {
  fs::create_directories(root_ / "checkpoint-1");
  write_weights(root_ / "checkpoint-1", "no manifest");
  CheckpointStore store(root_, 2);
  for (int step : {2, 3, 4}) store.save(step, [](const fs::path& p) { write_weights(p, "x"); });
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(root_)) left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"checkpoint-1", "checkpoint-3", "checkpoint-4"}));
}

TEST_F(CheckpointStoreTest, AtomicWriteReplacesWholeFiles) {
  fs::create_directories(root_);
  write_file_atomically(root_ / "state.json", "{\"step\": 1}");
  write_file_atomically(root_ / "state.json", "{\"step\": 2}");
  std::ifstream in(root_ / "state.json");
  std::string contents((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(contents, "{\"step\": 2}");
  EXPECT_FALSE(fs::exists(root_ / "state.json.tmp"));
  EXPECT_THROW(write_file_atomically(root_ / "missing-folder" / "x", "y"), UserError);
}

}  // namespace
}  // namespace surogate::train
