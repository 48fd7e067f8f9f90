// Asynchronous checkpoints and recovery on the CPU backend (the quickstart job): training goes on
// while a checkpoint is written, and what is written equals a synchronous save of the same step;
// resume takes the newest checkpoint that verifies, skipping a truncated one; a step with a
// non-finite loss is skipped without touching the weights or the optimizer state, and too many in
// a row stop the run as diverged. The process-level parts (kill -9 during a write, restarts) are
// tests/python/test_recovery_cli.py.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/checkpoint_store.h"
#include "train/trainer.h"
#include "trainer_fixture.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

class RecoveryTest : public TrainerFixture {
protected:
  static TrainerOptions quiet() { return quiet_on_cpu(); }
  static std::string bytes_of(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  // The log's records in order, as (type, step).
  static std::vector<std::pair<std::string, int64_t>> log_records(const fs::path& file) {
    std::vector<std::pair<std::string, int64_t>> records;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      nlohmann::json record = nlohmann::json::parse(line);
      records.emplace_back(record["type"].get<std::string>(), record.value("step", int64_t{-1}));
    }
    return records;
  }
};

// The writer thread sleeps 400 ms before finishing each checkpoint: step 3 is logged before the
// step-2 checkpoint is, so training went on while it was written; and the files are the bytes a
// run without the delay writes.
TEST_F(RecoveryTest, TrainingGoesOnWhileACheckpointIsWritten) {
  const std::string extra = "max_steps: 6\nsave_steps: 2\n";
  TrainingResult plain = run_training(config("async_plain", extra), quiet());
  TrainerOptions slow = quiet();
  slow.faults.checkpoint_write_delay = std::chrono::milliseconds(400);
  TrainingResult delayed = run_training(config("async_slow", extra), slow);
  EXPECT_EQ(delayed.step_losses, plain.step_losses);

  const auto records = log_records(delayed.log_file);
  auto position = [&](const std::string& type, int64_t step) {
    return std::find(records.begin(), records.end(), std::pair{type, step}) - records.begin();
  };
  ASSERT_LT(position("checkpoint", 2), static_cast<long>(records.size()));
  EXPECT_LT(position("step", 3), position("checkpoint", 2));
  // Without the step times (wall-clock), the trainer states are equal too.
  auto state_of = [&](const fs::path& file) {
    nlohmann::json state = nlohmann::json::parse(bytes_of(file));
    for (nlohmann::json& record : state["history"]) {
      record.erase("step_seconds");
      record.erase("tokens_per_second");
    }
    return state;
  };
  for (int step : {2, 4, 6}) {
    const fs::path name = fmt::format("checkpoint-{}", step);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      const std::string written = bytes_of(root_ / "async_slow" / name / file);
      EXPECT_FALSE(written.empty()) << name / file;
      EXPECT_EQ(written, bytes_of(root_ / "async_plain" / name / file)) << name / file;
    }
    EXPECT_EQ(state_of(root_ / "async_slow" / name / "trainer_state.json"),
              state_of(root_ / "async_plain" / name / "trainer_state.json"));
    EXPECT_EQ(CheckpointStore::verification_problem(root_ / "async_slow" / fmt::format("checkpoint-{}", step)), "");
  }
}

// The newest checkpoint lost the end of a file: resume warns, takes the one before it and
// reproduces the uninterrupted run's per-step losses from there.
TEST_F(RecoveryTest, ResumeSkipsATruncatedNewestCheckpoint) {
  const std::string extra = "max_steps: 12\nsave_steps: 4\n";
  TrainingResult straight = run_training(config("truncated_straight", extra), quiet());
  TrainerOptions interrupted = quiet();
  interrupted.stop_after_step = 8;
  run_training(config("truncated", extra), interrupted);
  const fs::path newest = root_ / "truncated" / "checkpoint-8";
  fs::resize_file(newest / "optimizer.safetensors", fs::file_size(newest / "optimizer.safetensors") - 100);
  TrainingResult resumed = run_training(config("truncated", extra + "resume_from_checkpoint: true\n"), quiet());
  EXPECT_EQ(resumed.first_step, 4);
  ASSERT_EQ(resumed.step_losses.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(resumed.step_losses[i], straight.step_losses[i + 4]) << "step " << i + 5;
  std::ifstream log(resumed.log_file);
  bool warned = false;
  for (std::string line; std::getline(log, line);) {
    warned |= line.find("\"type\":\"warning\"") != std::string::npos && line.find(newest.string()) != std::string::npos;
  }
  EXPECT_TRUE(warned) << "the skipped checkpoint is named in the log";
}

// Step 3's loss reads NaN: the step is skipped (logged, counted), the checkpoint after it holds
// exactly the weights and optimizer state of the one before it, and training goes on.
TEST_F(RecoveryTest, ANonFiniteStepIsSkippedWithoutTouchingTheWeights) {
  TrainerOptions options = quiet();
  options.faults.nonfinite_loss_at_step = 3;
  TrainingResult result = run_training(config("skip_one", "max_steps: 5\nsave_steps: 1\n"), options);
  EXPECT_EQ(result.steps, 5);
  EXPECT_EQ(result.skipped_steps, 1);
  ASSERT_EQ(result.step_losses.size(), 5u);
  EXPECT_TRUE(std::isnan(result.step_losses[2]));
  EXPECT_TRUE(std::isfinite(result.step_losses[3]));
  const fs::path out = root_ / "skip_one";
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    EXPECT_EQ(bytes_of(out / "checkpoint-3" / file), bytes_of(out / "checkpoint-2" / file)) << file;
    EXPECT_NE(bytes_of(out / "checkpoint-4" / file), bytes_of(out / "checkpoint-3" / file)) << file;
  }
  std::ifstream log(result.log_file);
  int skipped = 0;
  for (std::string line; std::getline(log, line);) skipped += line.find("\"skipped\":true") != std::string::npos;
  EXPECT_EQ(skipped, 1);
}

// fp8_hybrid: the amaxes recorded during a skipped step are dropped, not rolled into the delayed
// scaling history (the checkpoint's fp8.scaling state equals the one before the step).
TEST_F(RecoveryTest, AFp8StepThatIsSkippedLeavesTheScalingStateAlone) {
  TrainerOptions options = quiet();
  options.faults.nonfinite_loss_at_step = 3;
  run_training(config("skip_fp8", "max_steps: 5\nsave_steps: 1\nlora: true\nrecipe: fp8_hybrid\n"), options);
  const fs::path out = root_ / "skip_fp8";
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    EXPECT_EQ(bytes_of(out / "checkpoint-3" / file), bytes_of(out / "checkpoint-2" / file)) << file;
    EXPECT_NE(bytes_of(out / "checkpoint-4" / file), bytes_of(out / "checkpoint-3" / file)) << file;
  }
}

// More than max_nonfinite_steps non-finite steps in a row: TrainingDiverged naming the step.
TEST_F(RecoveryTest, TooManyNonFiniteStepsInARowStopTheRunAsDiverged) {
  TrainerOptions options = quiet();
  options.faults.nonfinite_loss_from_step = 3;
  try {
    run_training(config("skip_many", "max_steps: 10\nmax_nonfinite_steps: 2\nsave_steps: 2\n"), options);
    FAIL() << "three non-finite steps in a row must stop the run";
  } catch (const TrainingDiverged& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("training diverged at step 5"), std::string::npos) << message;
    EXPECT_NE(message.find("3 non-finite steps in a row"), std::string::npos) << message;
    EXPECT_NE(message.find("checkpoint-4"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace surogate::train
