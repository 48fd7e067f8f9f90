// The decoder graph's gradients (every model op's gradient rule and CPU binder wired through
// autodiff) against central finite differences of its own loss, for Llama with biases, GQA and
// tied embeddings and for Qwen3 (q/k norm); and gradients identical under every recompute policy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "compiler/execution_plan.h"
#include "io/model_config.h"
#include "models/model_spec.h"
#include "runtime/cpu_backend.h"
#include "models/decoder_graph.h"
#include "ops/defs/register_ops.h"

namespace surogate::train {
namespace {

constexpr int64_t kBatch = 2, kSequence = 6;

io::ModelConfig tiny_config(bool qwen3) {
  std::string json = qwen3 ? R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 11,
      "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 32, "rms_norm_eps": 1e-6,
      "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu"})"
                           : R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 11,
      "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
      "tie_word_embeddings": true, "attention_bias": true, "mlp_bias": true, "hidden_act": "silu"})";
  return io::parse_model_config(json, "test config.json");
}

struct Harness {
  graph::OpRegistry registry = ops::make_model_registry();
  compiler::ExecutionPlan plan;
  runtime::CpuBackend backend;
  std::vector<int32_t> ids, positions, documents, targets;
  float scale = 0.1f;

  Harness(const io::ModelConfig& config, compiler::RecomputePolicy policy) {
    models::DecoderGraph decoder = models::build_decoder_graph(config, registry, {kBatch, kSequence, 2, false});
    plan = compiler::compile_training(std::move(decoder.graph), decoder.loss, registry, {policy, 256});
    backend.load(plan, registry);
    std::mt19937 generator(7);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    for (const auto& spec : models::parameter_specs(config)) {
      for (float& value : backend.view<float>(plan.tensor(spec.name))) value = normal(generator);
    }
    // Row 0: two documents (3 + 3 tokens); row 1: one document of 4 and 2 padding tokens.
    ids = {1, 4, 7, 2, 9, 3, 5, 6, 8, 10, 0, 0};
    positions = {0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 0, 0};
    documents = {0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 9, 9};
    targets = {4, 7, -100, 9, 3, -100, 6, 8, 10, -100, -100, -100};
  }

  double loss() {
    auto bytes = [](const auto& values) { return std::as_bytes(std::span(values)); };
    std::vector<runtime::InputBinding> inputs{{plan.tensor("input_ids"), bytes(ids)},
                                              {plan.tensor("position_ids"), bytes(positions)},
                                              {plan.tensor("document_ids"), bytes(documents)},
                                              {plan.tensor("targets"), bytes(targets)},
                                              {plan.tensor("loss_scale"), std::as_bytes(std::span(&scale, 1))}};
    backend.zero_gradients();
    backend.execute(inputs);
    return backend.view<float>(plan.loss)[0];
  }
};

void check_gradients(bool qwen3) {
  io::ModelConfig config = tiny_config(qwen3);
  Harness harness(config, compiler::RecomputePolicy::none());
  harness.loss();
  for (const auto& spec : models::parameter_specs(config)) {
    graph::TensorId id = harness.plan.tensor(spec.name);
    std::vector<float> gradient(harness.backend.view<float>(harness.plan.parameter_gradients.at(id)).begin(),
                                harness.backend.view<float>(harness.plan.parameter_gradients.at(id)).end());
    std::span<float> weight = harness.backend.view<float>(id);
    for (size_t index : {size_t{0}, weight.size() / 2, weight.size() - 1}) {
      const float original = weight[index], step = 1e-2f;
      weight[index] = original + step;
      double plus = harness.loss();
      weight[index] = original - step;
      double minus = harness.loss();
      weight[index] = original;
      double numeric = (plus - minus) / (2.0 * step);
      // float32 central differences: about 1e-4 absolute noise on a loss of ~0.7.
      EXPECT_NEAR(gradient[index], numeric, 2e-3 + 3e-2 * std::abs(numeric)) << spec.name << "[" << index << "]";
    }
  }
}

TEST(ModelOps, LlamaGradientsMatchFiniteDifferences) { check_gradients(false); }
TEST(ModelOps, Qwen3GradientsMatchFiniteDifferences) { check_gradients(true); }

TEST(ModelOps, RecomputePoliciesGiveIdenticalGradients) {
  io::ModelConfig config = tiny_config(false);
  Harness saved(config, compiler::RecomputePolicy::none());
  Harness recomputed(config, compiler::RecomputePolicy::all());
  EXPECT_GT(recomputed.plan.recomputed_nodes, 0u);
  EXPECT_EQ(saved.loss(), recomputed.loss());
  for (const auto& spec : models::parameter_specs(config)) {
    auto a = saved.backend.view<float>(saved.plan.parameter_gradients.at(saved.plan.tensor(spec.name)));
    auto b = recomputed.backend.view<float>(recomputed.plan.parameter_gradients.at(recomputed.plan.tensor(spec.name)));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0) << spec.name;
  }
}

}  // namespace
}  // namespace surogate::train
