// Attention: forward against a naive softmax over an independently built full mask matrix
// (GQA ratios 1, 2, 4; packed documents; sliding window; bidirectional), LSE convention, gradients of
// q, k, v by finite differences, cu_seqlens conversion, float vs double.
#include <cmath>

#include "gradient_check.h"
#include "ops/attention.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

struct Case {
  int64_t batch, sequence, query_heads, kv_heads, head_dim, window;
  bool documents;
  bool causal = true;  // false: bidirectional within each document (vision towers)
};

// Document ids: row 0 holds documents of lengths 3, 1, rest; row 1 a single document.
std::vector<int32_t> make_documents(const Case& c) {
  std::vector<int32_t> ids(c.batch * c.sequence);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t t = 0; t < c.sequence; ++t) {
      ids[b * c.sequence + t] = b % 2 == 1 ? 7 : (t < 3 ? 0 : (t < 4 ? 1 : 2));
    }
  }
  return ids;
}

// mask[b][i][j] from the rules written out directly.
bool visible(const Case& c, const std::vector<int32_t>& documents, int64_t b, int64_t i,
             int64_t j) {
  if (c.causal && j > i) return false;
  if (c.window > 0 && !(i - c.window < j)) return false;
  if (c.documents && documents[b * c.sequence + i] != documents[b * c.sequence + j]) return false;
  return true;
}

const Case kCases[] = {
    {2, 7, 2, 2, 4, 0, false}, {2, 9, 4, 2, 3, 0, true}, {1, 11, 8, 2, 5, 3, false},
    {2, 8, 4, 1, 4, 2, true},  {1, 5, 3, 3, 6, 0, true},
    {2, 9, 4, 2, 3, 0, true, false}, {1, 6, 2, 1, 4, 0, false, false},
};

TEST(Attention, ForwardMatchesNaiveMaskedSoftmax) {
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    AttentionShape shape{c.batch,    c.sequence, c.query_heads, c.kv_heads,
                         c.head_dim, 0.0,        c.window};
    shape.causal = c.causal;
    const int64_t q_count = c.batch * c.sequence * c.query_heads * c.head_dim;
    const int64_t kv_count = c.batch * c.sequence * c.kv_heads * c.head_dim;
    const std::vector<double> q = random_vector(q_count, ++seed, -2, 2);
    const std::vector<double> k = random_vector(kv_count, ++seed, -2, 2);
    const std::vector<double> v = random_vector(kv_count, ++seed);
    const std::vector<int32_t> documents = make_documents(c);
    std::vector<double> out(q_count), lse(c.batch * c.query_heads * c.sequence);
    attention_forward(shape, q.data(), k.data(), v.data(), c.documents ? documents.data() : nullptr,
                      out.data(), lse.data());
    const int64_t group = c.query_heads / c.kv_heads;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t h = 0; h < c.query_heads; ++h) {
        for (int64_t i = 0; i < c.sequence; ++i) {
          // Masked scores with −inf, then a plain softmax.
          std::vector<double> scores(c.sequence, -INFINITY);
          for (int64_t j = 0; j < c.sequence; ++j) {
            if (!visible(c, documents, b, i, j)) continue;
            double s = 0.0;
            for (int64_t d = 0; d < c.head_dim; ++d) {
              s += q[((b * c.sequence + i) * c.query_heads + h) * c.head_dim + d] *
                   k[((b * c.sequence + j) * c.kv_heads + h / group) * c.head_dim + d];
            }
            scores[j] = s * scale;
          }
          double total = 0.0;
          for (double s : scores) total += std::exp(s);
          EXPECT_NEAR(lse[(b * c.query_heads + h) * c.sequence + i], std::log(total), 1e-13);
          for (int64_t d = 0; d < c.head_dim; ++d) {
            double expected = 0.0;
            for (int64_t j = 0; j < c.sequence; ++j) {
              expected += std::exp(scores[j]) / total *
                          v[((b * c.sequence + j) * c.kv_heads + h / group) * c.head_dim + d];
            }
            EXPECT_NEAR(out[((b * c.sequence + i) * c.query_heads + h) * c.head_dim + d], expected,
                        1e-13);
          }
        }
      }
    }
  }
}

TEST(Attention, GradientsMatchFiniteDifferences) {
  uint64_t seed = 100;
  for (const Case& c : kCases) {
    AttentionShape shape{c.batch,    c.sequence, c.query_heads, c.kv_heads,
                         c.head_dim, 0.0,        c.window};
    shape.causal = c.causal;
    const int64_t q_count = c.batch * c.sequence * c.query_heads * c.head_dim;
    const int64_t kv_count = c.batch * c.sequence * c.kv_heads * c.head_dim;
    std::vector<double> q = random_vector(q_count, ++seed, -2, 2);
    std::vector<double> k = random_vector(kv_count, ++seed, -2, 2);
    std::vector<double> v = random_vector(kv_count, ++seed);
    const std::vector<double> weights = random_vector(q_count, ++seed);
    const std::vector<int32_t> documents = make_documents(c);
    const int32_t* document_ids = c.documents ? documents.data() : nullptr;
    std::vector<double> out(q_count), lse(c.batch * c.query_heads * c.sequence);
    auto loss = [&] {
      attention_forward(shape, q.data(), k.data(), v.data(), document_ids, out.data(), lse.data());
      return testing::weighted_sum(out, weights);
    };
    loss();
    std::vector<double> d_q(q_count), d_k(kv_count), d_v(kv_count);
    attention_backward(shape, q.data(), k.data(), v.data(), document_ids, out.data(), lse.data(),
                       weights.data(), d_q.data(), d_k.data(), d_v.data());
    const std::string name = "case Hq=" + std::to_string(c.query_heads) +
                             " Hkv=" + std::to_string(c.kv_heads) +
                             " window=" + std::to_string(c.window) + (c.causal ? "" : " bidirectional");
    testing::expect_gradient_matches(loss, q, d_q, ++seed, name + " d_q");
    testing::expect_gradient_matches(loss, k, d_k, ++seed, name + " d_k");
    testing::expect_gradient_matches(loss, v, d_v, ++seed, name + " d_v");
  }
}

TEST(Attention, ExplicitScaleIsUsed) {
  const AttentionShape shape{1, 4, 1, 1, 2, 0.3, 0};
  const std::vector<double> q = random_vector(8, 1), k = random_vector(8, 2),
                            v = random_vector(8, 3);
  std::vector<double> out(8), lse(4);
  attention_forward(shape, q.data(), k.data(), v.data(), nullptr, out.data(), lse.data());
  // Query 1 sees keys 0 and 1.
  const double s0 = 0.3 * (q[2] * k[0] + q[3] * k[1]), s1 = 0.3 * (q[2] * k[2] + q[3] * k[3]);
  EXPECT_NEAR(lse[1], std::log(std::exp(s0) + std::exp(s1)), 1e-14);
  EXPECT_NEAR(out[0], v[0], 1e-15);  // query 0 sees only itself
}

// A padding run (id −1) is no document: each of its tokens sees only itself (out = its own v, lse
// = its own score), and the documents beside it are untouched by it.
TEST(Attention, PaddingTokensSeeOnlyThemselves) {
  const AttentionShape shape{1, 6, 1, 1, 2, 0.0, 0};
  const std::vector<int32_t> documents{0, 0, 0, -1, -1, -1};
  const std::vector<double> q = random_vector(12, 11), k = random_vector(12, 12), v = random_vector(12, 13);
  std::vector<double> out(12), lse(6);
  attention_forward(shape, q.data(), k.data(), v.data(), documents.data(), out.data(), lse.data());
  const double scale = 1.0 / std::sqrt(2.0);
  for (int64_t i = 3; i < 6; ++i) {
    EXPECT_NEAR(out[i * 2], v[i * 2], 1e-15) << "padding token " << i;
    EXPECT_NEAR(out[i * 2 + 1], v[i * 2 + 1], 1e-15) << "padding token " << i;
    EXPECT_NEAR(lse[i], scale * (q[i * 2] * k[i * 2] + q[i * 2 + 1] * k[i * 2 + 1]), 1e-14) << "padding token " << i;
  }
  // The document's outputs are those of the document alone.
  const AttentionShape alone{1, 3, 1, 1, 2, 0.0, 0};
  std::vector<double> out_alone(6), lse_alone(3);
  attention_forward(alone, q.data(), k.data(), v.data(), nullptr, out_alone.data(), lse_alone.data());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], out_alone[i]);
  // Gradients through padding stay within each padding token.
  std::vector<double> d_out(12, 0.0), d_q(12), d_k(12), d_v(12);
  d_out[8] = 1.0;  // token 4 only
  attention_backward(shape, q.data(), k.data(), v.data(), documents.data(), out.data(), lse.data(), d_out.data(),
                     d_q.data(), d_k.data(), d_v.data());
  for (int i = 0; i < 12; ++i) {
    if (i / 2 != 4) EXPECT_EQ(d_v[i], 0.0) << i;
  }
  EXPECT_NEAR(d_v[8], 1.0, 1e-15);
}

TEST(Attention, DocumentIdsFromCuSeqlens) {
  const std::vector<int32_t> documents = document_ids_from_cu_seqlens({0, 3, 4, 8, 10, 16}, 2, 8);
  EXPECT_EQ(documents, (std::vector<int32_t>{0, 0, 0, 1, 2, 2, 2, 2, 3, 3, 4, 4, 4, 4, 4, 4}));
  EXPECT_ANY_THROW(document_ids_from_cu_seqlens({0, 6, 16}, 2, 8));  // crosses a row
}

TEST(Attention, FloatAgreesWithDouble) {
  const AttentionShape shape{2, 13, 4, 2, 16, 0.0, 5};
  const int64_t q_count = 2 * 13 * 4 * 16, kv_count = 2 * 13 * 2 * 16;
  const std::vector<double> q = random_vector(q_count, 7, -2, 2),
                            k = random_vector(kv_count, 8, -2, 2);
  const std::vector<double> v = random_vector(kv_count, 9);
  std::vector<double> out(q_count), lse(2 * 4 * 13);
  attention_forward(shape, q.data(), k.data(), v.data(), nullptr, out.data(), lse.data());
  const std::vector<float> qf = testing::to_float(q), kf = testing::to_float(k),
                           vf = testing::to_float(v);
  std::vector<float> out_float(q_count), lse_float(2 * 4 * 13);
  attention_forward(shape, qf.data(), kf.data(), vf.data(), nullptr, out_float.data(),
                    lse_float.data());
  EXPECT_LT(testing::max_relative_error(out_float, out), testing::kFloatTolerance);
  EXPECT_LT(testing::max_relative_error(lse_float, lse), testing::kFloatTolerance);
}

}  // namespace
}  // namespace surogate::ops
