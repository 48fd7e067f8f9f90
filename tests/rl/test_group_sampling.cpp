// Group rollouts (src/rl/group_sampling.h) on a tiny model: the group layout, greedy groups,
// sampled completions that resume exactly from the saved seed state.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "generate/kv_cache_model.h"
#include "rl/group_sampling.h"

namespace surogate::rl {
namespace {

std::filesystem::path fixture() {
  const char* override_dir = std::getenv("SUROGATE_FIXTURES_DIR");
  return std::filesystem::path(override_dir && *override_dir ? override_dir : SUROGATE_FIXTURES_DIR) / "llama_gqa_llama3";
}

std::unique_ptr<generate::NextTokenModel> open_model() {
  return generate::open_kv_cache_model(fixture(), {.slots = 4, .max_context = 32});
}

RolloutOptions sampled(int64_t generations) {
  RolloutOptions options;
  options.num_generations = generations;
  options.max_completion_length = 6;
  options.sampling.do_sample = true;
  options.sampling.temperature = 1.0;
  options.sampling.top_k = 0;
  return options;
}

std::vector<std::vector<int32_t>> ids_of(const std::vector<Rollout>& rollouts) {
  std::vector<std::vector<int32_t>> ids;
  for (const Rollout& rollout : rollouts) ids.push_back(rollout.completion_ids);
  return ids;
}

const std::vector<std::vector<int32_t>> kPrompts = {{1, 2, 3}, {4, 5, 6, 7}};

TEST(GroupSampling, GroupsFollowThePromptsAndGreedyGroupsAreAlike) {
  auto model = open_model();
  RolloutOptions options = sampled(3);
  options.sampling.do_sample = false;
  RolloutSeeds seeds(5);
  const std::vector<Rollout> rollouts = generate_groups(*model, kPrompts, options, seeds, nullptr);
  ASSERT_EQ(rollouts.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(rollouts[i].prompt, i / 3);
    EXPECT_EQ(rollouts[i].completion_ids, rollouts[i / 3 * 3].completion_ids);
    EXPECT_EQ(rollouts[i].finish_reason, "length");
  }
  EXPECT_EQ(seeds.drawn(), 6u);
}

TEST(GroupSampling, SampledGroupsResumeExactlyFromTheSavedState) {
  auto model = open_model();
  RolloutSeeds seeds(11);
  const std::vector<Rollout> first = generate_groups(*model, kPrompts, sampled(4), seeds, nullptr);
  // Samples of one group differ (the test could fail otherwise).
  EXPECT_NE(first[0].completion_ids, first[1].completion_ids);
  const nlohmann::json saved = seeds.to_json();
  const std::vector<Rollout> second = generate_groups(*model, kPrompts, sampled(4), seeds, nullptr);
  EXPECT_NE(ids_of(first), ids_of(second));
  RolloutSeeds resumed = RolloutSeeds::from_json(saved, "checkpoint");
  auto fresh = open_model();
  EXPECT_EQ(ids_of(generate_groups(*fresh, kPrompts, sampled(4), resumed, nullptr)), ids_of(second));
  EXPECT_THROW(RolloutSeeds::from_json({{"seed", 1}}, "checkpoint"), UserError);
}

}  // namespace
}  // namespace surogate::rl
