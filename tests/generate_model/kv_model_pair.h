// The KV-cache model and the full-forward oracle opened on one fixture, fed alike, and compared:
// the check every generate_model test makes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "generate/kv_cache_model.h"
#include "generate/next_token_model.h"
#include "io/model_config.h"
#include "models/adapter_io.h"
#include "models/defined_weights.h"
#include "models/lora.h"
#include "random_values.h"

namespace surogate::generate::testing {

// fp32 on the CPU: the cache changes the order of no sum that decides a logit beyond the matmuls'
// blocking over other batch shapes, so the logits agree to rounding: max |fast − oracle| within
// this fraction of max |oracle|.
inline constexpr double kRelativeTolerance = 1e-5;

// SUROGATE_FIXTURES_DIR in the environment overrides the build tree's path (the GPU machine runs
// the binaries from another checkout path; scripts/gpu_check.sh sets it).
inline std::filesystem::path fixture(const std::string& name) {
  const char* override_dir = std::getenv("SUROGATE_FIXTURES_DIR");
  return std::filesystem::path(override_dir && *override_dir ? override_dir : SUROGATE_FIXTURES_DIR) / name;
}

inline std::vector<int32_t> random_tokens(size_t count, uint32_t seed, int32_t vocab = 96) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  std::vector<int32_t> tokens(count);
  for (int32_t& id : tokens) id = token(generator);
  return tokens;
}

// max |a − b| / max |b|.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double difference = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference = std::max(difference, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0.0 ? difference / scale : difference;
}

struct ModelPair {
  std::unique_ptr<NextTokenModel> fast, oracle;
  double tolerance = kRelativeTolerance;

  ModelPair(const std::string& name, ModelOptions options, const PrefillShape& prefill = {},
            double relative_tolerance = kRelativeTolerance)
      : fast(open_kv_cache_model(fixture(name), options, prefill)),
        oracle(open_full_forward_model(fixture(name), options)),
        tolerance(relative_tolerance) {}

  // Feeds both; expects the same logits and the same slot contents; returns the oracle's logits.
  std::vector<float> feed(const std::vector<SlotFeed>& feeds, const std::string& what) {
    const std::vector<float> got = fast->feed(feeds), expected = oracle->feed(feeds);
    EXPECT_EQ(got.size(), expected.size()) << what;
    EXPECT_EQ(expected.size(), feeds.size() * static_cast<size_t>(oracle->vocab_size())) << what;
    EXPECT_GT(*std::max_element(expected.begin(), expected.end()), 0.0f) << what;
    if (got.size() == expected.size()) EXPECT_LE(relative_difference(got, expected), tolerance) << what;
    for (int64_t slot = 0; slot < oracle->slots(); ++slot) EXPECT_EQ(fast->held(slot), oracle->held(slot)) << what;
    return expected;
  }

  std::vector<float> feed_one(int64_t slot, std::vector<int32_t> tokens, const std::string& what) {
    return feed({SlotFeed{slot, std::move(tokens)}}, what);
  }

  // Copies prefixes in both (the oracle copies token histories); expects the same slot contents.
  void copy(const std::vector<PrefixCopy>& copies, const std::string& what) {
    fast->copy_prefixes(copies);
    oracle->copy_prefixes(copies);
    for (int64_t slot = 0; slot < oracle->slots(); ++slot) EXPECT_EQ(fast->held(slot), oracle->held(slot)) << what;
  }
};

// Slot 0 takes a 9-token prompt; slot 2 (which held other tokens) takes its first 8 and slot 3
// its first 5 by copy_prefixes, then each is fed the rest of its own way: the logits of the copied
// slots must be the oracle's (which copies the token histories), and slot 0 keeps its own.
inline void copied_prefixes_give_the_oracles_logits(ModelPair& pair) {
  const std::vector<int32_t> prompt = random_tokens(9, 31);
  pair.feed({{0, prompt}, {2, random_tokens(4, 32)}}, "the prompt, and other tokens in slot 2");
  pair.copy({{0, 2, 8}, {0, 3, 5}}, "8 tokens to slot 2, 5 to slot 3");
  EXPECT_EQ(pair.fast->held(2), 8);
  EXPECT_EQ(pair.fast->held(3), 5);
  pair.feed({{2, {prompt[8]}}, {3, {prompt[5], 7, 8}}, {0, {5}}},
            "slot 2 the prompt's last token, slot 3 three more, slot 0 one more");
}

// The greedy next token of a logits row.
inline int32_t argmax(const std::vector<float>& logits, size_t row, size_t vocab) {
  const auto begin = logits.begin() + static_cast<std::ptrdiff_t>(row * vocab);
  return static_cast<int32_t>(std::max_element(begin, begin + static_cast<std::ptrdiff_t>(vocab)) - begin);
}

// A random PEFT adapter of rank 4 on every projection of the fixture, written to `dir`.
inline void write_random_adapter(const std::filesystem::path& dir, const std::string& name) {
  const io::ModelConfig config = models::load_model_config(fixture(name), {});
  models::LoraOptions lora;
  lora.rank = 4;
  lora.alpha = 8.0;
  lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  const std::vector<models::LoraAdapter> adapters = models::lora_adapters(config, lora);
  std::vector<std::vector<float>> values;
  uint32_t seed = 40;
  models::save_peft_adapter(
      dir, adapters,
      [&](const models::ParameterSpec& matrix) -> std::span<const float> {
        values.push_back(surogate::testing::normal_values(static_cast<size_t>(graph::shape_numel(matrix.shape)), seed++, 0.2f));
        return values.back();
      },
      {{"peft_type", "LORA"}, {"r", 4}, {"lora_alpha", 8}, {"target_modules", lora.target_modules}});
}

}  // namespace surogate::generate::testing
