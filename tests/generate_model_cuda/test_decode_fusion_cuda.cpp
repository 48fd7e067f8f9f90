// The fused decode step (generate/decode_fusion.h: one or two slots on CUDA, q/k/v in one
// decode_gemv launch, gate/up/SwiGLU in another) against the KV-cache model on the CPU (fp32,
// unfused), without an adapter (adapter graphs are left unfused: decode_fusion.h): the
// logits within kCudaVersusCpu (5e-2, test_kv_cache_model_cuda.cpp's bound: bf16 weights and
// about a dozen bf16 roundings a layer) and the same greedy tokens, step after step, where the
// CPU's best logit leads its runner-up by more than that bound (away from near-ties).
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/device_info.h"
#include "kv_model_pair.h"

namespace surogate::generate {
namespace {

using testing::argmax;
using testing::random_tokens;

constexpr double kCudaVersusCpu = 5e-2;
constexpr size_t kVocab = 96;

// Whether row `row`'s largest logit leads the next by more than the tolerance of the scale.
bool clear_choice(const std::vector<float>& logits, size_t row) {
  std::vector<float> values(logits.begin() + static_cast<std::ptrdiff_t>(row * kVocab),
                            logits.begin() + static_cast<std::ptrdiff_t>((row + 1) * kVocab));
  std::partial_sort(values.begin(), values.begin() + 2, values.end(), std::greater<float>());
  const float scale = *std::max_element(logits.begin(), logits.end(), [](float a, float b) { return std::abs(a) < std::abs(b); });
  return values[0] - values[1] > 2 * kCudaVersusCpu * std::abs(scale);
}

struct FusionCase {
  std::string fixture;
  int64_t slots = 1;
  bool adapter = false;
};
void PrintTo(const FusionCase& c, std::ostream* out) {
  *out << c.fixture << ", " << c.slots << " slot(s)" << (c.adapter ? ", an adapter" : "");
}

class DecodeFusionCuda : public ::testing::TestWithParam<FusionCase> {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  }
};

TEST_P(DecodeFusionCuda, FusedStepsGiveTheCpuModelsLogitsAndGreedyTokens) {
  const FusionCase& c = GetParam();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("surogate_decode_fusion_" + c.fixture);
  ModelOptions options{.slots = c.slots, .max_context = 24};
  if (c.adapter) {
    std::filesystem::remove_all(dir);
    testing::write_random_adapter(dir, c.fixture);
    options.adapter = dir;
  }
  std::unique_ptr<NextTokenModel> cpu = open_kv_cache_model(testing::fixture(c.fixture), options, {.rows = 2, .chunk = 4});
  options.cuda = true;
  std::unique_ptr<NextTokenModel> gpu = open_kv_cache_model(testing::fixture(c.fixture), options, {.rows = 2, .chunk = 4});
  std::vector<SlotFeed> feeds{{0, random_tokens(7, 71)}};
  if (c.slots == 2) feeds.push_back({1, random_tokens(5, 72)});
  for (int step = 0; step < 8; ++step) {
    const std::vector<float> expected = cpu->feed(feeds), got = gpu->feed(feeds);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_LE(testing::relative_difference(got, expected), kCudaVersusCpu) << c.fixture << " step " << step;
    std::vector<SlotFeed> next;
    for (size_t row = 0; row < feeds.size(); ++row) {
      const int32_t token = argmax(expected, row, kVocab);
      if (clear_choice(expected, row)) EXPECT_EQ(argmax(got, row, kVocab), token) << c.fixture << " step " << step;
      next.push_back({feeds[row].slot, {token}});
    }
    feeds = std::move(next);  // one token a row from here on: the fused decode plan
  }
  if (c.adapter) std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecodeFusionCuda,
                         // No adapter cases: adapter graphs are left unfused (decode_fusion.h).
                         ::testing::Values(FusionCase{"qwen3_qknorm", 1, false}, FusionCase{"llama_gqa_llama3", 2, false},
                                           FusionCase{"qwen2_bias_tied", 1, false}, FusionCase{"qwen3_moe_topk", 1, false}),
                         [](const ::testing::TestParamInfo<FusionCase>& info) {
                           return info.param.fixture + "_" + std::to_string(info.param.slots) +
                                  (info.param.adapter ? "_adapter" : "");
                         });

}  // namespace
}  // namespace surogate::generate
