// fp16 training on the CPU backend (torch_dtype: float16): the emulation rounds to fp16 wherever
// the GPU's fp16 recipe holds 16-bit values, with fp32 masters and dynamic loss scaling. It tracks
// the fp32 run closely without equalling it; an overflowing loss scale backs off — the overflowed
// steps are skipped and the scale halves — without a single non-finite weight; the scale grows
// after fp16_loss_scale_window clean steps; a resumed fp16 run reproduces the uninterrupted run,
// loss scale included. The 200-step quickstart comparison is tests/python/test_fp16_cli.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "train/checkpoint_store.h"
#include "train/trainer.h"
#include "train/training_state.h"
#include "fp16_checks.h"
#include "trainer_fixture.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

class Fp16Test : public TrainerFixture {
protected:
  static TrainerOptions quiet() { return quiet_on_cpu(); }
  // The last checkpoint's history: one record per step.
  static nlohmann::json history(const std::string& name) { return fp16_step_history(root_ / name); }
};

// 20 steps: every step's loss within 2 % of the fp32 run's (measured: at most 0.3 %), and not
// all equal to it (the rounding is there).
TEST_F(Fp16Test, TheEmulationTracksFp32) {
  const std::string extra = "max_steps: 20\n";
  TrainingResult fp32 = run_training(config("fp32", extra), quiet());
  TrainingResult fp16 = run_training(config("fp16", extra + "torch_dtype: float16\n"), quiet());
  ASSERT_EQ(fp16.step_losses.size(), fp32.step_losses.size());
  EXPECT_EQ(fp16.skipped_steps, 0);
  int equal = 0;
  double worst = 0.0;
  for (size_t i = 0; i < fp32.step_losses.size(); ++i) {
    worst = std::max(worst, std::abs(fp16.step_losses[i] - fp32.step_losses[i]) / fp32.step_losses[i]);
    EXPECT_NEAR(fp16.step_losses[i], fp32.step_losses[i], 0.02 * fp32.step_losses[i]) << "step " << i + 1;
    equal += fp16.step_losses[i] == fp32.step_losses[i];
  }
  std::printf("[ measured ] fp16 vs fp32, 20 steps: largest relative loss gap %.5f\n", worst);
  EXPECT_LT(equal, 20) << "the fp16 run is the fp32 run: nothing was rounded";
  ASSERT_TRUE(fp16.eval_loss && fp32.eval_loss);
  EXPECT_NEAR(*fp16.eval_loss, *fp32.eval_loss, 0.02 * *fp32.eval_loss);
}

// A loss scale of 2^40 overflows the fp16 gradients: those steps are skipped and the scale halves
// each time (measured: steps 1-21 down to 2^19, and once more at step 23 — dynamic scaling finds the
// edge); no checkpoint ever holds a non-finite weight, and the run then trains (its loss falls).
TEST_F(Fp16Test, AnOverflowingLossScaleBacksOffWithoutANonFiniteWeight) {
  TrainingResult result = run_training(
      config("overflow", "max_steps: 40\nsave_steps: 1\nsave_total_limit: 100\ntorch_dtype: float16\n"
                         "fp16_loss_scale: 1099511627776\n"),
      quiet());
  expect_overflow_backs_off(root_ / "overflow", result, 1099511627776.0);
}

// fp16_loss_scale_window: 3 — after 3 clean steps in a row the scale doubles.
TEST_F(Fp16Test, TheScaleGrowsAfterTheWindowOfCleanSteps) {
  run_training(config("growth", "max_steps: 7\nsave_steps: 7\ntorch_dtype: float16\nfp16_loss_scale: 256\n"
                                "fp16_loss_scale_window: 3\n"),
               quiet());
  std::vector<double> scales;
  for (const nlohmann::json& step : history("growth")) scales.push_back(step["loss_scale"].get<double>());
  EXPECT_EQ(scales, (std::vector<double>{256, 256, 256, 512, 512, 512, 1024}));
}

// The loss scale's state is in the checkpoint: the resumed run scales, skips and trains exactly as
// the uninterrupted one (an overflow and growth fall on both sides of the save).
TEST_F(Fp16Test, AResumedFp16RunReproducesTheUninterruptedRun) {
  const std::string extra = "max_steps: 12\nsave_steps: 4\ntorch_dtype: float16\nfp16_loss_scale: 8388608\n"
                            "fp16_loss_scale_window: 3\n";
  TrainingResult straight = run_training(config("fp16_straight", extra), quiet());
  TrainerOptions interrupted = quiet();
  interrupted.stop_after_step = 4;
  TrainingResult first = run_training(config("fp16_resumed", extra), interrupted);
  TrainingResult second = run_training(config("fp16_resumed", extra + "resume_from_checkpoint: true\n"), quiet());
  std::vector<double> joined = first.step_losses;
  joined.insert(joined.end(), second.step_losses.begin(), second.step_losses.end());
  ASSERT_EQ(joined.size(), straight.step_losses.size());
  for (size_t i = 0; i < joined.size(); ++i) EXPECT_EQ(joined[i], straight.step_losses[i]) << "step " << i + 1;
  const nlohmann::json a = history("fp16_straight"), b = history("fp16_resumed");
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]["loss_scale"], b[i]["loss_scale"]) << "step " << i + 1;
}

}  // namespace
}  // namespace surogate::train
