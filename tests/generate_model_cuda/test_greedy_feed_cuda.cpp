// The KV cache model's greedy feed on CUDA (greedy_feed_check.h): the greedy_tokens kernel's ids,
// the only thing read back, equal the host's greedy choice over the same bf16 logits read back
// whole, in prefill and decode rounds (the decode plan a CUDA graph) and through the engine; one
// sequence's steps run one ahead give the same ids.
// Skips without a GPU.
#include "cuda/device_info.h"
#include "greedy_feed_check.h"

namespace surogate::generate {
namespace {

class GreedyFeedCuda : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  }
};

TEST_P(GreedyFeedCuda, TheKernelsIdsEqualTheHostsChoiceOverTheSameLogits) {
  testing::expect_device_greedy_equals_host(GetParam(), /*cuda=*/true);
}

// One sequence's steps run one ahead (decode_run_ahead.h): the same ids as the host's choice.
TEST_P(GreedyFeedCuda, OneSequenceRunAheadEqualsTheHostsChoice) {
  testing::expect_one_sequence_step_by_step_equals_host(GetParam(), /*cuda=*/true);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GreedyFeedCuda, ::testing::Values("qwen3_qknorm", "qwen3_moe_topk", "qwen2_bias_tied"));

}  // namespace
}  // namespace surogate::generate
