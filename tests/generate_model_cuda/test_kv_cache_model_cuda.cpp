// open_kv_cache_model on the CUDA backend (bf16 weights and activations, the cached_attention
// kernel, the decode plan as a CUDA graph) on the committed tiny fixtures:
//   * against the full-forward oracle on CUDA: max |kv − full| / max |full| < kCudaTolerance
//     (3e-2). Both are bf16 graphs, but not the same kernels (cached vs flash attention, other
//     batch shapes for every matmul), so their roundings differ: about a dozen bf16 roundings per
//     layer (2^-9 each) growing like √n, ≈ 1e-2 (tests/runtime_cuda/test_decoder_cuda.cpp's
//     argument); a wrong kernel (wrong slot, position, head, window) is off by order 1;
//   * against the KV-cache model on the CPU (fp32): < kCudaVersusCpu (5e-2), the same bound plus
//     the weights' one rounding to bf16;
//   * an adapter's model reading a base model's weights in place against one holding its own;
//   * a prefix copied from one slot to others (copy_prefixes) against feeding it.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cuda/device_info.h"
#include "kv_model_pair.h"

namespace surogate::generate {
namespace {

using testing::argmax;
using testing::ModelPair;
using testing::random_tokens;

constexpr double kCudaTolerance = 3e-2;
constexpr double kCudaVersusCpu = 5e-2;

class KvCacheModelCuda : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  }
};

TEST_P(KvCacheModelCuda, PrefillAndDecodeGiveTheFullForwardsLogits) {
  const ModelOptions options{.cuda = true, .slots = 3, .max_context = 24};
  ModelPair pair(GetParam(), options, {.rows = 2, .chunk = 4}, kCudaTolerance);
  std::unique_ptr<NextTokenModel> cpu =
      open_kv_cache_model(testing::fixture(GetParam()), {.slots = 3, .max_context = 24}, {.rows = 2, .chunk = 4});
  std::vector<SlotFeed> feeds{{2, random_tokens(9, 61)}, {0, random_tokens(5, 62)}};
  for (int step = 0; step < 6; ++step) {
    const std::vector<float> logits = pair.feed(feeds, GetParam() + ": step " + std::to_string(step));
    EXPECT_LE(testing::relative_difference(logits, cpu->feed(feeds)), kCudaVersusCpu) << "step " << step;
    // The next tokens: greedy from the oracle, fed to all three models alike.
    feeds = {{2, {argmax(logits, 0, 96)}}, {0, {argmax(logits, 1, 96)}}};
  }
}

// copy_prefixes on the GPU (one launch of range copies over every layer's caches).
TEST_P(KvCacheModelCuda, APrefixCopiedFromAnotherSlotGivesTheLogitsOfFeedingIt) {
  ModelPair pair(GetParam(), {.cuda = true, .slots = 4, .max_context = 24}, {.rows = 2, .chunk = 4}, kCudaTolerance);
  testing::copied_prefixes_give_the_oracles_logits(pair);
}

TEST_F(KvCacheModelCuda, AnAdapterReadingTheBaseModelsWeightsEqualsOneHoldingItsOwn) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "surogate_kv_cache_cuda_shared_adapter";
  std::filesystem::remove_all(dir);
  testing::write_random_adapter(dir, "llama_gqa_llama3");
  const std::filesystem::path model = testing::fixture("llama_gqa_llama3");
  ModelOptions options{.cuda = true, .slots = 2, .max_context = 16};
  std::unique_ptr<NextTokenModel> base = open_kv_cache_model(model, options);
  options.adapter = dir;
  // Only the adapter is loaded into it: right logits mean the base's weights were read on the GPU.
  std::unique_ptr<NextTokenModel> shared = open_kv_cache_adapter(*base, model, options);
  std::unique_ptr<NextTokenModel> alone = open_kv_cache_model(model, options);
  const std::vector<int32_t> prompt = random_tokens(7, 63);
  for (const std::vector<SlotFeed>& feeds : {std::vector<SlotFeed>{{1, prompt}}, std::vector<SlotFeed>{{1, {3}}, {0, {8}}}}) {
    base->feed(feeds);  // the base's own caches: the adapter's stay untouched
    // The same plans and kernels over the same values: equal but for kernel nondeterminism (none expected).
    EXPECT_LE(testing::relative_difference(shared->feed(feeds), alone->feed(feeds)), 1e-6);
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvCacheModelCuda,
                         ::testing::Values("qwen3_qknorm", "llama_gqa_llama3", "qwen2_bias_tied", "mistral_sliding",
                                           "qwen3_moe_topk", "mixtral_topk"));

}  // namespace
}  // namespace surogate::generate
