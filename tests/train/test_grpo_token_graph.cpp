// GRPO's per-token loss graph (train/objective/grpo_token_graph.h) on a tiny Llama at temperature
// 0.7 (grpo_graph.h's scale before the head): its grpo_token_logps output holds each scored token's
// log-probability — the negated loss of the LM-head cross-entropy graph scoring that token alone —,
// with coefficients −1 its gradients are the cross-entropy graph's over all tokens, and with any
// coefficients they match finite differences of Σ c_t·logp_t.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

#include "compiler/execution_plan.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "train/objective/grpo_graph.h"
#include "train/objective/grpo_token_graph.h"

namespace surogate::train {
namespace {

constexpr int64_t kRows = 2, kSequence = 6, kWidth = 4;
constexpr double kTemperature = 0.7;

io::ModelConfig grpo_tiny_llama() {
  return io::parse_model_config(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 11,
      "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 4,
      "num_key_value_heads": 2, "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
      "tie_word_embeddings": false, "hidden_act": "silu"})",
                                "test config.json");
}

// The decoder at the temperature, with the LM-head cross-entropy (`token_loss` false) or the
// per-token graph as its loss; seeded weights (the same for both).
struct GrpoGraphModel {
  io::ModelConfig config = grpo_tiny_llama();
  graph::OpRegistry registry = ops::make_model_registry();
  compiler::ExecutionPlan plan;
  runtime::CpuBackend backend;
  std::vector<int32_t> ids{1, 4, 7, 2, 9, 3, 5, 6, 8, 10, 0, 0}, positions{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 0, 0},
      documents{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 9, 9}, targets{4, 7, -100, 9, 3, -100, 6, 8, 10, -100, -100, -100};
  // The position predicting row r's scored token t holds r·kWidth + t.
  std::vector<int32_t> token_ids{0, 1, -1, 2, 3, -1, 4, 5, 6, -1, -1, -1};
  std::vector<float> coefficients = std::vector<float>(kRows * kWidth, 0.0f);
  float scale = 1.0f;

  explicit GrpoGraphModel(bool token_loss) {
    models::DecoderGraph decoder = models::build_decoder_graph(config, registry, {kRows, kSequence, 1, false});
    graph::Graph forward = apply_grpo_temperature(std::move(decoder.graph), decoder.loss, kTemperature);
    graph::TensorId loss = decoder.loss;
    if (token_loss) {
      ObjectiveGraph rewritten = apply_grpo_token_loss(std::move(forward), loss, registry, kRows, kSequence, kWidth);
      forward = std::move(rewritten.graph);
      loss = rewritten.loss;
    }
    plan = compiler::compile_training(std::move(forward), loss, registry, {compiler::RecomputePolicy::none(), 256});
    backend.load(plan, registry);
    std::mt19937 generator(11);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (const auto& spec : models::parameter_specs(config)) {
      for (float& value : backend.view<float>(plan.tensor(spec.name))) value = normal(generator);
    }
  }

  double run() {
    auto bytes = [](const auto& values) { return std::as_bytes(std::span(values)); };
    std::vector<runtime::InputBinding> inputs{{plan.tensor("input_ids"), bytes(ids)},
                                              {plan.tensor("position_ids"), bytes(positions)},
                                              {plan.tensor("document_ids"), bytes(documents)},
                                              {plan.tensor("targets"), bytes(targets)}};
    if (auto id = plan.graph.find_tensor("loss_scale")) inputs.push_back({*id, std::as_bytes(std::span(&scale, 1))});
    if (auto id = plan.graph.find_tensor(kGrpoTokenIds)) inputs.push_back({*id, bytes(token_ids)});
    if (auto id = plan.graph.find_tensor(kGrpoTokenCoefficients)) inputs.push_back({*id, bytes(coefficients)});
    backend.zero_gradients();
    backend.execute(inputs);
    return backend.view<float>(plan.tensor("loss"))[0];
  }

  std::vector<float> gradient(const std::string& parameter) {
    auto view = backend.view<float>(plan.parameter_gradients.at(plan.tensor(parameter)));
    return {view.begin(), view.end()};
  }
};

TEST(GrpoTokenGraph, EachTokensLogProbabilityIsTheCrossEntropyOfThatTokenNegated) {
  GrpoGraphModel tokens(true);
  tokens.run();
  const std::span<const float> logps = tokens.backend.view<float>(tokens.plan.tensor(kGrpoTokenLogps));
  ASSERT_EQ(logps.size(), static_cast<size_t>(kRows * kWidth));
  GrpoGraphModel single(false);
  const std::vector<int32_t> all = single.targets;
  for (size_t n = 0; n < all.size(); ++n) {
    if (all[n] == -100) continue;
    for (size_t m = 0; m < all.size(); ++m) single.targets[m] = m == n ? all[m] : -100;
    const double logp = -single.run();  // scale 1: the loss is −logp of token n
    const int32_t id = tokens.token_ids[n];
    ASSERT_GE(id, 0);
    EXPECT_NEAR(logps[static_cast<size_t>(id)], logp, 1e-5 * std::abs(logp) + 1e-7) << "position " << n;
  }
  EXPECT_EQ(logps[7], 0.0f);  // row 1 has three scored tokens: its fourth slot holds nothing
}

TEST(GrpoTokenGraph, CoefficientsOfMinusOneGiveTheCrossEntropyGradient) {
  GrpoGraphModel tokens(true), entropy(false);
  std::fill(tokens.coefficients.begin(), tokens.coefficients.end(), -1.0f);
  const double loss = tokens.run();
  EXPECT_NEAR(loss, entropy.run(), 1e-5 * std::abs(loss));
  for (const auto& spec : models::parameter_specs(tokens.config)) {
    const std::vector<float> ours = tokens.gradient(spec.name), theirs = entropy.gradient(spec.name);
    double largest = 1e-12, difference = 0.0;
    for (size_t i = 0; i < ours.size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(theirs[i])));
      difference = std::max(difference, std::abs(static_cast<double>(ours[i]) - theirs[i]));
    }
    EXPECT_LE(difference / largest, 1e-5) << spec.name;
  }
}

TEST(GrpoTokenGraph, GradientsOfWeighedLogProbabilitiesMatchFiniteDifferences) {
  GrpoGraphModel model(true);
  model.coefficients = {0.3f, -1.2f, 0.7f, 0.05f, -0.4f, 0.9f, -0.6f, 2.0f};  // the last one has no token
  model.run();
  for (const char* name : {"lm_head.weight", "layers.0.mlp.down_proj.weight", "embed.weight"}) {
    const std::vector<float> gradient = model.gradient(name);
    std::span<float> weight = model.backend.view<float>(model.plan.tensor(name));
    for (size_t index : {size_t{0}, weight.size() / 3, weight.size() - 1}) {
      const float original = weight[index], step = 1e-2f;
      weight[index] = original + step;
      const double plus = model.run();
      weight[index] = original - step;
      const double minus = model.run();
      weight[index] = original;
      const double numeric = (plus - minus) / (2.0 * step);
      // The float32 central-difference tolerance of test_lora_graph.cpp.
      EXPECT_NEAR(gradient[index], numeric, 2e-3 + 3e-2 * std::abs(numeric)) << name << "[" << index << "]";
    }
  }
}

}  // namespace
}  // namespace surogate::train
