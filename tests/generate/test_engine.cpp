// The GenerationEngine over a fake model: sequences take slots in order, events come per token
// with logprobs of the unprocessed logits, a cancelled sequence frees its slot at the next step,
// a failing feed drops everything and throws.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <vector>

#include "generate/engine.h"

namespace surogate::generate {
namespace {

// Vocabulary of 5; the next token's logits favour (last token + 1) % 5. Records each feed.
class CountingModel : public NextTokenModel {
 public:
  std::vector<float> feed(std::span<const SlotFeed> feeds) override {
    if (fail) throw std::runtime_error("feed failed");
    std::vector<float> logits;
    std::vector<int64_t> fed;
    for (const SlotFeed& feed : feeds) {
      held_[feed.slot] += static_cast<int64_t>(feed.tokens.size());
      fed.push_back(feed.slot);
      for (int32_t token = 0; token < 5; ++token) {
        logits.push_back(token == (feed.tokens.back() + 1) % 5 ? 2.0f : static_cast<float>(token) * 0.1f);
      }
    }
    calls.push_back(fed);
    return logits;
  }
  void clear(int64_t slot) override { held_[slot] = 0; }
  int64_t held(int64_t slot) const override { return held_.count(slot) ? held_.at(slot) : 0; }
  int64_t slots() const override { return 2; }
  int64_t max_context() const override { return 32; }
  int64_t vocab_size() const override { return 5; }

  std::vector<std::vector<int64_t>> calls;  // the slots of each feed
  bool fail = false;

 private:
  std::map<int64_t, int64_t> held_;
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

}  // namespace
}  // namespace surogate::generate
