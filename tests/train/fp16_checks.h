// Checks shared by the fp16 trainer tests of both backends (tests/train/test_trainer_fp16.cpp on
// the CPU emulation, tests/train_cuda/test_train_cuda_fp16.cpp on the GPU): a run's step history,
// and what a loss scale far too large must do.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "train/checkpoint_store.h"
#include "train/trainer.h"
#include "train/training_state.h"

namespace surogate::train {

// The latest checkpoint's history under `output_dir`: one record per step.
inline nlohmann::json fp16_step_history(const std::filesystem::path& output_dir) {
  CheckpointStore store(output_dir, 100);
  return read_training_state(*store.latest() / "trainer_state.json").history;
}

// A run of 40 steps that started at `initial_scale` (saving every step) with a scale that
// overflows the fp16 gradients: each overflowed step is skipped and halves the scale, the first
// one overflows, between 3 and 34 do, no checkpoint holds a non-finite weight (a skipped step
// applies nothing), and after the first applied step the loss falls by 0.3+.
inline void expect_overflow_backs_off(const std::filesystem::path& output_dir, const TrainingResult& result,
                                      double initial_scale) {
  const nlohmann::json steps = fp16_step_history(output_dir);
  ASSERT_EQ(steps.size(), 40u);
  int overflowed = 0;
  double scale = initial_scale;
  for (const nlohmann::json& step : steps) {
    EXPECT_EQ(step["loss_scale"].get<double>(), scale) << step.dump();
    if (step.value("loss_scale_overflow", false)) {
      EXPECT_TRUE(step["skipped"].get<bool>());
      ++overflowed;
      scale /= 2.0;
    }
  }
  EXPECT_TRUE(steps[0].value("loss_scale_overflow", false));
  EXPECT_GE(overflowed, 3);
  EXPECT_LT(overflowed, 35);
  EXPECT_EQ(result.skipped_steps, overflowed);
  for (const std::filesystem::path& checkpoint : CheckpointStore(output_dir, 100).complete_checkpoints()) {
    io::SafetensorsFile file = io::SafetensorsFile::open(checkpoint / "model.safetensors");
    for (const io::SafetensorsTensor& tensor : file.tensors()) {
      const auto* values = reinterpret_cast<const float*>(tensor.bytes.data());
      for (size_t i = 0; i < tensor.bytes.size() / sizeof(float); ++i) {
        ASSERT_TRUE(std::isfinite(values[i])) << checkpoint / tensor.name;
      }
    }
  }
  size_t first_applied = 0;
  while (first_applied < steps.size() && steps[first_applied].value("skipped", false)) ++first_applied;
  ASSERT_LT(first_applied, steps.size());
  EXPECT_LT(result.step_losses.back(), result.step_losses[first_applied] - 0.3);
}

}  // namespace surogate::train
