// `surogate sft` on the CUDA backend with master_dtype bf16 (no fp32 master: the optimizers update
// the bf16 weights in place with stochastic rounding) and gradient_dtype bf16 (bf16 gradient
// accumulators), against the same job with the defaults (fp32 masters and accumulators) on the
// CUDA backend; and resuming a bf16-master run from its checkpoint.
//
// Tolerances (measured on H100, 2026-11-23: max |Δloss| 0.0004–0.0008 for adamw / adamw_8bit,
// 0.0045 for normuon; mean over the last 5 steps ≤ 0.0012; the fixture's CPU-vs-CUDA figure is
// 0.0006):
//   step 1:       the losses are equal exactly (the same bf16 weights and batch; nothing has been
//                 accumulated or updated yet);
//   every step:   |Δloss| < 0.02 nats over 20 steps. Stochastic rounding adds an unbiased error of
//                 up to one bf16 ulp per weight and step, bf16 accumulation one rounding per
//                 micro-batch; the runs drift apart as the fixture's CPU/CUDA runs do, a few
//                 times faster. A lost update (round to nearest of updates below half an ulp),
//                 a wrong gradient or a wrong rounding key moves the loss by 0.3+ nats;
//   mean |Δloss| over the last 5 steps < 0.01 nats, and the loss falls by 0.3+ nats.
//   resume:       the resumed run's losses equal the uninterrupted run's exactly: the checkpoint
//                 holds the bf16 weights exactly (as fp32) and the moments bit for bit, and the
//                 rounding bits depend only on the seed, the step and the element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {

class CudaPrecisionTest : public CudaTrainerFixture {
protected:
  static constexpr double kPrecisionStepTolerance = 0.02;
  static constexpr double kPrecisionLastStepsTolerance = 0.01;

  // Runs `extra` on CUDA with the defaults and with `precision` added; the second tracks the first.
  static void expect_tracks_fp32(const std::string& name, const std::string& extra, const std::string& precision) {
    TrainingResult fp32 = run_training(config(name + "-fp32", extra), on(TrainingBackend::Cuda));
    TrainingResult bf16 = run_training(config(name + "-bf16", extra + precision), on(TrainingBackend::Cuda));
    expect_tracks(name, fp32, bf16, 0.0, kPrecisionStepTolerance, kPrecisionLastStepsTolerance);
  }
};

TEST_F(CudaPrecisionTest, MasterBf16FullFineTuningTracksTheFp32MasterRun) {
  expect_tracks_fp32("master-bf16", "max_steps: 20\n", "master_dtype: bf16\n");
}

TEST_F(CudaPrecisionTest, GradientBf16FullFineTuningTracksTheFp32AccumulatorRun) {
  expect_tracks_fp32("gradient-bf16", "max_steps: 20\n", "gradient_dtype: bf16\n");
}

TEST_F(CudaPrecisionTest, MasterBf16AndGradientBf16TrackTheFp32RunWithEveryOptimizer) {
  const std::string both = "master_dtype: bf16\ngradient_dtype: bf16\n";
  expect_tracks_fp32("both-bf16-adamw", "max_steps: 20\n", both);
  expect_tracks_fp32("both-bf16-adamw8bit", "max_steps: 20\noptimizer: adamw_8bit\n", both);
  expect_tracks_fp32("both-bf16-normuon", "max_steps: 20\noptimizer: normuon\nlearning_rate: 1e-2\nweight_decay: 0.01\n",
                     both);
}

TEST_F(CudaPrecisionTest, MasterBf16ResumesExactly) {
  expect_exact_resume("master-bf16", "master_dtype: bf16\n");
}

TEST_F(CudaPrecisionTest, MasterBf16AndGradientBf16ResumeExactlyWithEveryOptimizer) {
  const std::string both = "master_dtype: bf16\ngradient_dtype: bf16\n";
  expect_exact_resume("both-bf16-adamw8bit", both + "optimizer: adamw_8bit\n");
  expect_exact_resume("both-bf16-normuon", both + "optimizer: normuon\n");
}

}  // namespace
}  // namespace surogate::train
