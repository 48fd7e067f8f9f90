// offload_residual end to end on the CPU backend (the quickstart job): the CPU backend runs the
// same plan as the GPU, its host copies being memcpys into the plan's host region, so training
// with the option equals training without it bit for bit: per-step losses, eval loss, checkpoint
// weights and optimizer state. Tolerance: none (the copies move bytes; no value changes). Run
// with the memory-driven recompute choice (nothing recomputed on this tiny model) and with every
// group recomputed (TrainerOptions::recompute), the combination the option is meant for; full
// fine-tuning, LoRA with dropout, two data-parallel ranks. The memory breakdown the run prints shows the checkpoints in
// the host region: the option took effect.
#include <gtest/gtest.h>

#include <regex>

#include "trainer_fixture.h"

namespace surogate::train {
namespace {

class ResidualOffloadTraining : public TrainerFixture {
protected:
  static TrainerOptions cpu(std::optional<compiler::RecomputePolicy> recompute = std::nullopt) {
    TrainerOptions options = quiet();
    options.backend = TrainingBackend::Cpu;
    options.recompute = recompute;
    return options;
  }
  // expect_same_training with offload_residual added, and the breakdown saying how many
  // checkpoints went to the host region.
  static void expect_offload_changes_nothing(const std::string& name, const std::string& job,
                                             std::optional<compiler::RecomputePolicy> recompute, int checkpoints) {
    ::testing::internal::CaptureStdout();
    expect_same_training(name, job, "offload_residual: true\ndebug_memory_breakdown: true\n", cpu(recompute),
                         cpu(recompute));
    const std::string printed = ::testing::internal::GetCapturedStdout();
    std::smatch match;
    ASSERT_TRUE(std::regex_search(printed, match, std::regex(R"(host region .*\((\d+) residual checkpoints)"))) << printed;
    EXPECT_EQ(std::stoi(match[1]), checkpoints) << name;
  }
};

constexpr const char* kLora = "lora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.1\nlearning_rate: 1e-2\n";

// The quickstart model has 2 layers: layer 0's two checkpoints (the embeddings, the stream after
// its attention) go to the host; the top layer keeps its own.
TEST_F(ResidualOffloadTraining, FullFineTuningEqualsTheRunWithoutIt) {
  expect_offload_changes_nothing("full", "optimizer: adamw\n", std::nullopt, 2);
}

TEST_F(ResidualOffloadTraining, FullFineTuningWithRecomputeBlockEqualsTheRunWithoutIt) {
  expect_offload_changes_nothing("full-block", "optimizer: adamw_8bit\n", compiler::RecomputePolicy::all(), 2);
}

TEST_F(ResidualOffloadTraining, LoraWithDropoutAndRecomputeBlockEqualsTheRunWithoutIt) {
  expect_offload_changes_nothing("lora-block", kLora, compiler::RecomputePolicy::all(), 2);
}

// Two data-parallel CPU ranks: each rank's backend has its own host region.
TEST_F(ResidualOffloadTraining, DataParallelRanksEqualTheRunWithoutIt) {
  expect_offload_changes_nothing("ranks", "optimizer: adamw\ngpus: 2\n", compiler::RecomputePolicy::all(), 2);
}

}  // namespace
}  // namespace surogate::train
