#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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
