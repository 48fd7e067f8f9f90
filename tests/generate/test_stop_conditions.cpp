// stop_conditions.h: an EOS id (kept in the ids, not in the text), a stop string (the text cut
// before it, the ids up to the token that completed it), max_new_tokens, and what each push shows.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "generate/stop_conditions.h"
#include "user_error_of.h"

namespace surogate::generate {
namespace {

const tokenizer::Tokenizer& qwen3() {
  static const tokenizer::Tokenizer tokenizer =
      tokenizer::Tokenizer::load(std::filesystem::path(SUROGATE_TOKENIZERS_DIR) / "qwen3");
  return tokenizer;
}

constexpr int32_t kImEnd = 151645;  // Qwen3's <|im_end|>
constexpr int32_t kEndOfText = 151643;

struct Outcome {
  std::vector<int32_t> pushed;  // the ids pushed before the sequence finished
  std::string shown;            // what the pushes returned, together
  std::string text;
  std::vector<int32_t> ids;
  std::optional<FinishReason> reason;
};

Outcome run(const StopRules& rules, const std::vector<int32_t>& tokens,
            const tokenizer::Tokenizer* tokenizer = &qwen3()) {
  StopConditions stop(rules, tokenizer);
  Outcome result;
  for (int32_t token : tokens) {
    if (stop.finished()) break;
    result.pushed.push_back(token);
    result.shown += stop.push(token);
  }
  result.text = stop.text();
  result.ids = stop.ids();
  result.reason = stop.finish_reason();
  EXPECT_EQ(result.ids, result.pushed);
  if (stop.finished()) EXPECT_EQ(result.shown, result.text);  // the pieces add up to the text
  return result;
}

std::vector<int32_t> encode(const std::string& text) { return qwen3().encode(text, false); }

std::vector<int32_t> joined(std::vector<int32_t> ids, const std::vector<int32_t>& more) {
  ids.insert(ids.end(), more.begin(), more.end());
  return ids;
}

TEST(StopConditions, AnEosIdStopsAndStaysInTheIdsButNotTheText) {
  const std::vector<int32_t> hello = encode("Hello world");
  for (int32_t eos : {kImEnd, kEndOfText}) {
    const Outcome result = run({{kImEnd, kEndOfText}, {}, 100}, joined(hello, {eos, 9707}));
    EXPECT_EQ(result.reason, FinishReason::stop);
    EXPECT_EQ(result.ids, joined(hello, {eos}));
    EXPECT_EQ(result.text, "Hello world");
  }
}

TEST(StopConditions, MaxNewTokensEndsWithLength) {
  const std::vector<int32_t> ids = encode("one two three four five");
  const Outcome result = run({{kImEnd}, {}, 3}, ids);
  EXPECT_EQ(result.reason, FinishReason::length);
  EXPECT_EQ(result.ids, std::vector<int32_t>(ids.begin(), ids.begin() + 3));
  EXPECT_EQ(result.text, qwen3().decode(result.ids, true));
  // An EOS as the last allowed token still says stop.
  EXPECT_EQ(run({{kImEnd}, {}, 3}, joined({ids[0], ids[1]}, {kImEnd})).reason, FinishReason::stop);
}

TEST(StopConditions, AStopStringCutsTheTextAndEndsTheIdsAtTheTokenCompletingIt) {
  const std::vector<int32_t> ids = encode("Hello world, again and again");
  const Outcome result = run({{kImEnd}, {"lo wor"}, 100}, ids);  // spans "Hello" and " world"
  EXPECT_EQ(result.reason, FinishReason::stop);
  EXPECT_EQ(result.text, "Hel");
  EXPECT_EQ(result.ids, encode("Hello world"));
  // A stop string held back when the EOS comes is shown then: it was only a prefix.
  const Outcome held = run({{kImEnd}, {"world!"}, 100}, joined(encode("Hello world"), {kImEnd}));
  EXPECT_EQ(held.text, "Hello world");
  EXPECT_EQ(held.shown, "Hello world");
}

TEST(StopConditions, WithoutATokenizerThereIsNoText) {
  const Outcome result = run({{7}, {}, 5}, {1, 2, 7}, nullptr);
  EXPECT_EQ(result.reason, FinishReason::stop);
  EXPECT_EQ(result.ids, (std::vector<int32_t>{1, 2, 7}));
  EXPECT_EQ(result.text, "");
}

TEST(StopConditions, BadRulesAreUserErrorsAndAPushAfterTheEndABug) {
  EXPECT_EQ(error_of([] {
              StopConditions({{}, {}, 0}, &qwen3());
            }),
            "max_new_tokens must be >= 1, got 0");
  EXPECT_EQ(error_of([] {
              StopConditions({{}, {"x"}, 5}, nullptr);
            }),
            "stop strings need the model's tokenizer (tokenizer.json in the model folder)");
  EXPECT_EQ(error_of([] {
              StopConditions({{}, {""}, 5}, &qwen3());
            }),
            "a stop string must not be empty");
  StopConditions stop({{}, {}, 1}, &qwen3());
  stop.push(9707);
  EXPECT_THROW(stop.push(9707), InternalError);
  EXPECT_EQ(finish_reason_name(FinishReason::stop), "stop");
  EXPECT_EQ(finish_reason_name(FinishReason::length), "length");
}

}  // namespace
}  // namespace surogate::generate
