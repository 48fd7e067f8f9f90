// Fused softmax cross-entropy and the chunked LM head + cross-entropy vs float64 references.
// Tolerances: per-row losses 1e-4 relative (fp32 log-sum-exp on bf16 logits); dlogits 4e-3
// (one bf16 rounding); the chunked head, whose logits pass through bf16 and whose grads are
// matmuls: 1e-2 relative (matmul class).
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/kernels/cross_entropy.h"
#include "cuda/lm_head_loss.h"
#include "test_helpers.h"

namespace surogate::cuda::testing {
namespace {

std::vector<int32_t> random_labels(int64_t rows, int64_t vocab) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> labels(rows);
  for (int64_t i = 0; i < rows; ++i) labels[i] = i % 5 == 3 ? kIgnoreIndex : pick(generator());
  return labels;
}

// Loss per row and dlogits = (softmax − onehot) · scale, float64, from the given logits.
void reference_cross_entropy(const std::vector<double>& logits, const std::vector<int32_t>& labels, int64_t rows,
                             int64_t vocab, double scale, std::vector<double>& losses, std::vector<double>& dlogits) {
  losses.assign(rows, 0.0);
  dlogits.assign(rows * vocab, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t label = labels[r];
    if (label < 0 || label >= vocab) continue;
    const double* row = &logits[r * vocab];
    double max = row[0];
    for (int64_t j = 1; j < vocab; ++j) max = std::max(max, row[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - max);
    const double lse = max + std::log(sum);
    losses[r] = lse - row[label];
    for (int64_t j = 0; j < vocab; ++j) dlogits[r * vocab + j] = (std::exp(row[j] - lse) - (j == label)) * scale;
  }
}

TEST(CudaCrossEntropy, LossGradientAndCount) {
  SKIP_WITHOUT_GPU();
  for (auto [rows, vocab] : {std::pair<int64_t, int64_t>{1, 8}, {7, 1001}, {33, 4096}, {10, 151936}}) {
    auto logits = random_floats(rows * vocab, 6.0f);
    auto labels = random_labels(rows, vocab);
    labels[0] = static_cast<int32_t>(vocab - 1);
    auto device_logits = device_bf16(logits);
    auto device_labels = to_device(labels);
    DeviceBuffer<float> losses(rows), scale(1), loss_sum(1);
    DeviceBuffer<int32_t> count(1);
    losses.poison();
    loss_sum.poison();
    cross_entropy_gradient_scale(count.data(), scale.data(), device_labels.data(), rows, vocab, nullptr);
    cross_entropy_forward_backward(bf16_ptr(device_logits), losses.data(), device_labels.data(), rows, vocab,
                                   scale.data(), nullptr);
    sum_row_losses(loss_sum.data(), losses.data(), rows, nullptr);
    synchronize();
    int valid = 0;
    for (int32_t label : labels) valid += label >= 0 && label < vocab;
    std::vector<double> expected_losses, expected_dlogits;
    reference_cross_entropy(std::vector<double>(logits.begin(), logits.end()), labels, rows, vocab,
                            1.0 / std::max(valid, 1), expected_losses, expected_dlogits);
    double expected_sum = 0.0;
    for (double loss : expected_losses) expected_sum += loss;
    const std::string where = "rows=" + std::to_string(rows) + " vocab=" + std::to_string(vocab);
    EXPECT_EQ(count.download()[0], valid) << where;
    EXPECT_LT(relative_error(losses.download(), expected_losses), 1e-4) << where;
    EXPECT_LT(relative_error(download_bf16(device_logits), expected_dlogits), 4e-3) << where;
    EXPECT_NEAR(loss_sum.download()[0], expected_sum, 1e-4 * std::max(1.0, std::fabs(expected_sum))) << where;
  }
}

TEST(CudaLmHeadLoss, ChunkedMatchesFullReference) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t rows, channels, vocab, chunk;
  };
  Matmul matmul;
  for (const Case& c : {Case{5, 64, 1000, 16}, Case{67, 64, 1000, 16}, Case{130, 256, 4096, 64}}) {
    auto hidden = random_floats(c.rows * c.channels), weight = random_floats(c.vocab * c.channels, 0.25f);
    auto labels = random_labels(c.rows, c.vocab);
    auto device_hidden = device_bf16(hidden), device_weight = device_bf16(weight);
    auto device_labels = to_device(labels);
    auto initial_dweight = random_fp32(c.vocab * c.channels, -0.01f, 0.01f);
    auto dweight = to_device(initial_dweight);
    DeviceBuffer<Bf16> workspace(c.chunk * c.vocab), dhidden(c.rows * c.channels);
    DeviceBuffer<float> losses(c.rows), loss_sum(1), scale(1);
    DeviceBuffer<int32_t> count(1);
    dhidden.poison();
    losses.poison();
    loss_sum.poison();
    cross_entropy_gradient_scale(count.data(), scale.data(), device_labels.data(), c.rows, c.vocab, nullptr);
    LmHeadLossArguments arguments{.hidden = bf16_ptr(device_hidden), .weight = bf16_ptr(device_weight),
                                  .labels = device_labels.data(), .rows = c.rows, .channels = c.channels,
                                  .vocab = c.vocab, .chunk_rows = c.chunk, .logits_workspace = bf16_ptr(workspace),
                                  .row_losses = losses.data(), .loss_sum = loss_sum.data(),
                                  .grad_scale = scale.data(), .dhidden = bf16_ptr(dhidden),
                                  .dweight = dweight.data()};
    lm_head_cross_entropy(matmul, arguments, nullptr);
    synchronize();

    std::vector<double> logits(c.rows * c.vocab, 0.0);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t v = 0; v < c.vocab; ++v) {
        double sum = 0.0;
        for (int64_t k = 0; k < c.channels; ++k) sum += double(hidden[r * c.channels + k]) * weight[v * c.channels + k];
        logits[r * c.vocab + v] = sum;
      }
    int valid = 0;
    for (int32_t label : labels) valid += label >= 0;
    std::vector<double> expected_losses, dlogits;
    reference_cross_entropy(logits, labels, c.rows, c.vocab, 1.0 / std::max(valid, 1), expected_losses, dlogits);
    std::vector<double> expected_dhidden(c.rows * c.channels, 0.0);
    std::vector<double> expected_dweight(initial_dweight.begin(), initial_dweight.end());
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t v = 0; v < c.vocab; ++v) {
        const double d = dlogits[r * c.vocab + v];
        if (d == 0.0) continue;
        for (int64_t k = 0; k < c.channels; ++k) {
          expected_dhidden[r * c.channels + k] += d * weight[v * c.channels + k];
          expected_dweight[v * c.channels + k] += d * hidden[r * c.channels + k];
        }
      }
    double expected_sum = 0.0;
    for (double loss : expected_losses) expected_sum += loss;
    const std::string where = "rows=" + std::to_string(c.rows) + " vocab=" + std::to_string(c.vocab);
    EXPECT_LT(relative_error(losses.download(), expected_losses), 1e-2) << where;
    EXPECT_NEAR(loss_sum.download()[0], expected_sum, 1e-2 * std::max(1.0, std::fabs(expected_sum))) << where;
    EXPECT_LT(relative_error(download_bf16(dhidden), expected_dhidden), 1e-2) << where;
    // dW's deviation is measured against the gradient added, not the random starting value.
    std::vector<float> added = dweight.download();
    std::vector<double> expected_added(expected_dweight.size());
    for (size_t i = 0; i < added.size(); ++i) {
      added[i] -= initial_dweight[i];
      expected_added[i] = expected_dweight[i] - initial_dweight[i];
    }
    EXPECT_LT(relative_error(added, expected_added), 1e-2) << where;
  }
}

}  // namespace
}  // namespace surogate::cuda::testing

namespace surogate::cuda::testing {
namespace {

// Token weights (loss_scale strategies): row r's loss and dlogits are the unweighted ones times
// weights[r], for the fused kernel and the chunked head. Same tolerances as above.
TEST(CudaCrossEntropy, TokenWeightsScaleEachRow) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 37, vocab = 4096;
  auto logits = random_floats(rows * vocab, 6.0f);
  auto labels = random_labels(rows, vocab);
  std::vector<float> weights(rows);
  for (int64_t r = 0; r < rows; ++r) weights[r] = r % 3 == 0 ? 2.0f : r % 3 == 1 ? 1.0f : 0.0f;
  auto device_logits = device_bf16(logits);
  auto device_labels = to_device(labels);
  auto device_weights = to_device(weights);
  DeviceBuffer<float> losses(rows), scale(1), loss_sum(1);
  DeviceBuffer<int32_t> count(1);
  losses.poison();
  cross_entropy_gradient_scale(count.data(), scale.data(), device_labels.data(), rows, vocab, nullptr);
  cross_entropy_forward_backward(bf16_ptr(device_logits), losses.data(), device_labels.data(), rows, vocab,
                                 scale.data(), nullptr, device_weights.data());
  sum_row_losses(loss_sum.data(), losses.data(), rows, nullptr);
  synchronize();
  int valid = 0;
  for (int32_t label : labels) valid += label >= 0 && label < vocab;
  std::vector<double> expected_losses, expected_dlogits;
  reference_cross_entropy(std::vector<double>(logits.begin(), logits.end()), labels, rows, vocab,
                          1.0 / std::max(valid, 1), expected_losses, expected_dlogits);
  double expected_sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    expected_losses[r] *= weights[r];
    expected_sum += expected_losses[r];
    for (int64_t j = 0; j < vocab; ++j) expected_dlogits[r * vocab + j] *= weights[r];
  }
  EXPECT_LT(relative_error(losses.download(), expected_losses), 1e-4);
  EXPECT_LT(relative_error(download_bf16(device_logits), expected_dlogits), 4e-3);
  EXPECT_NEAR(loss_sum.download()[0], expected_sum, 1e-4 * std::max(1.0, std::fabs(expected_sum)));
}

}  // namespace
}  // namespace surogate::cuda::testing

namespace surogate::cuda::testing {
namespace {

// Rows in one chunk: dweight_out is written by the one weight-gradient GEMM in bf16 (no fp32
// accumulator). Against the fp32-accumulated dW of the same call it differs by that GEMM's own
// rounding to bf16 — half a bf16 ulp (2^-9 of the entry) plus the fp32 sums' order — so within
// 4e-3 of the largest entry; against the float64 reference as the chunked test, 1e-2. With no
// rows the output is zeroed, and a written dW over several chunks is refused.
TEST(CudaLmHeadLoss, OneChunkWritesTheWeightGradientDirectly) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 67, channels = 64, vocab = 1000;
  Matmul matmul;
  auto hidden = random_floats(rows * channels), weight = random_floats(vocab * channels, 0.25f);
  auto labels = random_labels(rows, vocab);
  auto device_hidden = device_bf16(hidden), device_weight = device_bf16(weight);
  auto device_labels = to_device(labels);
  DeviceBuffer<Bf16> workspace(rows * vocab), dhidden(rows * channels), written(vocab * channels);
  DeviceBuffer<float> losses(rows), loss_sum(1), scale(1), accumulated(vocab * channels);
  DeviceBuffer<int32_t> count(1);
  cross_entropy_gradient_scale(count.data(), scale.data(), device_labels.data(), rows, vocab, nullptr);
  LmHeadLossArguments arguments{.hidden = bf16_ptr(device_hidden), .weight = bf16_ptr(device_weight),
                                .labels = device_labels.data(), .rows = rows, .channels = channels,
                                .vocab = vocab, .chunk_rows = rows, .logits_workspace = bf16_ptr(workspace),
                                .row_losses = losses.data(), .loss_sum = loss_sum.data(),
                                .grad_scale = scale.data(), .dhidden = bf16_ptr(dhidden)};
  written.poison();
  LmHeadLossArguments direct = arguments;
  direct.dweight_out = bf16_ptr(written);
  lm_head_cross_entropy(matmul, direct, nullptr);
  CUDA_CHECK(cudaMemset(accumulated.data(), 0, sizeof(float) * vocab * channels));
  LmHeadLossArguments summed = arguments;
  summed.dweight = accumulated.data();
  lm_head_cross_entropy(matmul, summed, nullptr);
  synchronize();
  const std::vector<float> direct_dweight = download_bf16(written), summed_dweight = accumulated.download();
  EXPECT_LT(relative_error(direct_dweight, summed_dweight), 4e-3);

  std::vector<double> expected(vocab * channels, 0.0);
  int valid = 0;
  for (int32_t label : labels) valid += label >= 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0) continue;
    std::vector<double> logits(vocab);
    double max = -INFINITY, sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) {
      double dot = 0.0;
      for (int64_t k = 0; k < channels; ++k) dot += double(hidden[r * channels + k]) * weight[v * channels + k];
      logits[v] = dot;
      max = std::max(max, dot);
    }
    for (double logit : logits) sum += std::exp(logit - max);
    for (int64_t v = 0; v < vocab; ++v) {
      const double d = (std::exp(logits[v] - max) / sum - (v == labels[r])) / valid;
      for (int64_t k = 0; k < channels; ++k) expected[v * channels + k] += d * hidden[r * channels + k];
    }
  }
  EXPECT_LT(relative_error(direct_dweight, expected), 1e-2);

  // No rows: nothing to multiply, the written dW is zeros.
  written.poison();
  LmHeadLossArguments empty = direct;
  empty.rows = 0;
  lm_head_cross_entropy(matmul, empty, nullptr);
  synchronize();
  for (float value : download_bf16(written)) ASSERT_EQ(value, 0.0f);
  // Over several chunks a written dW would keep only the last chunk's product.
  LmHeadLossArguments chunked = direct;
  chunked.chunk_rows = 16;
  EXPECT_ANY_THROW(lm_head_cross_entropy(matmul, chunked, nullptr));
}

}  // namespace
}  // namespace surogate::cuda::testing
