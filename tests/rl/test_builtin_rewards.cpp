// The built-in rewards (src/rl/builtin_rewards.h) and `reward_functions` entries
// (src/rl/reward_functions.h).
#include <gtest/gtest.h>

#include "core/error.h"
#include "rl/builtin_rewards.h"
#include "rl/reward_functions.h"

namespace surogate::rl {
namespace {

RewardBatch batch_of(const std::vector<std::string>& texts, const std::vector<nlohmann::ordered_json>& answers) {
  RewardBatch batch;
  for (size_t i = 0; i < texts.size(); ++i) {
    batch.add("q", {{"answer", answers[i]}}, texts[i], std::vector<int32_t>(texts[i].size(), 1),
              "data.jsonl:" + std::to_string(i + 1));
  }
  return batch;
}

TEST(BuiltinRewards, AnswerExtraction) {
  EXPECT_EQ(extract_answer("so \\boxed{1} or \\boxed{\\frac{1}{2}} maybe 7"), "\\frac{1}{2}");
  EXPECT_EQ(extract_answer("steps 3 + 4\n#### 7\nthanks"), "7");
  EXPECT_EQ(extract_answer("we get 1,234.5 then -12 apples."), "-12");
  EXPECT_EQ(extract_answer("no numbers here"), std::nullopt);
  EXPECT_EQ(extract_answer("\\boxed{open"), std::nullopt);  // an unclosed box, no number either
}

TEST(BuiltinRewards, AnswersCompareAsNumbersWhenBothAreNumbers) {
  EXPECT_TRUE(answers_match("1,234", "1234"));
  EXPECT_TRUE(answers_match("3.0", " 3"));
  EXPECT_FALSE(answers_match("3.5", "3"));
  EXPECT_TRUE(answers_match(" Paris ", "Paris"));
  EXPECT_FALSE(answers_match("paris", "Paris"));
}

TEST(BuiltinRewards, ExactMatchAgainstAColumn) {
  const RewardBatch batch = batch_of({"the answer is 12", "\\boxed{12}", "#### 13", "nothing"}, {"12", 12, "12", "12"});
  EXPECT_EQ(exact_match_rewards(batch, "answer"), (std::vector<double>{1, 1, 0, 0}));
  try {
    exact_match_rewards(batch, "solution");
    FAIL();
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("the row at data.jsonl:1 has no 'solution' column"), std::string::npos);
  }
}

TEST(BuiltinRewards, FormatMatchesTheWholeCompletion) {
  const RewardBatch batch = batch_of({"<think>a\nb</think><answer>3</answer>", "<answer>3</answer>", "x<think></think><answer>3</answer>"},
                                     {"3", "3", "3"});
  EXPECT_EQ(format_rewards(batch, R"(<think>[\s\S]*</think><answer>[\s\S]*</answer>)"), (std::vector<double>{1, 0, 0}));
  EXPECT_THROW(format_rewards(batch, "(unclosed"), UserError);
}

TEST(BuiltinRewards, LengthPenaltyPastTheBudget) {
  const RewardBatch batch = batch_of({"abc", "abcdef", "abcdefghi"}, {"", "", ""});
  EXPECT_EQ(length_penalty_rewards(batch, 6), (std::vector<double>{0.0, 0.0, -0.5}));
}

TEST(RewardFunctions, EntriesParse) {
  const RewardFunctionSpec python = parse_reward_function("rewards.py:correct", "/runs/cfg");
  EXPECT_EQ(python.kind, RewardKind::Python);
  EXPECT_EQ(python.argument, "/runs/cfg/rewards.py:correct");
  EXPECT_EQ(python.name, "correct");
  EXPECT_EQ(parse_reward_function("/abs/r.py:f", "/x").argument, "/abs/r.py:f");
  EXPECT_EQ(parse_reward_function("exact_match", "/x").argument, "answer");
  EXPECT_EQ(parse_reward_function("exact_match:solution", "/x").argument, "solution");
  const RewardFunctionSpec format = parse_reward_function("format:^a:b$", "/x");
  EXPECT_EQ(format.kind, RewardKind::Format);
  EXPECT_EQ(format.argument, "^a:b$");
  EXPECT_EQ(parse_reward_function("length_penalty:200", "/x").tokens, 200);
  for (const char* bad : {"rewards.py", "rewards.py:", "format", "length_penalty:0", "length_penalty:x", "accuracy"}) {
    EXPECT_THROW(parse_reward_function(bad, "/x"), UserError) << bad;
  }
}

TEST(RewardFunctions, BuiltinsScoreWithoutPython) {
  RewardFunctions functions({"exact_match", "length_penalty:4"}, "/x");
  const RewardBatch batch = batch_of({"it is 5", "it is 6"}, {"5", "5"});
  EXPECT_EQ(functions.score(batch), (std::vector<std::vector<double>>{{1, 0}, {-0.75, -0.75}}));
  EXPECT_THROW(RewardFunctions({}, "/x"), UserError);
}

}  // namespace
}  // namespace surogate::rl
