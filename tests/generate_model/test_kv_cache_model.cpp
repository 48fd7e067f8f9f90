// open_kv_cache_model against open_full_forward_model (the oracle: no cache, the whole history
// every time) on the committed tiny checkpoints, CPU fp32: the same next-token logits, within
// kRelativeTolerance, however the tokens arrive — a prompt whole and then token by token, in
// uneven chunks through a small prefill plan, several slots at once with different lengths, a
// slot cleared and reused — for dense (Qwen3 q/k norm, Llama GQA, Qwen2 tied + bias), MoE
// (Qwen3-MoE, Mixtral, Qwen2-MoE shared expert), sliding-window (Mistral) models and an
// unmerged LoRA adapter (alone, and reading a base model's weights in place).
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "graph/json_ir.h"
#include "io/model_config.h"
#include "kv_model_pair.h"
#include "models/adapter_io.h"
#include "models/defined_weights.h"
#include "models/lora.h"
#include "models/model_definition.h"
#include "ops/defs/register_ops.h"
#include "random_values.h"

namespace surogate::generate {
namespace {

using testing::argmax;
using testing::ModelPair;
using testing::random_tokens;

// A prompt fed whole, then five greedy tokens one at a time.
void prompt_then_five_tokens(const std::string& name, ModelOptions options, uint32_t seed) {
  ModelPair pair(name, options);
  std::vector<float> logits = pair.feed_one(0, random_tokens(9, seed), name + ": the prompt");
  for (int step = 0; step < 5; ++step) {
    logits = pair.feed_one(0, {argmax(logits, 0, 96)}, name + ": token " + std::to_string(step));
  }
  EXPECT_EQ(pair.fast->held(0), 14);
}

class DenseAndMoeModels : public ::testing::TestWithParam<std::string> {};

TEST_P(DenseAndMoeModels, APromptWholeThenFiveTokensGiveTheOraclesLogits) {
  prompt_then_five_tokens(GetParam(), {.slots = 1, .max_context = 24}, 11);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DenseAndMoeModels,
                         ::testing::Values("qwen3_qknorm", "llama_gqa_llama3", "qwen2_bias_tied", "llama_bias_untied",
                                           "qwen3_moe_topk", "mixtral_topk", "qwen2_moe_shared", "mistral_sliding"));

TEST(KvCacheModel, UnevenChunksThroughASmallPrefillPlan) {
  // Chunks of 3, 7 (two rounds of 4 and 3), 1 (the decode plan) and 10 (three rounds).
  ModelPair pair("qwen3_qknorm", {.slots = 2, .max_context = 32}, {.rows = 2, .chunk = 4});
  const std::vector<int32_t> tokens = random_tokens(21, 5);
  size_t at = 0;
  for (size_t length : {3u, 7u, 1u, 10u}) {
    pair.feed_one(1, {tokens.begin() + static_cast<std::ptrdiff_t>(at), tokens.begin() + static_cast<std::ptrdiff_t>(at + length)},
                  "a chunk of " + std::to_string(length));
    at += length;
  }
  EXPECT_EQ(pair.fast->held(1), 21);
  EXPECT_EQ(pair.fast->held(0), 0);
}

TEST(KvCacheModel, APromptLongerThanTheDefaultChunkIsFedInTwoRounds) {
  ModelPair pair("llama_gqa_llama3", {.slots = 1, .max_context = 300});
  pair.feed_one(0, random_tokens(270, 8), "270 tokens: chunks of 256 and 14");
  pair.feed_one(0, {7}, "then one token");
}

TEST(KvCacheModel, WithoutAPrefillPlanAPromptGoesATokenAtATime) {
  ModelPair pair("mistral_sliding", {.slots = 1, .max_context = 16}, {.chunk = 1});
  pair.feed_one(0, random_tokens(9, 3), "9 tokens through the decode plan");
  pair.feed_one(0, {4, 5}, "two more");
}

TEST(KvCacheModel, APrefixCopiedFromAnotherSlotGivesTheLogitsOfFeedingIt) {
  ModelPair pair("qwen3_qknorm", {.slots = 4, .max_context = 24}, {.rows = 2, .chunk = 4});
  testing::copied_prefixes_give_the_oracles_logits(pair);
}

TEST(KvCacheModel, ABadPrefixCopyIsRefusedAndChangesNothing) {
  ModelPair pair("llama_gqa_llama3", {.slots = 3, .max_context = 16});
  pair.feed_one(0, random_tokens(5, 2), "five tokens");
  EXPECT_TRUE(pair.fast->copies_prefixes());
  EXPECT_THROW(pair.fast->copy_prefixes(std::vector<PrefixCopy>{{0, 1, 6}}), InternalError);  // slot 0 holds 5
  EXPECT_THROW(pair.fast->copy_prefixes(std::vector<PrefixCopy>{{0, 0, 2}}), InternalError);  // onto itself
  EXPECT_THROW(pair.fast->copy_prefixes(std::vector<PrefixCopy>{{0, 1, 2}, {0, 1, 3}}), InternalError);
  EXPECT_THROW(pair.fast->copy_prefixes(std::vector<PrefixCopy>{{0, 3, 2}}), InternalError);  // no slot 3
  EXPECT_EQ(pair.fast->held(1), 0);
  EXPECT_EQ(pair.fast->held(0), 5);
}

TEST(KvCacheModel, SlotsFedTogetherWithDifferentLengths) {
  ModelPair pair("qwen3_moe_topk", {.slots = 3, .max_context = 20}, {.rows = 2, .chunk = 4});
  std::vector<float> logits = pair.feed({{2, random_tokens(6, 21)}, {0, random_tokens(11, 22)}}, "6 and 11 tokens");
  logits = pair.feed({{0, {argmax(logits, 1, 96)}}, {2, {argmax(logits, 0, 96)}}}, "one token each, slots swapped");
  pair.feed({{2, {3}}}, "slot 2 alone");
  pair.feed({{1, random_tokens(5, 23)}, {0, {9}}, {2, {1}}}, "a prompt beside two decoding slots");
  EXPECT_EQ(pair.fast->held(0), 13);
  EXPECT_EQ(pair.fast->held(1), 5);
  EXPECT_EQ(pair.fast->held(2), 9);
}

TEST(KvCacheModel, APromptBesideMoreDecodingSlotsThanPrefillRows) {
  ModelPair pair("qwen2_bias_tied", {.slots = 5, .max_context = 16}, {.rows = 2, .chunk = 4});
  pair.feed({{0, random_tokens(3, 71)}, {1, random_tokens(2, 72)}, {2, random_tokens(4, 73)}, {4, random_tokens(2, 74)}},
            "four prompts");
  pair.feed({{4, {1}}, {0, {2}}, {3, random_tokens(9, 75)}, {1, {3}}, {2, {4}}}, "a prompt of 9 beside four tokens");
  pair.feed({{2, {5}}, {3, {6}}, {0, {7}}}, "three tokens");
  EXPECT_EQ(pair.fast->held(3), 10);
}

TEST(KvCacheModel, AClearedSlotIsReusedFromNothing) {
  ModelPair pair("llama_gqa_llama3", {.slots = 2, .max_context = 16}, {.rows = 2, .chunk = 4});
  pair.feed({{0, random_tokens(12, 31)}, {1, random_tokens(3, 32)}}, "both slots");
  pair.fast->clear(0);
  pair.oracle->clear(0);
  EXPECT_EQ(pair.fast->held(0), 0);
  pair.feed_one(0, random_tokens(5, 33), "slot 0 again");
  pair.feed({{0, {1}}, {1, {2}}}, "both decode");
  EXPECT_EQ(pair.fast->held(0), 6);
}

TEST(KvCacheModel, AnUnmergedLoraAdapter) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "surogate_kv_cache_adapter";
  std::filesystem::remove_all(dir);
  testing::write_random_adapter(dir, "llama_gqa_llama3");
  ModelPair pair("llama_gqa_llama3", {.adapter = dir, .slots = 2, .max_context = 16}, {.rows = 2, .chunk = 4});
  const std::vector<int32_t> prompt = random_tokens(7, 41);
  const std::vector<float> adapted = pair.feed({{1, prompt}, {0, {5}}}, "with the adapter");
  pair.feed({{1, {2}}, {0, {6}}}, "decoding with the adapter");
  // The adapter changes the logits: the comparison above is not that of the base model.
  const std::unique_ptr<NextTokenModel> base = open_kv_cache_model(testing::fixture("llama_gqa_llama3"),
                                                                   {.slots = 1, .max_context = 16});
  const std::vector<float> plain = base->feed(std::vector<SlotFeed>{{0, prompt}});
  const std::vector<float> adapted_row(adapted.begin(), adapted.begin() + 96);
  EXPECT_GT(testing::relative_difference(plain, adapted_row), 1e-2);
  std::filesystem::remove_all(dir);
}

TEST(KvCacheModel, AnAdapterReadsTheBaseModelsWeightsInPlace) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "surogate_kv_cache_shared_adapter";
  std::filesystem::remove_all(dir);
  testing::write_random_adapter(dir, "llama_gqa_llama3");
  const std::filesystem::path model = testing::fixture("llama_gqa_llama3");
  const ModelOptions base_options{.slots = 2, .max_context = 16};
  ModelOptions adapter_options = base_options;
  adapter_options.adapter = dir;
  std::unique_ptr<NextTokenModel> base = open_kv_cache_model(model, base_options, {.rows = 2, .chunk = 4});
  // Nothing but the adapter is loaded into it: right logits mean the base's weights were read.
  std::unique_ptr<NextTokenModel> shared = open_kv_cache_adapter(*base, model, adapter_options, {.rows = 2, .chunk = 4});
  std::unique_ptr<NextTokenModel> alone = open_kv_cache_model(model, adapter_options, {.rows = 2, .chunk = 4});
  std::unique_ptr<NextTokenModel> fresh_base = open_kv_cache_model(model, base_options, {.rows = 2, .chunk = 4});
  const std::vector<int32_t> prompt = random_tokens(7, 43);
  // Interleaved: each model's caches are its own, so neither disturbs the other's slots.
  EXPECT_EQ(shared->feed(std::vector<SlotFeed>{{1, prompt}}), alone->feed(std::vector<SlotFeed>{{1, prompt}}));
  EXPECT_EQ(base->feed(std::vector<SlotFeed>{{1, {4, 9}}}), fresh_base->feed(std::vector<SlotFeed>{{1, {4, 9}}}));
  EXPECT_EQ(shared->feed(std::vector<SlotFeed>{{1, {3}}}), alone->feed(std::vector<SlotFeed>{{1, {3}}}));
  EXPECT_EQ(base->held(1), 2);
  EXPECT_EQ(shared->held(1), 8);
  // The weights outlive the model that loaded them while a model reading them is open.
  base.reset();
  EXPECT_EQ(shared->feed(std::vector<SlotFeed>{{0, {5, 6}}}), alone->feed(std::vector<SlotFeed>{{0, {5, 6}}}));
  // A model opened from the adapter's model reads the same base weights.
  std::unique_ptr<NextTokenModel> second = open_kv_cache_adapter(*shared, model, adapter_options);
  EXPECT_EQ(second->feed(std::vector<SlotFeed>{{0, prompt}}),
            open_kv_cache_model(model, adapter_options)->feed(std::vector<SlotFeed>{{0, prompt}}));
  std::filesystem::remove_all(dir);
}

TEST(KvCacheModel, AnIrDefinitionOfAnotherBatchShapeRunsAtTheModelsShapes) {
  // The built-in graph of [2, 8] saved as a model_definition file; the oracle builds it in.
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "surogate_kv_cache_definition.json";
  const graph::OpRegistry registry = ops::make_model_registry();
  const io::ModelConfig config = models::load_model_config(testing::fixture("qwen3_moe_topk"), {});
  graph::save_json_ir(models::build_model_graph(config, registry, {2, 8, 1, false}).graph, file);
  ModelOptions options{.slots = 2, .max_context = 20};
  std::unique_ptr<NextTokenModel> oracle = open_full_forward_model(testing::fixture("qwen3_moe_topk"), options);
  options.definition = {file, "test: model_definition"};
  std::unique_ptr<NextTokenModel> fast =
      open_kv_cache_model(testing::fixture("qwen3_moe_topk"), options, {.rows = 2, .chunk = 5});
  for (const std::vector<SlotFeed>& feeds : {std::vector<SlotFeed>{{1, random_tokens(12, 51)}, {0, random_tokens(4, 52)}},
                                            std::vector<SlotFeed>{{0, {3}}, {1, {8}}}}) {
    const std::vector<float> expected = oracle->feed(feeds);
    EXPECT_LE(testing::relative_difference(fast->feed(feeds), expected), testing::kRelativeTolerance);
  }
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace surogate::generate
