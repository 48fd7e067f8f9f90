// Offloading to pinned host memory (offload_master, offload_optimizer, offload_grads; staged or
// use_zero_copy; use_write_combined) on the quickstart model (tiny Llama from scratch, string
// reversal), against the same job without offloading.
// Tolerance: none. Offloading moves where the masters, the optimizer state and the gradient
// accumulators live, not what is computed: the same kernels run on the same values (through the
// mapping, or on a GPU slot the values were copied into), so the per-step losses are equal bit for
// bit, and the checkpoints' weights and optimizer state byte for byte. The staged runs use chunks
// of 96 KiB, so the quickstart model's step runs in many chunks alternating between both slots
// (train/device/host_offload_plan.h); a wrong copy, slot or ordering changes the result.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

class CudaHostOffloadTest : public CudaTrainerFixture {
protected:
  static TrainerOptions small_chunks() {
    TrainerOptions options = on(TrainingBackend::Cuda);
    options.offload_chunk_bytes = size_t{96} << 10;
    return options;
  }
  // `job` without offloading and with `offload` added: the same losses, eval loss, checkpoint
  // weights and optimizer state, bit for bit.
  static void expect_offload_changes_nothing(const std::string& name, const std::string& job, const std::string& offload) {
    expect_same_training(name, job, offload, on(TrainingBackend::Cuda), small_chunks());
  }
};

constexpr const char* kFull = "optimizer: adamw\ngradient_accumulation_steps: 2\nmax_grad_norm: 0.5\n";
constexpr const char* kFull8bit = "optimizer: adamw_8bit\ngradient_accumulation_steps: 2\n";
constexpr const char* kLora = "optimizer: adamw_8bit\nlora: true\nlora_rank: 8\nlora_alpha: 16\nlearning_rate: 1e-2\n";

TEST_F(CudaHostOffloadTest, StagedMastersAndOptimizerStateWithAdamW) {
  expect_offload_changes_nothing("staged-adamw", kFull, "offload_master: true\noffload_optimizer: true\n");
}

TEST_F(CudaHostOffloadTest, StagedEverythingWithAdamW8bit) {
  expect_offload_changes_nothing("staged-8bit", kFull8bit,
                                 "offload_master: true\noffload_optimizer: true\noffload_grads: true\n");
}

TEST_F(CudaHostOffloadTest, StagedOptimizerStateAloneAndMastersAlone) {
  expect_offload_changes_nothing("staged-state", kFull8bit, "offload_optimizer: true\n");
  expect_offload_changes_nothing("staged-masters", kFull, "offload_master: true\n");
}

TEST_F(CudaHostOffloadTest, StagedLoraWithWriteCombinedMemory) {
  expect_offload_changes_nothing("staged-lora", kLora,
                                 "offload_master: true\noffload_optimizer: true\nuse_write_combined: true\n");
}

TEST_F(CudaHostOffloadTest, ZeroCopyEverything) {
  expect_offload_changes_nothing(
      "zero-copy", kFull8bit, "offload_master: true\noffload_optimizer: true\noffload_grads: true\nuse_zero_copy: true\n");
}

TEST_F(CudaHostOffloadTest, ZeroCopyNorMuonBf16MastersAndBf16Gradients) {
  expect_offload_changes_nothing("zero-copy-normuon", "optimizer: normuon\nlearning_rate: 1e-2\n",
                                 "offload_optimizer: true\noffload_grads: true\nuse_zero_copy: true\n");
  expect_offload_changes_nothing("zero-copy-bf16", "optimizer: adamw\nmaster_dtype: bf16\ngradient_dtype: bf16\n",
                                 "offload_optimizer: true\noffload_grads: true\nuse_zero_copy: true\n");
}

TEST_F(CudaHostOffloadTest, AStagedRunResumesExactlyAndMatchesTheRunWithoutOffloading) {
  const std::string offload = "offload_master: true\noffload_optimizer: true\n";
  const std::string extra = std::string("max_steps: 10\nsave_steps: 5\n") + kFull8bit;
  TrainingResult straight = run_training(config("resume-straight", extra), on(TrainingBackend::Cuda));
  TrainerOptions interrupted = small_chunks();
  interrupted.stop_after_step = 5;
  TrainingResult first = run_training(config("resume-offloaded", extra + offload), interrupted);
  TrainingResult second =
      run_training(config("resume-offloaded", extra + offload + "resume_from_checkpoint: true\n"), small_chunks());
  EXPECT_EQ(second.first_step, 5);
  ASSERT_EQ(first.step_losses.size() + second.step_losses.size(), straight.step_losses.size());
  std::vector<double> joined = first.step_losses;
  joined.insert(joined.end(), second.step_losses.begin(), second.step_losses.end());
  for (size_t i = 0; i < joined.size(); ++i) EXPECT_EQ(joined[i], straight.step_losses[i]) << "step " << i + 1;
}

}  // namespace
}  // namespace surogate::train
