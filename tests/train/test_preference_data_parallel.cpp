// `surogate dpo` on CPU data-parallel ranks (preference_run.h: the quickstart model on reversal
// pairs, LoRA r 4) against one rank with the same global batch: 2 ranks × accumulation 2 against
// 1 × 4, ZeRO-1 and ZeRO-3, dpo (the reference pass on every rank over its own pairs) and orpo (its
// NLL term over every rank's chosen tokens). The same pairs in the same order, the loss scaled by
// 1 / the pairs of the whole step on every rank: per-step losses, the final eval loss and reward
// accuracy within 2e-4 relative and the adapters within 5e-5 after 4 steps — test_data_parallel.cpp's
// tolerances for sft (the order of fp32 additions only). The data-parallel device with a world of
// one (its rank thread, outputs kept by the rank engine) equals the plain device bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "cpu_ranks_fixture.h"
#include "preference_run.h"

namespace surogate::train {
namespace {

constexpr double kRelativeTolerance = 2e-4;
constexpr double kWeightTolerance = 5e-5;
const std::string kPreferenceJob = "max_steps: 4\nmax_length: 16\nlora: true\nlora_rank: 4\nlora_alpha: 8\n"
                                   "lora_dropout: 0.0\nlearning_rate: 1e-2\nper_device_train_batch_size: 2\n"
                                   "validation_split_ratio: 0.25\n";

class PreferenceDataParallelTest : public CpuRanksFixture {};

TEST_F(PreferenceDataParallelTest, TwoRanksMatchOneRankWithTheSameGlobalBatch) {
  const std::filesystem::path pairs = preference_pairs(root_);
  for (const std::string loss : {"dpo", "orpo"}) {
    TrainingResult one = run_training(
        as_preference_run(config(loss + "_1", kPreferenceJob + "gradient_accumulation_steps: 4\n"), pairs, loss), cpu());
    ASSERT_EQ(one.step_losses.size(), 4u);
    ASSERT_TRUE(one.eval_loss && one.eval_accuracy);
    for (const std::string zero : {"1", "3"}) {
      SCOPED_TRACE(loss + " zero_level " + zero);
      const std::string name = loss + "_2_z" + zero;
      TrainingResult two = run_training(
          as_preference_run(config(name, kPreferenceJob + "gpus: 2\ngradient_accumulation_steps: 2\nzero_level: " + zero + "\n"),
                            pairs, loss),
          cpu());
      ASSERT_EQ(two.step_losses.size(), one.step_losses.size());
      for (size_t i = 0; i < one.step_losses.size(); ++i) {
        EXPECT_NEAR(two.step_losses[i], one.step_losses[i], kRelativeTolerance * std::fabs(one.step_losses[i])) << "step " << i + 1;
      }
      ASSERT_TRUE(two.eval_loss && two.eval_accuracy);
      EXPECT_NEAR(*two.eval_loss, *one.eval_loss, kRelativeTolerance * *one.eval_loss);
      EXPECT_NEAR(*two.eval_accuracy, *one.eval_accuracy, 1e-12);  // a count of pairs over the same pairs
      EXPECT_LT(largest_f32_difference(root_ / (loss + "_1") / "checkpoint-4" / "model.safetensors",
                                       root_ / name / "checkpoint-4" / "model.safetensors"),
                kWeightTolerance);
    }
  }
}

TEST_F(PreferenceDataParallelTest, AWorldOfOneEqualsThePlainDevice) {
  const std::filesystem::path pairs = preference_pairs(root_);
  TrainerOptions one = cpu();
  one.data_parallel_device = true;
  const std::string job = kPreferenceJob + "gradient_accumulation_steps: 2\n";
  TrainingResult a = run_training(as_preference_run(config("dpo_plain", job), pairs, "dpo"), cpu());
  TrainingResult b = run_training(as_preference_run(config("dpo_world_of_one", job), pairs, "dpo"), one);
  ASSERT_EQ(a.step_losses.size(), b.step_losses.size());
  for (size_t i = 0; i < a.step_losses.size(); ++i) EXPECT_EQ(a.step_losses[i], b.step_losses[i]) << "step " << i + 1;
  ASSERT_TRUE(a.eval_loss && b.eval_loss);
  EXPECT_EQ(*a.eval_loss, *b.eval_loss);
  EXPECT_EQ(largest_f32_difference(root_ / "dpo_plain" / "checkpoint-4" / "model.safetensors",
                                   root_ / "dpo_world_of_one" / "checkpoint-4" / "model.safetensors"),
            0.0);
}

}  // namespace
}  // namespace surogate::train
