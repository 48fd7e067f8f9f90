// The GenerationEngine over a fake model: sequences take slots in order, events come per token
// with logprobs of the unprocessed logits, long prompts come in chunks while others decode, a
// prompt several sequences share is fed once and copied, a cancelled sequence frees its slot at
// the next step, a failing feed drops everything and throws.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/error.h"
#include "generate/engine.h"
#include "user_error_of.h"

namespace surogate::generate {
namespace {

// Vocabulary of 5; the next token's logits favour (last token + 1) % 5. Records each feed.
class CountingModel : public NextTokenModel {
 public:
  std::span<float> feed_in_place(std::span<const SlotFeed> feeds) override {
    if (fail) throw std::runtime_error("feed failed");
    logits.clear();
    std::vector<int64_t> fed, lengths;
    for (const SlotFeed& feed : feeds) {
      held_[feed.slot] += static_cast<int64_t>(feed.tokens.size());
      fed.push_back(feed.slot);
      lengths.push_back(static_cast<int64_t>(feed.tokens.size()));
      for (int32_t token = 0; token < 5; ++token) {
        logits.push_back(token == (feed.tokens.back() + 1) % 5 ? 2.0f : static_cast<float>(token) * 0.1f);
      }
    }
    calls.push_back(fed);
    sizes.push_back(lengths);
    return logits;
  }
  void clear(int64_t slot) override { held_[slot] = 0; }
  int64_t held(int64_t slot) const override { return held_.count(slot) ? held_.at(slot) : 0; }
  int64_t slots() const override { return 2; }
  int64_t max_context() const override { return 32; }
  int64_t vocab_size() const override { return 5; }
  int64_t prefill_chunk() const override { return chunk; }

  std::vector<float> logits;                // the last feed's
  std::vector<std::vector<int64_t>> calls;  // the slots of each feed
  std::vector<std::vector<int64_t>> sizes;  // the tokens of each slot fed, per feed
  bool fail = false;
  int64_t chunk = 0;  // prefill_chunk()

 protected:
  std::map<int64_t, int64_t> held_;
};

// CountingModel with three slots that copies prefixes (recording each call's copies).
class SharingModel : public CountingModel {
 public:
  int64_t slots() const override { return 3; }
  bool copies_prefixes() const override { return true; }
  void copy_prefixes(std::span<const PrefixCopy> copies) override {
    std::vector<std::vector<int64_t>> call;
    for (const PrefixCopy& copy : copies) {
      EXPECT_GE(held(copy.from), copy.tokens);
      held_[copy.to] = copy.tokens;
      call.push_back({copy.from, copy.to, copy.tokens});
    }
    copied.push_back(call);
  }
  std::vector<std::vector<std::vector<int64_t>>> copied;  // {from, to, tokens} of each call
};

GenerationRequest request(int32_t first, int64_t new_tokens) {
  GenerationRequest out;
  out.prompt = {first};
  out.max_new_tokens = new_tokens;
  return out;
}

TEST(GenerationEngine, SequencesTakeFreeSlotsAndFinish) {
  CountingModel model;
  GenerationEngine engine(model, nullptr);
  std::map<int, std::vector<int32_t>> tokens;
  std::map<int, FinishReason> finish;
  for (int index = 0; index < 3; ++index) {
    engine.submit(request(index, 2), [&, index](const TokenEvent& event) {
      tokens[index].push_back(event.token);
      if (event.finish) finish[index] = *event.finish;
    });
  }
  while (engine.has_work()) engine.step();
  EXPECT_EQ(tokens[0], (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(tokens[1], (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(tokens[2], (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(finish.size(), 3u);
  EXPECT_EQ(finish[2], FinishReason::length);
  // Two slots: the third sequence starts when the first two finished, in slot 0 (freed first).
  EXPECT_EQ(model.calls, (std::vector<std::vector<int64_t>>{{0, 1}, {0, 1}, {0}, {0}}));
}

TEST(GenerationEngine, LogprobsAreOfTheUnprocessedLogits) {
  CountingModel model;
  GenerationEngine engine(model, nullptr);
  std::vector<TokenEvent> events;
  engine.submit(request(0, 1), [&](const TokenEvent& event) { events.push_back(event); }, 2);
  engine.step();
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(events[0].logprobs);
  double total = std::exp(2.0);
  for (int token : {0, 2, 3, 4}) total += std::exp(token * 0.1);
  EXPECT_NEAR(events[0].logprobs->chosen, 2.0 - std::log(total), 1e-6);
  ASSERT_EQ(events[0].logprobs->top.size(), 2u);
  EXPECT_EQ(events[0].logprobs->top[0].token, 1);
  EXPECT_EQ(events[0].logprobs->top[1].token, 4);
  EXPECT_FALSE(engine.has_work());
}

TEST(GenerationEngine, ACancelledSequenceFreesItsSlotAtTheNextStep) {
  CountingModel model;
  GenerationEngine engine(model, nullptr);
  int cancelled_events = 0;
  const uint64_t first = engine.submit(request(0, 10), [&](const TokenEvent&) { ++cancelled_events; });
  engine.submit(request(1, 10), [](const TokenEvent&) {});
  std::vector<int32_t> third;
  engine.submit(request(2, 1), [&](const TokenEvent& event) { third.push_back(event.token); });
  engine.step();
  engine.cancel(first);
  engine.step();  // the third takes slot 0, prefilled beside the second's decode
  EXPECT_EQ(cancelled_events, 1);
  EXPECT_EQ(third, (std::vector<int32_t>{3}));
  EXPECT_EQ(model.calls.back(), (std::vector<int64_t>{1, 0}));
  const uint64_t waiting = engine.submit(request(3, 1), [](const TokenEvent&) { FAIL() << "cancelled while waiting"; });
  engine.cancel(waiting);
  engine.cancel(12345);  // unknown: ignored
  engine.clear();
  EXPECT_FALSE(engine.has_work());
}

TEST(GenerationEngine, ALongPromptComesInChunksWhileAnotherSequenceDecodes) {
  CountingModel model;
  GenerationEngine engine(model, nullptr, /*max_prefill_tokens=*/4);
  std::vector<int32_t> short_tokens, long_tokens;
  engine.submit(request(0, 6), [&](const TokenEvent& event) { short_tokens.push_back(event.token); });
  engine.step();  // the short prompt (1 token) in, its first token out
  GenerationRequest long_request = request(0, 2);
  long_request.prompt = {1, 2, 3, 4, 0, 1, 2, 3, 4, 2};
  engine.submit(long_request, [&](const TokenEvent& event) { long_tokens.push_back(event.token); });
  while (engine.has_work()) engine.step();
  // The decoding sequence gets a token every step; the prompt comes 4, 4, 2 tokens at a time, and
  // its first token is sampled at the step that feeds the last of it.
  EXPECT_EQ(model.sizes, (std::vector<std::vector<int64_t>>{{1}, {1, 4}, {1, 4}, {1, 2}, {1, 1}, {1}}));
  EXPECT_EQ(short_tokens, (std::vector<int32_t>{1, 2, 3, 4, 0, 1}));
  EXPECT_EQ(long_tokens, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(engine.stats().prompt_tokens, 11);
  EXPECT_EQ(engine.stats().generated_tokens, 8);
}

TEST(GenerationEngine, TheSecondPromptTakesWhatTheFirstLeavesOfTheBudget) {
  CountingModel model;
  GenerationEngine engine(model, nullptr, /*max_prefill_tokens=*/5);
  GenerationRequest first = request(0, 1), second = request(0, 1);
  first.prompt = {1, 1, 1};
  second.prompt = {2, 2, 2, 2};
  std::vector<int32_t> tokens;
  engine.submit(first, [&](const TokenEvent& event) { tokens.push_back(event.token); });
  engine.submit(second, [&](const TokenEvent& event) { tokens.push_back(event.token); });
  while (engine.has_work()) engine.step();
  EXPECT_EQ(model.sizes, (std::vector<std::vector<int64_t>>{{3, 2}, {2}}));
  EXPECT_EQ(tokens, (std::vector<int32_t>{2, 3}));
  EXPECT_THROW(GenerationEngine(model, nullptr, 0), UserError);
}

TEST(GenerationEngine, SeveralPromptsTakeAChunkEachALoneOneWhatTheBudgetAllows) {
  CountingModel model;
  model.chunk = 3;
  GenerationEngine engine(model, nullptr, /*max_prefill_tokens=*/8);
  GenerationRequest prompt = request(0, 1);
  prompt.prompt = {1, 2, 3, 4, 0, 1};
  engine.submit(prompt, [](const TokenEvent&) {});
  engine.submit(prompt, [](const TokenEvent&) {});
  while (engine.has_work()) engine.step();
  engine.submit(prompt, [](const TokenEvent&) {});
  while (engine.has_work()) engine.step();
  EXPECT_EQ(model.sizes, (std::vector<std::vector<int64_t>>{{3, 3}, {3, 3}, {6}}));
}

TEST(GenerationEngine, APromptSharedBySequencesIsFedOnceAndCopied) {
  SharingModel model;
  GenerationEngine engine(model, nullptr);
  GenerationRequest shared = request(0, 3);
  shared.prompt = {1, 2, 3, 4};
  std::map<int, std::vector<int32_t>> tokens;
  for (int index = 0; index < 3; ++index) {
    engine.submit(shared, [&, index](const TokenEvent& event) { tokens[index].push_back(event.token); });
  }
  while (engine.has_work()) engine.step();
  // The first feeds the prompt while the others wait; they then take its first three tokens and
  // feed the fourth beside its decode.
  EXPECT_EQ(model.calls, (std::vector<std::vector<int64_t>>{{0}, {0, 1, 2}, {0, 1, 2}, {1, 2}}));
  EXPECT_EQ(model.sizes, (std::vector<std::vector<int64_t>>{{4}, {1, 1, 1}, {1, 1, 1}, {1, 1}}));
  EXPECT_EQ(model.copied, (std::vector<std::vector<std::vector<int64_t>>>{{{0, 1, 3}, {0, 2, 3}}}));
  for (int index = 0; index < 3; ++index) EXPECT_EQ(tokens[index], (std::vector<int32_t>{0, 1, 2})) << index;
  EXPECT_EQ(engine.stats().prompt_tokens, 6);  // 4 + the last token of each copied prompt
  EXPECT_EQ(engine.stats().shared_prompt_tokens, 6);
}

TEST(GenerationEngine, ASequenceWhosePromptsSourceFinishedFirstFeedsItsOwn) {
  SharingModel model;
  GenerationEngine engine(model, nullptr);
  GenerationRequest once = request(0, 1), twice = request(0, 2);
  once.prompt = twice.prompt = {2, 2, 2};
  std::vector<int32_t> tokens;
  engine.submit(once, [](const TokenEvent&) {});  // done at the step that feeds its prompt
  engine.submit(twice, [&](const TokenEvent& event) { tokens.push_back(event.token); });
  while (engine.has_work()) engine.step();
  EXPECT_TRUE(model.copied.empty());
  EXPECT_EQ(model.sizes, (std::vector<std::vector<int64_t>>{{3}, {3}, {1}}));
  EXPECT_EQ(tokens, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(engine.stats().shared_prompt_tokens, 0);
}

TEST(GenerationEngine, CancellingTheSourceOrTheWaitingSequenceBeforeTheCopy) {
  SharingModel model;
  GenerationEngine engine(model, nullptr);
  GenerationRequest shared = request(0, 2);
  shared.prompt = {3, 3, 3, 3};
  std::vector<int32_t> kept;
  const uint64_t source = engine.submit(shared, [](const TokenEvent&) {});
  engine.submit(shared, [&](const TokenEvent& event) { kept.push_back(event.token); });
  const uint64_t dropped = engine.submit(shared, [](const TokenEvent&) { FAIL() << "cancelled while waiting"; });
  engine.step();  // the source feeds the prompt; the other two wait for it
  engine.cancel(source);
  engine.cancel(dropped);
  while (engine.has_work()) engine.step();
  // The source gone before the copy: the remaining one feeds its whole prompt; nothing is copied.
  EXPECT_TRUE(model.copied.empty());
  EXPECT_EQ(model.sizes, (std::vector<std::vector<int64_t>>{{4}, {4}, {1}}));
  EXPECT_EQ(kept, (std::vector<int32_t>{4, 0}));
}

TEST(GenerationEngine, AFailingFeedDropsEverySequence) {
  CountingModel model;
  GenerationEngine engine(model, nullptr);
  engine.submit(request(0, 3), [](const TokenEvent&) {});
  model.fail = true;
  EXPECT_THROW(engine.step(), std::runtime_error);
  EXPECT_FALSE(engine.has_work());
  model.fail = false;
  int events = 0;
  engine.submit(request(0, 2), [&](const TokenEvent&) { ++events; });
  while (engine.has_work()) engine.step();
  EXPECT_EQ(events, 2);  // both slots are free again
}

// CountingModel whose greedy choice is its own (last token + 2) % 5, not the logits' argmax, so a
// test sees which path chose; `unusable` makes it report logits with NaN (-1).
class DeviceChoiceModel : public CountingModel {
 public:
  std::vector<int32_t> feed_greedy(std::span<const SlotFeed> feeds) override {
    feed_in_place(feeds);
    ++greedy_calls;
    std::vector<int32_t> tokens;
    for (const SlotFeed& feed : feeds) tokens.push_back(unusable ? -1 : (feed.tokens.back() + 2) % 5);
    return tokens;
  }
  int greedy_calls = 0;
  bool unusable = false;
};

std::vector<int32_t> generated(DeviceChoiceModel& model, const GenerationRequest& request,
                               std::optional<int64_t> top_logprobs = {}) {
  GenerationEngine engine(model, nullptr);
  std::vector<int32_t> tokens;
  engine.submit(request, [&](const TokenEvent& event) { tokens.push_back(event.token); }, top_logprobs);
  while (engine.has_work()) engine.step();
  return tokens;
}

TEST(GenerationEngine, PlainGreedyStepsTakeTheModelsGreedyChoice) {
  DeviceChoiceModel model;
  EXPECT_EQ(generated(model, request(0, 3)), (std::vector<int32_t>{2, 4, 1}));
  EXPECT_EQ(model.greedy_calls, 3);
  // A penalty, a draw or logprobs need the logits: the host chooses (the argmax is last + 1).
  GenerationRequest penalised = request(0, 2), sampled = request(0, 2);
  penalised.sampling.repetition_penalty = 1.5;
  sampled.sampling.do_sample = true;
  sampled.sampling.top_k = 1;
  EXPECT_EQ(generated(model, penalised), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(generated(model, sampled), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(generated(model, request(0, 2), 1), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(model.greedy_calls, 3);
  // A greedy request beside a sampled one: the whole step takes the host's path.
  GenerationEngine engine(model, nullptr);
  std::vector<int32_t> tokens;
  engine.submit(request(0, 2), [&](const TokenEvent& event) { tokens.push_back(event.token); });
  engine.submit(sampled, [](const TokenEvent&) {});
  while (engine.has_work()) engine.step();
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(model.greedy_calls, 3);
}

TEST(GenerationEngine, UnusableLogitsOnTheGreedyPathAreTheSamplersUserError) {
  DeviceChoiceModel model;
  model.unusable = true;
  GenerationEngine engine(model, nullptr);
  engine.submit(request(0, 2), [](const TokenEvent&) { FAIL() << "no token from unusable logits"; });
  EXPECT_EQ(error_of([&] { engine.step(); }), error_of([] { fail_unusable_logits(); }));
}

}  // namespace
}  // namespace surogate::generate
