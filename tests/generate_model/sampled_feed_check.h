// NextTokenModel::feed_sampled of the KV cache model (on CUDA the sample_tokens kernel over the
// round's logits in place) against the default's host op over feed_in_place's logits (greedy_feed_check.h's
// HostChoice): two models of one fixture fed alike, the same tokens for every option set, in
// prefill and decode rounds and through the engine; the engine's sampled output reproducible for a
// seed. Used on the CPU backend (test_sampled_feed.cpp) and on CUDA (generate_model_cuda's copy).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "generate/sampling.h"
#include "greedy_feed_check.h"

namespace surogate::generate::testing {

// The options of feed row r: temperature alone, top_k + top_p, min_p, a penalty with greedy, a
// penalty with temperature.
inline SamplingOptions sampled_options(size_t row) {
  SamplingOptions options;
  options.do_sample = true;
  options.top_k = 0;
  switch (row % 5) {
    case 0: options.temperature = 0.9; break;
    case 1: options.top_k = 20, options.top_p = 0.9, options.temperature = 0.7; break;
    case 2: options.min_p = 0.1; break;
    case 3: options.temperature = 0.0, options.repetition_penalty = 1.5; break;
    default: options.temperature = 1.2, options.repetition_penalty = 1.3; break;
  }
  return options;
}

inline void expect_device_sampled_equals_host(const std::string& name, bool cuda) {
  const ModelOptions options{.cuda = cuda, .slots = 3, .max_context = 40};
  DeviceAndHost models(name, options, {.rows = 2, .chunk = 4});
  NextTokenModel& device = *models.device;
  HostChoice& host = models.host;
  std::vector<SlotFeed> feeds{{2, random_tokens(9, 81)}, {0, random_tokens(3, 82)}};
  std::map<int64_t, std::vector<int32_t>> contexts;  // per slot: every token fed
  for (int step = 0; step < 10; ++step) {
    if (step == 3) feeds.push_back({1, random_tokens(6, 83)});  // a prompt beside two decoding slots
    std::vector<RowChoice> choices;
    for (size_t row = 0; row < feeds.size(); ++row) {
      std::vector<int32_t>& context = contexts[feeds[row].slot];
      context.insert(context.end(), feeds[row].tokens.begin(), feeds[row].tokens.end());
      choices.push_back({row_sampling(sampled_options(row + static_cast<size_t>(step)), 1000 + feeds[row].slot,
                                      static_cast<uint32_t>(step)),
                         context});
    }
    const std::vector<int32_t> got = device.feed_sampled(feeds, choices), expected = host.feed_sampled(feeds, choices);
    ASSERT_EQ(got, expected) << name << ": step " << step;
    for (size_t row = 0; row < feeds.size(); ++row) {
      ASSERT_GE(got[row], 0) << name << ": step " << step;
      feeds[row].tokens = {got[row]};
    }
  }
  // Through the engine: sampled requests give the host's tokens, and the same again for the seeds.
  std::vector<GenerationRequest> requests(5);
  for (size_t index = 0; index < requests.size(); ++index) {
    requests[index].prompt = random_tokens(3 + 2 * index, 90 + static_cast<uint32_t>(index));
    requests[index].max_new_tokens = 10;
    requests[index].sampling = sampled_options(index);
    requests[index].seed = 7 + index;
  }
  const auto run = [&](NextTokenModel& model) {
    for (int64_t slot = 0; slot < options.slots; ++slot) model.clear(slot);
    return generate(model, requests, nullptr);
  };
  const std::vector<GenerationResult> fast = run(device), slow = run(host), again = run(device);
  for (size_t index = 0; index < requests.size(); ++index) {
    EXPECT_EQ(fast[index].completion_ids, slow[index].completion_ids) << name << ": request " << index;
    EXPECT_EQ(fast[index].completion_ids, again[index].completion_ids) << name << ": request " << index;
    EXPECT_EQ(fast[index].completion_ids.size(), 10u) << name << ": request " << index;
  }
  // Another seed, other tokens (temperature alone over ten draws). Temperature 3 flattens the
  // distribution: a tiny random model's bf16 logits can favour one token so much at 0.9 that every
  // seed draws it (qwen2_bias_tied on CUDA did, 2026-11-29).
  requests.resize(1);
  requests[0].sampling.temperature = 3.0;
  const std::vector<GenerationResult> first_seed = run(device);
  requests[0].seed = 8;
  EXPECT_NE(run(device)[0].completion_ids, first_seed[0].completion_ids) << name;
}

}  // namespace surogate::generate::testing
