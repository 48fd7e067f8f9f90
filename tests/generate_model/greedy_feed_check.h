// NextTokenModel::feed_greedy of the KV cache model (the plans' greedy_tokens op, on the device
// that holds the logits) against the host's choice over feed_in_place's logits (the path every
// sampled step takes): two models of one fixture fed alike, the same ids token for token. Used on
// the CPU backend (test_greedy_feed.cpp) and on CUDA (generate_model_cuda's copy).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "generate/kv_cache_model.h"
#include "generate/sampling.h"
#include "kv_model_pair.h"

namespace surogate::generate::testing {

// A model that chooses greedy tokens the default way: the host's greedy_choice over the logits
// of the model it wraps (which it forwards everything else to).
class HostChoice final : public NextTokenModel {
public:
  explicit HostChoice(NextTokenModel& model) : model_(model) {}
  std::span<float> feed_in_place(std::span<const SlotFeed> feeds) override { return model_.feed_in_place(feeds); }
  void clear(int64_t slot) override { model_.clear(slot); }
  int64_t held(int64_t slot) const override { return model_.held(slot); }
  int64_t slots() const override { return model_.slots(); }
  int64_t max_context() const override { return model_.max_context(); }
  int64_t vocab_size() const override { return model_.vocab_size(); }
  int64_t prefill_chunk() const override { return model_.prefill_chunk(); }

private:
  NextTokenModel& model_;
};

// Two KV cache models of one fixture opened alike: the one under test and one whose tokens the
// host chooses over its logits.
struct DeviceAndHost {
  std::unique_ptr<NextTokenModel> device, host_model;
  HostChoice host;
  DeviceAndHost(const std::string& name, const ModelOptions& options, const PrefillShape& prefill)
      : device(open_kv_cache_model(fixture(name), options, prefill)),
        host_model(open_kv_cache_model(fixture(name), options, prefill)), host(*host_model) {}
};

// Feeds prompts of three slots through prefill rounds of [2, 4] (one split over two rounds, one
// beside a decoding slot), then greedy steps: the device's ids equal the host's at every feed.
inline void expect_device_greedy_equals_host(const std::string& name, bool cuda) {
  const ModelOptions options{.cuda = cuda, .slots = 3, .max_context = 32};
  DeviceAndHost models(name, options, {.rows = 2, .chunk = 4});
  NextTokenModel& device = *models.device;
  HostChoice& host = models.host;
  std::vector<SlotFeed> feeds{{2, random_tokens(9, 81)}, {0, random_tokens(3, 82)}};
  for (int step = 0; step < 8; ++step) {
    if (step == 3) feeds.push_back({1, random_tokens(6, 83)});  // a prompt beside two decoding slots
    const std::vector<int32_t> got = device.feed_greedy(feeds), expected = host.feed_greedy(feeds);
    ASSERT_EQ(got, expected) << name << ": step " << step;
    for (size_t row = 0; row < feeds.size(); ++row) {
      ASSERT_GE(got[row], 0) << name << ": step " << step;
      feeds[row].tokens = {got[row]};
    }
  }
  // The engine's choice (feed_greedy for plain greedy requests) equals the host's, token for token.
  std::vector<GenerationRequest> requests(4);
  for (size_t index = 0; index < requests.size(); ++index) {
    requests[index].prompt = random_tokens(3 + 2 * index, 90 + static_cast<uint32_t>(index));
    requests[index].max_new_tokens = 10;
  }
  for (int64_t slot = 0; slot < options.slots; ++slot) {
    device.clear(slot);
    host.clear(slot);
  }
  const std::vector<GenerationResult> fast = generate(device, requests, nullptr);
  const std::vector<GenerationResult> slow = generate(host, requests, nullptr);
  for (size_t index = 0; index < requests.size(); ++index) {
    EXPECT_EQ(fast[index].completion_ids, slow[index].completion_ids) << name << ": request " << index;
    EXPECT_EQ(fast[index].completion_ids.size(), 10u) << name << ": request " << index;
  }
}

// One sequence fed a token at a time (on CUDA each step launched before the last one's id is read:
// generate/decode_run_ahead.h) equals the host's choice at every step, including when the engine
// feeds another token than the id the step ahead was given, when another slot is cleared or fed
// beside it, and up to the cache's last position (where no step is left to run ahead).
inline void expect_one_sequence_step_by_step_equals_host(const std::string& name, bool cuda) {
  const ModelOptions options{.cuda = cuda, .slots = 2, .max_context = 24};
  DeviceAndHost models(name, options, {.rows = 2, .chunk = 4});
  NextTokenModel& device = *models.device;
  HostChoice& host = models.host;
  std::vector<SlotFeed> feeds{{1, random_tokens(5, 71)}};
  for (int step = 0; device.held(1) < options.max_context; ++step) {
    const std::string where = name + ": step " + std::to_string(step) + ", " + std::to_string(device.held(1)) + " held";
    const std::vector<int32_t> got = device.feed_greedy(feeds), expected = host.feed_greedy(feeds);
    ASSERT_EQ(got, expected) << where;
    ASSERT_EQ(device.held(1), host.held(1)) << where;
    const int32_t id = got[0];  // slot 1's: always the first feed
    ASSERT_GE(id, 0) << where;
    feeds = {{1, {id}}};
    if (step == 4) feeds = {{1, {(id + 1) % static_cast<int32_t>(device.vocab_size())}}};  // not the id given ahead
    if (step == 7) {  // the other slot cleared, then a prompt of its fed beside this one for a step
      device.clear(0);
      host.clear(0);
    }
    if (step == 8) feeds.push_back({0, random_tokens(3, 72)});
  }
  EXPECT_EQ(device.held(1), options.max_context) << name;
}

}  // namespace surogate::generate::testing
