// What a KV-cache model holds beside its weights, predicted before anything loads
// (generate/kv_cache_plans.h: GRPO's training plan counts its rollout model so): the caches are
// 2 (keys, values) × layers × slots × capacity × KV heads × head_dim × the dtype's bytes, and the
// plans' shapes are the model's.
#include <gtest/gtest.h>

#include <optional>

#include "generate/kv_cache_plans.h"
#include "kv_model_pair.h"
#include "models/defined_weights.h"

namespace surogate::generate {
namespace {

io::ModelConfig fixture_config() { return models::load_model_config(testing::fixture("llama_gqa_llama3"), {}); }

size_t formula_cache_bytes(const io::ModelConfig& config, int64_t slots, int64_t capacity, size_t dtype_bytes) {
  return static_cast<size_t>(2 * config.num_hidden_layers * slots * capacity * config.num_key_value_heads *
                             config.head_dim) *
         dtype_bytes;
}

ModelOptions options_of(int64_t slots, int64_t max_context, bool cuda = false) {
  ModelOptions options;
  options.slots = slots;
  options.max_context = max_context;
  options.cuda = cuda;
  return options;
}

TEST(KvCachePlans, CachesAreTheFormulasInTheGraphsDtype) {
  const io::ModelConfig config = fixture_config();
  ASSERT_EQ(config.num_hidden_layers, 2);
  ASSERT_EQ(config.num_key_value_heads, 2);
  ASSERT_EQ(config.head_dim, 8);
  // The CPU graph is fp32, the CUDA graph bf16 (planned on any machine: nothing is loaded).
  EXPECT_EQ(predict_kv_cache_memory(config, options_of(3, 24)).caches,
            formula_cache_bytes(config, 3, 24, 4));
  EXPECT_EQ(predict_kv_cache_memory(config, options_of(5, 40, true)).caches,
            formula_cache_bytes(config, 5, 40, 2));
  EXPECT_EQ(formula_cache_bytes(config, 3, 24, 4), size_t{18432});
}

TEST(KvCachePlans, LiveLoraKeepsTheCaches) {
  const io::ModelConfig config = fixture_config();
  models::LoraOptions lora;
  lora.rank = 4;
  lora.alpha = 8.0;
  lora.target_modules = {"q_proj", "v_proj", "down_proj"};
  const KvCacheMemory plain = predict_kv_cache_memory(config, options_of(4, 32));
  const KvCacheMemory adapted = predict_kv_cache_memory(config, options_of(4, 32), {.lora = lora});
  EXPECT_EQ(adapted.caches, plain.caches);
  EXPECT_GE(adapted.activations, plain.activations);  // its low-rank products may fit in the arena's slack
  EXPECT_GT(adapted.activations, size_t{0});
  EXPECT_EQ(plain.total(), plain.caches + plain.activations);
}

TEST(KvCachePlans, PrefillPlansAddTheirArenas) {
  const io::ModelConfig config = fixture_config();
  const KvCacheMemory decode_only = predict_kv_cache_memory(config, options_of(4, 32), {}, {.chunk = 1});
  const KvCacheMemory with_prefill = predict_kv_cache_memory(config, options_of(4, 32));
  EXPECT_GT(decode_only.activations, size_t{0});
  EXPECT_GT(with_prefill.activations, decode_only.activations);
  EXPECT_EQ(with_prefill.caches, decode_only.caches);  // the prefill plans read the decode plan's caches
  const KvCacheMemory more_slots = predict_kv_cache_memory(config, options_of(8, 32), {}, {.chunk = 1});
  EXPECT_GT(more_slots.activations, decode_only.activations);
}

TEST(KvCachePlans, ShapesAreTheModels) {
  const KvCachePlanShapes few = kv_cache_plan_shapes(options_of(3, 24), {});
  EXPECT_EQ(few.cache.slots, 3);
  EXPECT_EQ(few.cache.capacity, 24);
  EXPECT_EQ(few.prefill_rows, 3);
  EXPECT_EQ(few.chunk, 24);
  EXPECT_TRUE(few.prefill);
  EXPECT_FALSE(few.single);  // 3 rows × 24 tokens is no longer than the context
  const KvCachePlanShapes many = kv_cache_plan_shapes(options_of(64, 1024), {});
  EXPECT_EQ(many.prefill_rows, 4);
  EXPECT_EQ(many.chunk, 256);
  EXPECT_TRUE(many.single);
  EXPECT_EQ(many.single_chunk, 1024);
  EXPECT_FALSE(kv_cache_plan_shapes(options_of(64, 1024), {.chunk = 1}).prefill);
}

}  // namespace
}  // namespace surogate::generate
