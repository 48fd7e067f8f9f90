#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "train/optim/newton_schulz.h"
#include "train/optim/optimizer.h"
#include "random_values.h"

namespace surogate::train {
namespace {

using surogate::testing::normal_values;

// PyTorch's AdamW, in double, as the oracle.
struct ReferenceAdamW {
  std::vector<double> m, v;
  void step(std::vector<double>& p, const std::vector<float>& g, int t, double lr, double wd, bool decay) {
    if (m.empty()) { m.assign(p.size(), 0.0); v.assign(p.size(), 0.0); }
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (size_t i = 0; i < p.size(); ++i) {
      if (decay) p[i] *= 1.0 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * double(g[i]) * g[i];
      double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      p[i] -= lr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  }
};

TEST(AdamW, MatchesTheReferenceUpdateOverSeveralSteps) {
  std::vector<float> weights = normal_values(300, 1);
  std::vector<float> bias = normal_values(7, 2);
  std::vector<double> weights_ref(weights.begin(), weights.end()), bias_ref(bias.begin(), bias.end());
  std::vector<float> weights_grad(300), bias_grad(7);
  std::vector<ParameterSlot> slots = {{"w", weights.data(), weights_grad.data(), 20, 15, true, true},
                                      {"b", bias.data(), bias_grad.data(), 1, 7, false, false}};
  auto optimizer = make_adamw(slots, AdamWSettings{});
  ReferenceAdamW reference_w, reference_b;
  for (int step = 0; step < 5; ++step) {
    weights_grad = normal_values(300, 10 + step, 0.1f);
    bias_grad = normal_values(7, 20 + step, 0.1f);
    slots[0].gradient = weights_grad.data();
    slots[1].gradient = bias_grad.data();
    optimizer->step(slots, OptimizerStep{step, 1e-2, 0.1});
    reference_w.step(weights_ref, weights_grad, step + 1, 1e-2, 0.1, true);
    reference_b.step(bias_ref, bias_grad, step + 1, 1e-2, 0.1, false);
  }
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_NEAR(weights[i], weights_ref[i], 2e-6) << i;
  for (size_t i = 0; i < bias.size(); ++i) EXPECT_NEAR(bias[i], bias_ref[i], 2e-6) << i;
}

// Minimise 0.5 * ||p - target||² and return the final distance.
double minimise_quadratic(const std::string& which, int steps, std::vector<float>* trajectory_out = nullptr) {
  const int rows = 16, cols = 24;
  std::vector<float> target = normal_values(rows * cols, 5);
  std::vector<float> p(rows * cols, 0.0f), grad(rows * cols);
  std::vector<ParameterSlot> slots = {{"w", p.data(), grad.data(), rows, cols, true, true}};
  std::unique_ptr<Optimizer> optimizer;
  if (which == "adamw") optimizer = make_adamw(slots, AdamWSettings{});
  if (which == "adamw_8bit") optimizer = make_adamw_8bit(slots, AdamWSettings{});
  if (which == "normuon") optimizer = make_normuon(slots, NorMuonSettings{});
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < p.size(); ++i) grad[i] = p[i] - target[i];
    optimizer->step(slots, OptimizerStep{step, 0.05, 0.0});
    if (trajectory_out) trajectory_out->insert(trajectory_out->end(), p.begin(), p.end());
  }
  double distance = 0;
  for (size_t i = 0; i < p.size(); ++i) distance += (p[i] - target[i]) * (p[i] - target[i]);
  return std::sqrt(distance);
}

TEST(Optimizers, EachOneMinimisesAQuadratic) {
  std::vector<float> target = normal_values(16 * 24, 5);
  double start = 0;
  for (float t : target) start += t * t;
  start = std::sqrt(start);
  for (const char* which : {"adamw", "adamw_8bit", "normuon"}) {
    double end = minimise_quadratic(which, 200);
    EXPECT_LT(end, 0.1 * start) << which;
  }
}

TEST(AdamW8bit, TracksFullPrecisionAdamW) {
  std::vector<float> full, quantized;
  minimise_quadratic("adamw", 30, &full);
  minimise_quadratic("adamw_8bit", 30, &quantized);
  ASSERT_EQ(full.size(), quantized.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    diff += (full[i] - quantized[i]) * (full[i] - quantized[i]);
    norm += full[i] * full[i];
  }
  // Each stored first moment is off by up to half a code step: 0.9/64/2 of its decade, i.e. up
  // to 7% for values at the bottom of the top decade and ~0.7% at its top; the second moment
  // half that (twice the codes), halved again by the square root. Averaged over elements and
  // steps, the trajectories stay within 5% of each other.
  EXPECT_LT(std::sqrt(diff / norm), 0.05);
}

TEST(NewtonSchulz, PushesSingularValuesTowardsOne) {
  for (auto [rows, cols] : {std::pair{32, 32}, std::pair{16, 48}, std::pair{48, 16}}) {
    std::vector<float> matrix = normal_values(rows * cols, 9);
    newton_schulz_orthogonalize(matrix, rows, cols);
    // For the wide orientation X (n x m, n <= m), X Xᵀ ≈ I with diagonal in about [0.5, 1.5].
    int n = std::min(rows, cols);
    bool wide = rows <= cols;
    for (int i = 0; i < n; ++i) {
      double diagonal = 0;
      for (int k = 0; k < std::max(rows, cols); ++k) {
        float value = wide ? matrix[i * cols + k] : matrix[k * cols + i];
        diagonal += value * value;
      }
      EXPECT_GT(diagonal, 0.4) << rows << "x" << cols;
      EXPECT_LT(diagonal, 1.6) << rows << "x" << cols;
    }
  }
}

TEST(NorMuon, UsesAdamWForNonMatrixParameters) {
  std::vector<float> a = normal_values(50, 3), b = a;
  std::vector<float> grad = normal_values(50, 4);
  std::vector<ParameterSlot> as = {{"norm", a.data(), grad.data(), 1, 50, false, false}};
  std::vector<ParameterSlot> bs = {{"norm", b.data(), grad.data(), 1, 50, false, false}};
  auto normuon = make_normuon(as, NorMuonSettings{});
  auto adamw = make_adamw(bs, AdamWSettings{});
  for (int step = 0; step < 3; ++step) {
    normuon->step(as, OptimizerStep{step, 1e-2, 0.1});
    adamw->step(bs, OptimizerStep{step, 1e-2, 0.1});
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]);
}

TEST(NorMuon, CautiousWeightDecayOnlyShrinksWeightsTheUpdateAlreadyShrinks) {
  // Zero gradient => zero update: cautious decay leaves weights alone, plain decay shrinks them.
  const int rows = 8, cols = 8;
  std::vector<float> cautious = normal_values(rows * cols, 6), plain = cautious, original = cautious;
  std::vector<float> zero(rows * cols, 0.0f);
  std::vector<ParameterSlot> cs = {{"w", cautious.data(), zero.data(), rows, cols, true, true}};
  std::vector<ParameterSlot> ps = {{"w", plain.data(), zero.data(), rows, cols, true, true}};
  NorMuonSettings plain_settings;
  plain_settings.cautious_weight_decay = false;
  make_normuon(cs, NorMuonSettings{})->step(cs, OptimizerStep{0, 0.1, 0.5});
  make_normuon(ps, plain_settings)->step(ps, OptimizerStep{0, 0.1, 0.5});
  for (int i = 0; i < rows * cols; ++i) {
    EXPECT_FLOAT_EQ(cautious[i], original[i]);
    EXPECT_NEAR(plain[i], original[i] * 0.95f, 1e-6);
  }
}

// Saving the state and loading it into a fresh optimizer must continue exactly as the original.
TEST(Optimizers, RestoredStateContinuesBitIdentically) {
  for (const char* which : {"adamw", "adamw_8bit", "normuon"}) {
    const int rows = 12, cols = 10;
    std::vector<float> p1 = normal_values(rows * cols, 8), p2;
    std::vector<float> grad(rows * cols);
    auto make = [&](std::vector<ParameterSlot>& slots) {
      if (std::string(which) == "adamw") return make_adamw(slots, AdamWSettings{});
      if (std::string(which) == "adamw_8bit") return make_adamw_8bit(slots, AdamWSettings{});
      return make_normuon(slots, NorMuonSettings{});
    };
    std::vector<ParameterSlot> s1 = {{"w", p1.data(), grad.data(), rows, cols, true, true}};
    auto original = make(s1);
    for (int step = 0; step < 3; ++step) {
      grad = normal_values(rows * cols, 30 + step);
      s1[0].gradient = grad.data();
      original->step(s1, OptimizerStep{step, 1e-2, 0.1});
    }
    p2 = p1;
    std::vector<ParameterSlot> s2 = {{"w", p2.data(), grad.data(), rows, cols, true, true}};
    auto restored = make(s2);
    auto from = original->state_tensors();
    auto to = restored->state_tensors();
    ASSERT_EQ(from.size(), to.size());
    for (size_t i = 0; i < from.size(); ++i) {
      ASSERT_EQ(from[i].name, to[i].name);
      ASSERT_EQ(from[i].size_bytes, to[i].size_bytes);
      std::memcpy(to[i].data, from[i].data, from[i].size_bytes);
    }
    grad = normal_values(rows * cols, 99);
    s1[0].gradient = grad.data();
    s2[0].gradient = grad.data();
    original->step(s1, OptimizerStep{3, 1e-2, 0.1});
    restored->step(s2, OptimizerStep{3, 1e-2, 0.1});
    EXPECT_EQ(std::memcmp(p1.data(), p2.data(), p1.size() * sizeof(float)), 0) << which;
  }
}

}  // namespace
}  // namespace surogate::train
