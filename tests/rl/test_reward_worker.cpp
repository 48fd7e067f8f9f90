// The Python reward worker (src/rl/reward_worker.h, python/surogate/reward_worker.py) on reward
// files written here: values and None, TRL's keyword arguments, prints kept off the protocol, and
// one UserError naming the function and the row for each mistake a user's code can make.
#include <gtest/gtest.h>

#include <cmath>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "rl/reward_functions.h"
#include "rl/reward_worker.h"

namespace surogate::rl {
namespace {

const char* kRewards = R"(
def correct(prompts, completions, answer, **kwargs):
    return [1.0 if c.strip() == a else 0.0 for c, a in zip(completions, answer)]

def lengths(prompts, completions, completion_ids, **kwargs):
    print("lengths says hello")  # must not break the protocol
    return [len(ids) for ids in completion_ids]

def maybe(prompts, completions, **kwargs):
    return [None if c == "skip" else 0.5 for c in completions]

def chat_content(prompts, completions, **kwargs):
    return [float(len(c[0]["content"])) if isinstance(c, list) else -1.0 for c in completions]

def raises(prompts, completions, **kwargs):
    for c in completions:
        if c == "boom":
            raise ValueError("cannot score boom")
    return [0.0] * len(completions)

def wrong_length(prompts, completions, **kwargs):
    return [1.0]

def not_a_number(prompts, completions, **kwargs):
    return [1.0, "high", 0.0][: len(completions)]
)";

class RewardWorkerTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "rewards.py") << kRewards;
    std::ofstream(dir_ / "broken.py") << "def f(:\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string fn(const std::string& name) const { return (dir_ / "rewards.py").string() + ":" + name; }

  static RewardBatch batch(const std::vector<std::string>& texts, const nlohmann::ordered_json& prompt = "q") {
    RewardBatch result;
    for (size_t i = 0; i < texts.size(); ++i) {
      result.add(prompt, {{"answer", "4"}}, texts[i], std::vector<int32_t>(i + 1, 7), "data.jsonl:" + std::to_string(i + 3));
    }
    return result;
  }

  // The UserError's message of `function` scoring `texts`.
  std::string error_of(const std::string& function, const std::vector<std::string>& texts) {
    RewardWorker worker({function});
    try {
      worker.score(function, batch(texts));
    } catch (const UserError& error) {
      return error.what();
    }
    return "";
  }

  // One per test process: ctest runs the cases as processes of their own, side by side.
  const std::filesystem::path dir_ = std::filesystem::temp_directory_path() / ("surogate_reward_worker_test_" + std::to_string(::getpid()));
};

TEST_F(RewardWorkerTest, ScoresWithTrlsArgumentsAndKeepsRunning) {
  RewardWorker worker({fn("correct"), fn("lengths"), fn("maybe")});
  EXPECT_EQ(worker.score(fn("correct"), batch({"4", " 4 ", "5"})), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(worker.score(fn("lengths"), batch({"a", "b"})), (std::vector<double>{1, 2}));
  const std::vector<double> maybe = worker.score(fn("maybe"), batch({"x", "skip"}));
  EXPECT_EQ(maybe[0], 0.5);
  EXPECT_TRUE(std::isnan(maybe[1]));
  // Chat prompts get TRL's completions: [{"role": "assistant", "content": text}].
  RewardWorker chat({fn("chat_content")});
  const nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(chat.score(fn("chat_content"), batch({"abc"}, messages)), (std::vector<double>{3}));
  EXPECT_EQ(chat.score(fn("chat_content"), batch({"abc"})), (std::vector<double>{-1}));
}

TEST_F(RewardWorkerTest, AFunctionThatRaisesNamesItselfAndTheRow) {
  const std::string message = error_of(fn("raises"), {"ok", "boom", "ok"});
  EXPECT_NE(message.find("reward function '" + fn("raises") + "' raised on row 1: ValueError: cannot score boom"),
            std::string::npos) << message;
  EXPECT_NE(message.find("rewards.py:"), std::string::npos) << message;       // the line that raised
  EXPECT_NE(message.find("(that row's prompt is data.jsonl:4)"), std::string::npos) << message;
}

TEST_F(RewardWorkerTest, WrongLengthAndNonNumbersAreRefused) {
  const std::string length = error_of(fn("wrong_length"), {"a", "b"});
  EXPECT_NE(length.find("'" + fn("wrong_length") + "' returned 1 rewards for 2 completions"), std::string::npos) << length;
  const std::string number = error_of(fn("not_a_number"), {"a", "b", "c"});
  EXPECT_NE(number.find("'" + fn("not_a_number") + "' returned 'high' (str) on row 1, not a finite number or None"),
            std::string::npos) << number;
  EXPECT_NE(number.find("(that row's prompt is data.jsonl:4)"), std::string::npos) << number;
}

TEST_F(RewardWorkerTest, MissingFilesAndFunctionsAreNamedWhenLoading) {
  auto load_error = [](const std::string& function) -> std::string {
    try {
      RewardWorker worker({function});
    } catch (const UserError& error) {
      return error.what();
    }
    return "";
  };
  EXPECT_NE(load_error(fn("absent")).find("defines no function 'absent'"), std::string::npos);
  const std::string missing = (dir_ / "nowhere.py").string() + ":f";
  EXPECT_NE(load_error(missing).find("the file '" + (dir_ / "nowhere.py").string() + "' does not exist"),
            std::string::npos);
  const std::string broken = load_error((dir_ / "broken.py").string() + ":f");
  EXPECT_NE(broken.find("importing '" + (dir_ / "broken.py").string() + "' failed: SyntaxError"), std::string::npos)
      << broken;
}

TEST_F(RewardWorkerTest, RewardFunctionsMixPythonAndBuiltins) {
  RewardFunctions functions({"rewards.py:correct", "exact_match"}, dir_);
  EXPECT_EQ(functions.specs()[0].name, "correct");
  EXPECT_EQ(functions.score(batch({"4", "the answer: 5"})), (std::vector<std::vector<double>>{{1, 0}, {1, 0}}));
}

}  // namespace
}  // namespace surogate::rl
