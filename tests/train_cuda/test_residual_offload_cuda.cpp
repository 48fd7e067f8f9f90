// offload_residual on the CUDA backend (the quickstart job): the residual checkpoints are copied
// to pinned host memory and back on side streams (runtime/cuda_host_copies.h) while the kernels
// run, against the same job without the option.
// Tolerance: none. The copies move bytes and the kernels are the same, so the per-step losses,
// eval loss and checkpoints (weights, optimizer state) are equal bit for bit; a copy that a kernel
// overtakes (a missing join, a source overwritten before its copy ran, a fetch read too early)
// changes them. With every group recomputed (TrainerOptions::recompute: the tiny model would fit
// without) and with the memory-driven choice; with a captured CUDA graph (the fork and join
// events become graph edges; a capture CUDA refuses would print a use_cuda_graphs warning, which
// fails the test) and without; with debug_time_breakdown (the per-step event path); LoRA with
// recompute_lora, which turns graphs off as the reference says.
#include <gtest/gtest.h>

#include <string>

#include "train_cuda/cuda_trainer_fixture.h"

namespace surogate::train {
namespace {

class CudaResidualOffloadTest : public CudaTrainerFixture {
protected:
  static TrainerOptions cuda(std::optional<compiler::RecomputePolicy> recompute) {
    TrainerOptions options = on(TrainingBackend::Cuda);
    options.recompute = recompute;
    return options;
  }
  // `job` with and without offload_residual: equal bit for bit, and no graph capture refused.
  static void expect_offload_changes_nothing(const std::string& name, const std::string& job,
                                             std::optional<compiler::RecomputePolicy> recompute) {
    ::testing::internal::CaptureStderr();
    expect_same_training(name, job, "offload_residual: true\n", cuda(recompute), cuda(recompute));
    const std::string warnings = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(warnings.find("use_cuda_graphs"), std::string::npos) << warnings;
  }
};

const compiler::RecomputePolicy kBlock = compiler::RecomputePolicy::all();
constexpr const char* kFull = "optimizer: adamw\ngradient_accumulation_steps: 2\n";

TEST_F(CudaResidualOffloadTest, RecomputeBlockWithCudaGraphs) {
  expect_offload_changes_nothing("block-graphs", std::string(kFull) + "use_cuda_graphs: true\n", kBlock);
}

TEST_F(CudaResidualOffloadTest, RecomputeBlockWithoutCudaGraphs) {
  expect_offload_changes_nothing("block-eager", std::string(kFull) + "use_cuda_graphs: false\n", kBlock);
}

TEST_F(CudaResidualOffloadTest, MemoryChosenRecomputeWithCudaGraphs) {
  expect_offload_changes_nothing("chosen-graphs", std::string(kFull) + "use_cuda_graphs: true\n", std::nullopt);
}

TEST_F(CudaResidualOffloadTest, RecomputeBlockWithTheTimeBreakdown) {
  expect_offload_changes_nothing("block-breakdown", std::string(kFull) + "debug_time_breakdown: true\n", kBlock);
}

TEST_F(CudaResidualOffloadTest, LoraWithRecomputeLoraAndDropout) {
  expect_offload_changes_nothing(
      "lora", "optimizer: adamw_8bit\nlora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.1\n"
              "learning_rate: 1e-2\nrecompute_lora: true\n", kBlock);
}

}  // namespace
}  // namespace surogate::train
