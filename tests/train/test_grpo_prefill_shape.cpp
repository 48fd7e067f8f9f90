// train/objective/grpo_rollout_model.h's prefill plan for the rollouts: rows as long as
// max_prompt_length (at most 256) and as many as make kGrpoPrefillTokens, at least 4, never more
// than the rollout slots.
#include <gtest/gtest.h>

#include <cstdint>

#include "train/objective/grpo_rollout_model.h"

namespace surogate::train {
namespace {

generate::PrefillShape shape(int64_t max_prompt_length, int64_t completions, int64_t generation_batch) {
  Config config;
  config.grpo.max_prompt_length = max_prompt_length;
  config.schedule.per_device_train_batch_size = completions;
  config.schedule.gradient_accumulation_steps = 1;
  config.grpo.generation_batch_size = generation_batch;
  return grpo_prefill_shape(config);
}

TEST(GrpoPrefillShape, RowsOfThePromptLengthAsManyAsMakeTheRoundsTokens) {
  const generate::PrefillShape short_prompts = shape(64, 512, 512);
  EXPECT_EQ(short_prompts.chunk, 64);
  EXPECT_EQ(short_prompts.rows, kGrpoPrefillTokens / 64);
  const generate::PrefillShape odd = shape(100, 512, 512);
  EXPECT_EQ(odd.chunk, 100);
  EXPECT_EQ(odd.rows, 10);
  // TRL's default 512: the KV cache model's default plan, 4 rows of 256.
  const generate::PrefillShape long_prompts = shape(512, 512, 512);
  EXPECT_EQ(long_prompts.chunk, 256);
  EXPECT_EQ(long_prompts.rows, 4);
}

TEST(GrpoPrefillShape, NeverMoreRowsThanSlots) {
  EXPECT_EQ(shape(16, 8, 512).rows, 8);   // 8 completions a step: 8 slots
  EXPECT_EQ(shape(16, 512, 32).rows, 32);  // 32 generated at once
  EXPECT_EQ(shape(512, 2, 512).rows, 2);
}

}  // namespace
}  // namespace surogate::train
