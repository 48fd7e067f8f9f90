// The KV cache model's sampled feed on CUDA (sampled_feed_check.h): the sample_tokens kernel's
// tokens, the only thing read back, equal the host op's over the same bf16 logits read back whole,
// in prefill and decode rounds (the decode plan a CUDA graph) and through the engine, reproducible
// for a seed. Skips without a GPU.
#include "cuda/device_info.h"
#include "sampled_feed_check.h"

namespace surogate::generate {
namespace {

class SampledFeedCuda : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  }
};

TEST_P(SampledFeedCuda, TheKernelsTokensEqualTheHostOpOverTheSameLogits) {
  testing::expect_device_sampled_equals_host(GetParam(), /*cuda=*/true);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SampledFeedCuda, ::testing::Values("qwen3_qknorm", "qwen3_moe_topk", "qwen2_bias_tied"));

}  // namespace
}  // namespace surogate::generate
