// Embedding: lookup copies rows; backward scatter-adds repeated ids and accumulates.
#include "core/error.h"
#include "gradient_check.h"
#include "ops/embedding.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

TEST(Embedding, ForwardCopiesRows) {
  const int64_t vocab = 7, dim = 5;
  const std::vector<double> table = random_vector(vocab * dim, 1);
  const std::vector<int32_t> ids = {3, 0, 6, 3};
  std::vector<double> out(ids.size() * dim);
  embedding_forward(ids.data(), table.data(), 4, vocab, dim, out.data());
  for (size_t token = 0; token < ids.size(); ++token) {
    for (int64_t c = 0; c < dim; ++c) EXPECT_EQ(out[token * dim + c], table[ids[token] * dim + c]);
  }
}

TEST(Embedding, BackwardScatterAddsAndAccumulates) {
  const int64_t vocab = 5, dim = 3;
  const std::vector<int32_t> ids = {1, 4, 1, 1};
  const std::vector<double> d_out = random_vector(ids.size() * dim, 2);
  std::vector<double> d_table(vocab * dim, 0.0);
  embedding_backward(ids.data(), d_out.data(), 4, vocab, dim, d_table.data());
  for (int64_t c = 0; c < dim; ++c) {
    EXPECT_NEAR(d_table[1 * dim + c], d_out[0 * dim + c] + d_out[2 * dim + c] + d_out[3 * dim + c],
                1e-15);
    EXPECT_EQ(d_table[4 * dim + c], d_out[1 * dim + c]);
    EXPECT_EQ(d_table[0 * dim + c], 0.0);
  }
  const std::vector<double> once = d_table;
  embedding_backward(ids.data(), d_out.data(), 4, vocab, dim, d_table.data());
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(d_table[i], 2.0 * once[i], 1e-15);
}

TEST(Embedding, GradientMatchesFiniteDifferences) {
  const int64_t vocab = 6, dim = 4, tokens = 9;
  std::vector<double> table = random_vector(vocab * dim, 3);
  const std::vector<int32_t> ids = {0, 5, 2, 2, 3, 5, 5, 1, 0};
  const std::vector<double> weights = random_vector(tokens * dim, 4);
  std::vector<double> out(tokens * dim);
  auto loss = [&] {
    embedding_forward(ids.data(), table.data(), tokens, vocab, dim, out.data());
    return testing::weighted_sum(out, weights);
  };
  std::vector<double> d_table(vocab * dim, 0.0);
  embedding_backward(ids.data(), weights.data(), tokens, vocab, dim, d_table.data());
  testing::expect_gradient_matches(loss, table, d_table, 5, "d_table");
}

TEST(Embedding, OutOfRangeIdIsAnInternalError) {
  const std::vector<double> table(4, 0.0);
  const std::vector<int32_t> ids = {2};
  std::vector<double> out(2);
  EXPECT_THROW(embedding_forward(ids.data(), table.data(), 1, 2, 2, out.data()), InternalError);
}

}  // namespace
}  // namespace surogate::ops
