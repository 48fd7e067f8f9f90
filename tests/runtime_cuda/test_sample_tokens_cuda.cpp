// cuda::sample_tokens (cuda/kernels/sample_tokens.h) against its CPU reference ops::sample_tokens
// on the same values (bf16-exact, and fp32): every option alone and together (temperature,
// top_k, top_p, min_p, repetition_penalty with a context), their edge values (top_k 1, top_k at
// and past the vocabulary, top_p tiny, min_p 1), ties at the top_k and top_p boundaries (values
// from a few levels), greedy rows with a penalty, and the codes (NaN / +inf -1, nothing to draw
// -2, skipped -3), over rows of a real vocabulary (151936) and of odd sizes, each row with its
// own seed and draw index, three draw offsets. Exact: the same token on every row.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/bfloat16.h"
#include "core/token_draw.h"
#include "cuda/kernels/sample_tokens.h"
#include "cuda/test_helpers.h"
#include "ops/sample_tokens.h"

namespace surogate::cuda::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Options {
  float temperature = 1.0f, penalty = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f, min_p = 0.0f;
};

std::vector<Options> option_sets(int64_t vocab) {
  const auto v = static_cast<int32_t>(vocab);
  return {
      {1.0f},  {0.7f},  {1.5f, 1.0f, 20},  {1.0f, 1.0f, 0, 0.9f},  {0.6f, 1.0f, 20, 0.95f},  {1.0f, 1.0f, 0, 1.0f, 0.05f},
      {1.0f, 1.3f},  {0.8f, 0.7f, 50, 0.8f, 0.02f},  {1.0f, 1.0f, 1},  {1.0f, 1.0f, v},  {1.0f, 1.0f, v - 1},
      {1.0f, 1.0f, 0, 1e-6f},  {1.0f, 1.0f, 0, 1.0f, 1.0f},  {0.0f, 1.5f},  {0.0f},  {2.0f, 1.0f, 0, 0.5f},
  };
}

// The rows: every option set over plain normal values, then over values from 4 levels (ties at
// every boundary), then the code rows.
void fill_rows(int64_t vocab, std::vector<float>& values, std::vector<RowSampling>& params, uint32_t draw_offset) {
  std::mt19937 random(static_cast<uint32_t>(vocab) + draw_offset);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> level(0, 3);
  const auto add = [&](const Options& o, auto value) {
    RowSampling p;
    p.temperature = o.temperature;
    p.repetition_penalty = o.penalty;
    p.top_k = o.top_k;
    p.top_p = o.top_p;
    p.log_min_p = o.min_p > 0.0f ? std::log(o.min_p) : -kInf;
    p.draw = draw_offset + static_cast<uint32_t>(params.size()) * 7;
    p.seed = 0x9e3779b97f4a7c15ull * (params.size() + 1);
    params.push_back(p);
    for (int64_t i = 0; i < vocab; ++i) values.push_back(value(i));
  };
  for (const Options& o : option_sets(vocab)) add(o, [&](int64_t) { return normal(random); });
  for (const Options& o : option_sets(vocab)) add(o, [&](int64_t) { return static_cast<float>(level(random)); });
  add({1.0f}, [&](int64_t i) { return i == vocab / 2 ? std::nanf("") : normal(random); });
  add({0.0f}, [&](int64_t i) { return i == vocab - 1 ? kInf : normal(random); });
  add({1.0f}, [&](int64_t) { return -kInf; });
  add({0.0f}, [&](int64_t) { return -kInf; });
  add({-1.0f}, [&](int64_t) { return normal(random); });
  add({1.0f, 1.0f, 0, 0.9f}, [&](int64_t i) { return i % 3 == 0 ? -kInf : normal(random); });
}

void check(int64_t vocab, bool bf16, uint32_t draw_offset) {
  std::vector<float> values;
  std::vector<RowSampling> params;
  fill_rows(vocab, values, params, draw_offset);
  if (bf16) values = from_bf16(to_bf16(values));  // the CPU sees the GPU's values exactly
  const auto rows = static_cast<int64_t>(params.size());
  const int64_t width = 6;
  std::vector<int32_t> context(static_cast<size_t>(rows * width), -1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width - 1; ++c) context[static_cast<size_t>(r * width + c)] = static_cast<int32_t>((r * 31 + c * 97) % (vocab + 3));
  }
  std::vector<int32_t> expected(static_cast<size_t>(rows));
  ops::sample_tokens(values.data(), rows, vocab, params.data(), context.data(), width, expected.data());
  DeviceBuffer<int32_t> tokens(static_cast<size_t>(rows));
  const DeviceBuffer<RowSampling> device_params = to_device(params);
  const DeviceBuffer<int32_t> device_context = to_device(context);
  if (bf16) {
    const DeviceBuffer<Bf16> logits = device_bf16(values);
    sample_tokens(tokens.data(), bf16_ptr(logits), rows, vocab, device_params.data(), device_context.data(), width, nullptr);
  } else {
    const DeviceBuffer<float> logits = to_device(values);
    sample_tokens(tokens.data(), logits.data(), rows, vocab, device_params.data(), device_context.data(), width, nullptr);
  }
  synchronize();
  const std::vector<int32_t> got = tokens.download();
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(got[static_cast<size_t>(r)], expected[static_cast<size_t>(r)])
        << "vocab " << vocab << " row " << r << (bf16 ? " bf16" : " fp32") << " draw offset " << draw_offset;
  }
  const size_t codes = params.size() - 6;  // the code rows' expectations, named
  EXPECT_EQ(expected[codes], ops::kUnusableRow);
  EXPECT_EQ(expected[codes + 1], ops::kUnusableRow);
  EXPECT_EQ(expected[codes + 2], ops::kNothingToDraw);
  EXPECT_EQ(expected[codes + 3], 0);
  EXPECT_EQ(expected[codes + 4], ops::kSkippedRow);
}

TEST(CudaSampleTokens, EqualsTheCpuReferenceOnEveryOptionTiesAndCodes) {
  SKIP_WITHOUT_GPU();
  for (int64_t vocab : {int64_t{151936}, int64_t{1000}, int64_t{37}}) {
    for (uint32_t draw_offset : {0u, 1000u, 123457u}) {
      check(vocab, true, draw_offset);
      check(vocab, false, draw_offset);
    }
  }
}

// Without a context (width 0, no bitmask): the penalty rows read none.
TEST(CudaSampleTokens, WithoutAContextNoTokenIsPenalised) {
  SKIP_WITHOUT_GPU();
  const int64_t vocab = 5000, rows = 8;
  std::vector<float> values = random_floats(static_cast<size_t>(vocab * rows), 3.0f);
  std::vector<RowSampling> params(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    params[static_cast<size_t>(r)].repetition_penalty = 2.0f;
    params[static_cast<size_t>(r)].draw = static_cast<uint32_t>(r);
  }
  std::vector<int32_t> expected(static_cast<size_t>(rows));
  ops::sample_tokens(values.data(), rows, vocab, params.data(), nullptr, 0, expected.data());
  DeviceBuffer<int32_t> tokens(static_cast<size_t>(rows));
  const DeviceBuffer<float> logits = to_device(values);
  const DeviceBuffer<RowSampling> device_params = to_device(params);
  sample_tokens(tokens.data(), logits.data(), rows, vocab, device_params.data(), nullptr, 0, nullptr);
  synchronize();
  EXPECT_EQ(tokens.download(), expected);
}

}  // namespace
}  // namespace surogate::cuda::testing
