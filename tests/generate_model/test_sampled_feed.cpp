// The KV cache model's sampled feed on the CPU backend (sampled_feed_check.h): the sampling op's
// tokens equal the host's over the model's logits, in prefill and decode rounds and through the
// engine, reproducible for a seed.
#include "sampled_feed_check.h"

namespace surogate::generate {
namespace {

class SampledFeed : public ::testing::TestWithParam<std::string> {};

TEST_P(SampledFeed, TheModelsTokensEqualTheHostsOpOverItsLogits) {
  testing::expect_device_sampled_equals_host(GetParam(), /*cuda=*/false);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SampledFeed, ::testing::Values("qwen3_qknorm", "qwen3_moe_topk"));

}  // namespace
}  // namespace surogate::generate
