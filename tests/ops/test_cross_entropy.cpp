// LM head + cross-entropy: forward against full logits, chunk-count independence, ignored
// rows, gradients of hidden and weight by finite differences, accumulation, float vs double.
#include <cmath>

#include "core/error.h"
#include "gradient_check.h"
#include "ops/cross_entropy.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

const std::vector<int32_t> kLabels = {3, kIgnoreIndex, 0, 10, 10, kIgnoreIndex, 7, 1, 2, 5, 4};
constexpr int64_t kRows = 11, kHidden = 6, kVocab = 13;

TEST(CrossEntropy, ForwardMatchesFullLogits) {
  const std::vector<double> hidden = random_vector(kRows * kHidden, 1, -2, 2);
  const std::vector<double> weight = random_vector(kVocab * kHidden, 2);
  std::vector<double> logits(kRows * kVocab), lse(kRows);
  lm_head_logits(hidden.data(), weight.data(), kRows, kHidden, kVocab, logits.data());
  const CrossEntropyResult result =
      lm_head_cross_entropy_forward(CrossEntropyShape{kRows, kHidden, kVocab, 1}, hidden.data(),
                                    weight.data(), kLabels.data(), lse.data());
  double expected = 0.0;
  for (int64_t n = 0; n < kRows; ++n) {
    double total = 0.0;
    for (int64_t v = 0; v < kVocab; ++v) total += std::exp(logits[n * kVocab + v]);
    EXPECT_NEAR(lse[n], std::log(total), 1e-13);
    if (kLabels[n] != kIgnoreIndex) expected += std::log(total) - logits[n * kVocab + kLabels[n]];
  }
  EXPECT_EQ(result.valid_tokens, 9);
  EXPECT_NEAR(result.loss_sum, expected, 1e-12);
}

TEST(CrossEntropy, ChunkCountDoesNotChangeResults) {
  const std::vector<double> hidden = random_vector(kRows * kHidden, 3, -2, 2);
  const std::vector<double> weight = random_vector(kVocab * kHidden, 4);
  std::vector<double> lse(kRows), reference_d_hidden(kRows * kHidden), reference_d_weight;
  double reference_loss = 0.0;
  for (int64_t chunks : {1, 2, 3, 7}) {
    const CrossEntropyShape shape{kRows, kHidden, kVocab, chunks};
    const CrossEntropyResult result = lm_head_cross_entropy_forward(
        shape, hidden.data(), weight.data(), kLabels.data(), lse.data());
    std::vector<double> d_hidden(kRows * kHidden), d_weight(kVocab * kHidden, 0.0);
    lm_head_cross_entropy_backward(shape, hidden.data(), weight.data(), kLabels.data(), lse.data(),
                                   1.0 / result.valid_tokens, d_hidden.data(), d_weight.data());
    if (chunks == 1) {
      reference_loss = result.loss_sum;
      reference_d_hidden = d_hidden;
      reference_d_weight = d_weight;
      continue;
    }
    EXPECT_NEAR(result.loss_sum, reference_loss, 1e-12 * reference_loss) << chunks;
    for (size_t i = 0; i < d_hidden.size(); ++i)
      EXPECT_NEAR(d_hidden[i], reference_d_hidden[i], 1e-15);
    for (size_t i = 0; i < d_weight.size(); ++i)
      EXPECT_NEAR(d_weight[i], reference_d_weight[i], 1e-15);
  }
}

TEST(CrossEntropy, FloatChunkCountDoesNotChangeResults) {
  const std::vector<float> hidden = testing::to_float(random_vector(kRows * kHidden, 11, -2, 2));
  const std::vector<float> weight = testing::to_float(random_vector(kVocab * kHidden, 12));
  std::vector<float> lse(kRows);
  const double reference =
      lm_head_cross_entropy_forward(CrossEntropyShape{kRows, kHidden, kVocab, 1}, hidden.data(),
                                    weight.data(), kLabels.data(), lse.data())
          .loss_sum;
  for (int64_t chunks : {2, 3, 7}) {
    const double chunked =
        lm_head_cross_entropy_forward(CrossEntropyShape{kRows, kHidden, kVocab, chunks},
                                      hidden.data(), weight.data(), kLabels.data(), lse.data())
            .loss_sum;
    EXPECT_LT(testing::relative_difference(chunked, reference), 1e-6) << chunks;
  }
}

TEST(CrossEntropy, GradientsMatchFiniteDifferencesAndAccumulate) {
  std::vector<double> hidden = random_vector(kRows * kHidden, 5, -2, 2);
  std::vector<double> weight = random_vector(kVocab * kHidden, 6);
  const CrossEntropyShape shape{kRows, kHidden, kVocab, 3};
  std::vector<double> lse(kRows);
  // Probe loss: the mean over valid tokens, as training uses it.
  auto loss = [&] {
    const CrossEntropyResult result = lm_head_cross_entropy_forward(
        shape, hidden.data(), weight.data(), kLabels.data(), lse.data());
    return result.loss_sum / static_cast<double>(result.valid_tokens);
  };
  loss();
  std::vector<double> d_hidden(hidden.size()), d_weight(weight.size(), 0.0);
  lm_head_cross_entropy_backward(shape, hidden.data(), weight.data(), kLabels.data(), lse.data(),
                                 1.0 / 9.0, d_hidden.data(), d_weight.data());
  testing::expect_gradient_matches(loss, hidden, d_hidden, 7, "d_hidden");
  testing::expect_gradient_matches(loss, weight, d_weight, 8, "d_weight");
  for (int64_t c = 0; c < kHidden; ++c) {
    EXPECT_EQ(d_hidden[1 * kHidden + c], 0.0);  // ignored rows get no gradient
    EXPECT_EQ(d_hidden[5 * kHidden + c], 0.0);
  }
  const std::vector<double> once = d_weight;
  lm_head_cross_entropy_backward(shape, hidden.data(), weight.data(), kLabels.data(), lse.data(),
                                 1.0 / 9.0, d_hidden.data(), d_weight.data());
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(d_weight[i], 2.0 * once[i], 1e-15);
}

TEST(CrossEntropy, FloatAgreesWithDouble) {
  const int64_t rows = 10, hidden_dim = 24, vocab = 50;
  const std::vector<double> hidden = random_vector(rows * hidden_dim, 9, -2, 2);
  const std::vector<double> weight = random_vector(vocab * hidden_dim, 10);
  std::vector<int32_t> labels(rows);
  for (int64_t n = 0; n < rows; ++n) labels[n] = static_cast<int32_t>((n * 7) % vocab);
  std::vector<double> lse(rows);
  std::vector<float> lse_float(rows);
  const CrossEntropyShape shape{rows, hidden_dim, vocab, 2};
  const double loss =
      lm_head_cross_entropy_forward(shape, hidden.data(), weight.data(), labels.data(), lse.data())
          .loss_sum;
  const std::vector<float> hidden_float = testing::to_float(hidden),
                           weight_float = testing::to_float(weight);
  const double loss_float =
      lm_head_cross_entropy_forward(shape, hidden_float.data(), weight_float.data(), labels.data(),
                                    lse_float.data())
          .loss_sum;
  EXPECT_LT(testing::relative_difference(loss_float, loss), testing::kFloatTolerance);
  EXPECT_LT(testing::max_relative_error(lse_float, lse), testing::kFloatTolerance);
}

// A row of weight 2 is the same row scored twice: rows [a, b, c] with weights [2, 1, 0] must give
// the loss and weight gradient of rows [a, a, b] unweighted, and a's hidden gradient twice the
// duplicated row's (a weight-0 row adds nothing, like an ignored label).
TEST(CrossEntropy, TokenWeightsEqualRepeatedRows) {
  const int64_t rows = 3;
  const std::vector<double> hidden = random_vector(rows * kHidden, 11, -2, 2);
  const std::vector<double> weight = random_vector(kVocab * kHidden, 12);
  const std::vector<int32_t> labels = {4, 9, 2};
  const std::vector<float> token_weights = {2.0f, 1.0f, 0.0f};
  std::vector<double> repeated_hidden;
  for (int64_t row : {0, 0, 1}) {
    repeated_hidden.insert(repeated_hidden.end(), hidden.begin() + row * kHidden, hidden.begin() + (row + 1) * kHidden);
  }
  const std::vector<int32_t> repeated_labels = {4, 4, 9};
  for (int64_t chunks : {1, 2}) {
    std::vector<double> lse(rows), repeated_lse(3);
    const CrossEntropyShape shape{rows, kHidden, kVocab, chunks};
    const CrossEntropyShape repeated_shape{3, kHidden, kVocab, chunks};
    const CrossEntropyResult weighted = lm_head_cross_entropy_forward(shape, hidden.data(), weight.data(), labels.data(),
                                                                      lse.data(), token_weights.data());
    const CrossEntropyResult repeated = lm_head_cross_entropy_forward(
        repeated_shape, repeated_hidden.data(), weight.data(), repeated_labels.data(), repeated_lse.data());
    EXPECT_NEAR(weighted.loss_sum, repeated.loss_sum, 1e-12 * repeated.loss_sum);
    std::vector<double> d_hidden(rows * kHidden), d_weight(kVocab * kHidden, 0.0);
    std::vector<double> repeated_d_hidden(3 * kHidden), repeated_d_weight(kVocab * kHidden, 0.0);
    lm_head_cross_entropy_backward(shape, hidden.data(), weight.data(), labels.data(), lse.data(), 0.25, d_hidden.data(),
                                   d_weight.data(), token_weights.data());
    lm_head_cross_entropy_backward(repeated_shape, repeated_hidden.data(), weight.data(), repeated_labels.data(),
                                   repeated_lse.data(), 0.25, repeated_d_hidden.data(), repeated_d_weight.data());
    for (size_t i = 0; i < d_weight.size(); ++i) EXPECT_NEAR(d_weight[i], repeated_d_weight[i], 1e-14);
    for (int64_t c = 0; c < kHidden; ++c) {
      EXPECT_NEAR(d_hidden[c], repeated_d_hidden[c] + repeated_d_hidden[kHidden + c], 1e-14);
      EXPECT_NEAR(d_hidden[kHidden + c], repeated_d_hidden[2 * kHidden + c], 1e-14);
      EXPECT_EQ(d_hidden[2 * kHidden + c], 0.0);
    }
  }
}

TEST(CrossEntropy, LabelOutsideVocabularyIsAnInternalError) {
  // Raised on a parallel_for worker and rethrown on the calling thread.
  const std::vector<double> hidden = random_vector(4 * 2, 13), weight = random_vector(3 * 2, 14);
  const std::vector<int32_t> labels = {0, 1, 3, 2};
  std::vector<double> lse(4);
  EXPECT_THROW(lm_head_cross_entropy_forward(CrossEntropyShape{4, 2, 3, 1}, hidden.data(),
                                             weight.data(), labels.data(), lse.data()),
               InternalError);
}

}  // namespace
}  // namespace surogate::ops
