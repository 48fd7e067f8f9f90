// What open_kv_cache_model refuses, each with one UserError, leaving every slot as it was.
#include <string>

#include "kv_model_pair.h"
#include "user_error_of.h"

namespace surogate::generate {
namespace {

void expect_error(const std::function<void()>& body, const std::string& part) {
  const std::string message = error_of(body);
  EXPECT_NE(message.find(part), std::string::npos) << "message: '" << message << "', expected it to say '" << part << "'";
}

TEST(KvCacheModelErrors, BadFeedsAreRefusedAndChangeNothing) {
  const std::unique_ptr<NextTokenModel> model =
      open_kv_cache_model(testing::fixture("qwen3_qknorm"), {.slots = 2, .max_context = 8}, {.rows = 2, .chunk = 4});
  EXPECT_EQ(model->vocab_size(), 96);
  EXPECT_EQ(model->max_context(), 8);
  EXPECT_EQ(model->slots(), 2);
  model->feed(std::vector<SlotFeed>{{0, {1, 2, 3, 4, 5}}});
  expect_error([&] { model->feed(std::vector<SlotFeed>{{0, {1, 2, 3, 4}}}); }, "slot 0 would hold 9 tokens, more than the context of 8");
  expect_error([&] { model->feed(std::vector<SlotFeed>{{2, {1}}}); }, "slot 2 is outside [0, 2)");
  expect_error([&] { model->feed(std::vector<SlotFeed>{{-1, {1}}}); }, "slot -1 is outside [0, 2)");
  expect_error([&] { model->feed(std::vector<SlotFeed>{{1, {3, 96}}}); }, "token id 96 is outside the vocabulary [0, 96)");
  expect_error([&] { model->feed(std::vector<SlotFeed>{{1, {-4}}}); }, "token id -4 is outside the vocabulary");
  expect_error([&] { model->feed(std::vector<SlotFeed>{{1, {}}}); }, "slot 1 is fed no tokens");
  expect_error([&] { model->feed(std::vector<SlotFeed>{{1, {1}}, {1, {2}}}); }, "slot 1 is fed twice");
  // A call with one bad feed feeds none of them.
  expect_error([&] { model->feed(std::vector<SlotFeed>{{1, {1, 2}}, {0, {1, 2, 3, 4}}}); }, "slot 0 would hold 9");
  EXPECT_EQ(model->held(0), 5);
  EXPECT_EQ(model->held(1), 0);
  expect_error([&] { model->clear(5); }, "slot 5 is outside [0, 2)");
  expect_error([&] { model->held(-1); }, "slot -1 is outside [0, 2)");
  // Up to the context exactly is fine.
  EXPECT_EQ(model->feed(std::vector<SlotFeed>{{0, {1, 2, 3}}}).size(), 96u);
  EXPECT_EQ(model->held(0), 8);
}

TEST(KvCacheModelErrors, ShapesThatCannotHoldATokenAreRefused) {
  expect_error([] { open_kv_cache_model(testing::fixture("qwen3_qknorm"), {.slots = 0, .max_context = 8}); },
               "slots and max_context must be positive");
  expect_error([] { open_kv_cache_model(testing::fixture("qwen3_qknorm"), {.slots = 1, .max_context = 0}); },
               "slots and max_context must be positive");
  expect_error([] { open_kv_cache_model(testing::fixture("qwen3_qknorm"), {.slots = 1}, {.rows = -1}); },
               "the prefill shape must not be negative");
}

}  // namespace
}  // namespace surogate::generate
