// `surogate sft` with the 8-bit AdamW (the default optimizer) and NorMuon on the CUDA backend
// against the same job on the CPU backend: the loss curves track each other, and a checkpoint
// written on the GPU resumes the run exactly (8-bit codes and absmax, NorMuon momentum and
// second moments restored bit for bit).
//
// Tolerances: cuda_trainer_fixture.h's (step 1 < 0.01 nats, every step < 0.03, mean of the last 5
// < 0.02); a wrong optimizer step moves the loss by 0.3+ nats within them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/device_info.h"
#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {

class CudaOptimizerTrainingTest : public CudaTrainerFixture {};

TEST_F(CudaOptimizerTrainingTest, AdamW8bitFullFineTuningTracksTheCpuRun) {
  expect_tracks_cpu("adamw8bit-full", "max_steps: 20\noptimizer: adamw_8bit\n");
}

TEST_F(CudaOptimizerTrainingTest, AdamW8bitLoraTracksTheCpuRun) {
  expect_tracks_cpu("adamw8bit-lora", "max_steps: 20\noptimizer: adamw_8bit\nlora: true\nlora_rank: 8\n"
                                      "lora_alpha: 16\nlora_dropout: 0.0\nlearning_rate: 1e-2\n");  // 1e-2: see LoraTracksTheCpuRun
}

TEST_F(CudaOptimizerTrainingTest, NorMuonFullFineTuningTracksTheCpuRun) {
  expect_tracks_cpu("normuon-full", "max_steps: 20\noptimizer: normuon\nlearning_rate: 1e-2\nweight_decay: 0.01\n");
}

TEST_F(CudaOptimizerTrainingTest, AdamW8bitResumesExactly) { expect_exact_resume("adamw8bit", "optimizer: adamw_8bit\n"); }

TEST_F(CudaOptimizerTrainingTest, NorMuonResumesExactly) { expect_exact_resume("normuon", "optimizer: normuon\n"); }

}  // namespace
}  // namespace surogate::train
