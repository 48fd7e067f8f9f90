// The KV cache model's greedy feed on the CPU backend (greedy_feed_check.h): its ids equal the
// host's greedy choice over its logits, in prefill and decode rounds and through the engine.
#include "greedy_feed_check.h"

namespace surogate::generate {
namespace {

class GreedyFeed : public ::testing::TestWithParam<std::string> {};

TEST_P(GreedyFeed, TheModelsIdsEqualTheHostsChoiceOverItsLogits) {
  testing::expect_device_greedy_equals_host(GetParam(), /*cuda=*/false);
}

// The scenario the CUDA run-ahead is checked on (generate_model_cuda), here on the CPU's path.
TEST_P(GreedyFeed, OneSequenceStepByStepEqualsTheHostsChoice) {
  testing::expect_one_sequence_step_by_step_equals_host(GetParam(), /*cuda=*/false);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GreedyFeed, ::testing::Values("qwen3_qknorm", "qwen3_moe_topk"));

}  // namespace
}  // namespace surogate::generate
