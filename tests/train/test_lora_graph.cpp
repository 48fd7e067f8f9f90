// The LoRA graph rewrite (models/lora.h) on a tiny Llama: only adapters get gradients, the
// adapter gradients (through dropout) match finite differences, recompute reproduces them
// bit for bit, B = 0 leaves the base model's loss unchanged, and merging (models/adapter_io.h)
// gives the same loss as the adapter graph. Batching the low-rank products of adapters that read
// the same input (batch_shared_inputs: q/k/v, gate/up) changes neither loss nor gradients beyond
// fp32 summation order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "compiler/execution_plan.h"
#include "io/model_config.h"
#include "models/adapter_io.h"
#include "models/decoder_graph.h"
#include "models/lora.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"

namespace surogate::train {
namespace {

constexpr int64_t kBatch = 2, kSequence = 6;

io::ModelConfig tiny_llama() {
  return io::parse_model_config(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 11,
      "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
      "tie_word_embeddings": true, "attention_bias": true, "hidden_act": "silu"})",
                                "test config.json");
}

models::LoraOptions options(double dropout) {
  models::LoraOptions lora;
  lora.rank = 3;
  lora.alpha = 6.0;
  lora.dropout = dropout;
  lora.target_modules = {"q_proj", "v_proj", "o_proj", "down_proj"};
  return lora;
}

// One compiled graph (training, or forward-only) with seeded weights: base normal(0, 0.3),
// adapters normal(0, 0.3) (B nonzero, so A gets a gradient) unless `zero_b`.
struct Model {
  io::ModelConfig config = tiny_llama();
  graph::OpRegistry registry = ops::make_model_registry();
  compiler::ExecutionPlan plan;
  runtime::CpuBackend backend;
  std::vector<models::LoraAdapter> adapters;
  std::vector<int32_t> ids{1, 4, 7, 2, 9, 3, 5, 6, 8, 10, 0, 0}, positions{0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 0, 0},
      documents{0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 9, 9}, targets{4, 7, -100, 9, 3, -100, 6, 8, 10, -100, -100, -100};
  float scale = 0.1f;
  int32_t seed = 12345;

  Model(std::optional<models::LoraOptions> lora, bool training, compiler::RecomputePolicy policy, bool zero_b = false) {
    models::DecoderGraph decoder = models::build_decoder_graph(config, registry, {kBatch, kSequence, 1, false});
    graph::Graph forward = std::move(decoder.graph);
    if (lora) {
      adapters = models::lora_adapters(config, *lora);
      forward = models::apply_lora(forward, registry, adapters, *lora, training);
    }
    plan = training ? compiler::compile_training(std::move(forward), decoder.loss, registry, {policy, 256})
                    : compiler::compile_forward(std::move(forward), registry);
    backend.load(plan, registry);
    std::mt19937 generator(7);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    for (const auto& spec : models::parameter_specs(config)) {
      for (float& value : backend.view<float>(plan.tensor(spec.name))) value = normal(generator);
    }
    for (const auto& adapter : adapters) {
      for (float& value : backend.view<float>(plan.tensor(adapter.a.name))) value = normal(generator);
      for (float& value : backend.view<float>(plan.tensor(adapter.b.name))) value = zero_b ? 0.0f : normal(generator);
    }
  }

  double loss() {
    auto bytes = [](const auto& values) { return std::as_bytes(std::span(values)); };
    std::vector<runtime::InputBinding> inputs{{plan.tensor("input_ids"), bytes(ids)},
                                              {plan.tensor("position_ids"), bytes(positions)},
                                              {plan.tensor("document_ids"), bytes(documents)},
                                              {plan.tensor("targets"), bytes(targets)},
                                              {plan.tensor("loss_scale"), std::as_bytes(std::span(&scale, 1))}};
    if (auto id = plan.graph.find_tensor(models::kDropoutSeed)) inputs.push_back({*id, std::as_bytes(std::span(&seed, 1))});
    if (!plan.parameter_gradients.empty()) backend.zero_gradients();
    backend.execute(inputs);
    return backend.view<float>(plan.graph.outputs.front())[0];
  }
};

TEST(LoraGraph, OnlyAdaptersAreTrainable) {
  Model model(options(0.0), true, compiler::RecomputePolicy::none());
  EXPECT_EQ(model.adapters.size(), 8u);  // 2 layers × 4 targets
  EXPECT_EQ(model.plan.parameter_gradients.size(), 16u);
  for (const auto& spec : models::parameter_specs(model.config)) {
    EXPECT_FALSE(model.plan.parameter_gradients.contains(model.plan.tensor(spec.name))) << spec.name;
  }
  EXPECT_EQ(model.adapters[0].a.hf_name, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(model.adapters[0].a.shape, (graph::Shape{3, 16}));
  EXPECT_EQ(model.adapters[0].b.shape, (graph::Shape{16, 3}));
}

TEST(LoraGraph, AdapterGradientsThroughDropoutMatchFiniteDifferences) {
  Model model(options(0.3), true, compiler::RecomputePolicy::none());
  model.loss();
  for (const auto& adapter : model.adapters) {
    for (const auto* matrix : {&adapter.a, &adapter.b}) {
      graph::TensorId id = model.plan.tensor(matrix->name);
      auto view = model.backend.view<float>(model.plan.parameter_gradients.at(id));
      std::vector<float> gradient(view.begin(), view.end());
      std::span<float> weight = model.backend.view<float>(id);
      for (size_t index : {size_t{0}, weight.size() / 2, weight.size() - 1}) {
        const float original = weight[index], step = 1e-2f;
        weight[index] = original + step;
        double plus = model.loss();
        weight[index] = original - step;
        double minus = model.loss();
        weight[index] = original;
        double numeric = (plus - minus) / (2.0 * step);
        // Same float32 central-difference tolerance as test_model_ops.cpp.
        EXPECT_NEAR(gradient[index], numeric, 2e-3 + 3e-2 * std::abs(numeric)) << matrix->name << "[" << index << "]";
      }
    }
  }
}

TEST(LoraGraph, RecomputeGivesIdenticalAdapterGradients) {
  Model saved(options(0.3), true, compiler::RecomputePolicy::none());
  Model recomputed(options(0.3), true, compiler::RecomputePolicy::all());
  EXPECT_GT(recomputed.plan.recomputed_nodes, 0u);
  EXPECT_EQ(saved.loss(), recomputed.loss());
  for (const auto& adapter : saved.adapters) {
    auto a = saved.backend.view<float>(saved.plan.parameter_gradients.at(saved.plan.tensor(adapter.a.name)));
    auto b = recomputed.backend.view<float>(recomputed.plan.parameter_gradients.at(recomputed.plan.tensor(adapter.a.name)));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0) << adapter.a.name;
  }
}

models::LoraOptions all_linear(bool batch_shared_inputs, double dropout = 0.0) {
  models::LoraOptions lora = options(dropout);
  lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  lora.batch_shared_inputs = batch_shared_inputs;
  return lora;
}

int count_ops(const graph::Graph& graph, const std::string& op) {
  return static_cast<int>(std::count_if(graph.nodes.begin(), graph.nodes.end(),
                                        [&](const graph::Node& node) { return node.op == op; }));
}

// q/k/v read the first norm's output and gate/up the second's: one concat, product and split per
// group and layer. fp32 tolerances: the batched product sums in another order (BLAS blocking), so
// the loss agrees to 1e-6 relative and every adapter gradient to 1e-5 of its largest entry; a
// wrong piece (an adapter reading another's columns) or a missing gradient path is off by order 1.
void expect_same_loss_and_adapter_gradients(Model& separate, Model& batched) {
  const double expected = separate.loss(), actual = batched.loss();
  EXPECT_NEAR(actual, expected, 1e-6 * std::abs(expected));
  for (const auto& adapter : separate.adapters) {
    for (const auto* matrix : {&adapter.a, &adapter.b}) {
      auto want = separate.backend.view<float>(separate.plan.parameter_gradients.at(separate.plan.tensor(matrix->name)));
      auto got = batched.backend.view<float>(batched.plan.parameter_gradients.at(batched.plan.tensor(matrix->name)));
      ASSERT_EQ(want.size(), got.size());
      float largest = 0.0f, worst = 0.0f;
      for (size_t i = 0; i < want.size(); ++i) {
        largest = std::max(largest, std::abs(want[i]));
        worst = std::max(worst, std::abs(want[i] - got[i]));
      }
      EXPECT_GT(largest, 0.0f) << matrix->name;
      EXPECT_LE(worst, 1e-5f * largest) << matrix->name;
    }
  }
}

TEST(LoraGraph, SharedInputAdaptersGiveTheSameLossAndGradients) {
  Model separate(all_linear(false), true, compiler::RecomputePolicy::none());
  Model batched(all_linear(true), true, compiler::RecomputePolicy::none());
  EXPECT_EQ(count_ops(separate.plan.graph, "concat"), 0);
  EXPECT_EQ(count_ops(batched.plan.graph, "concat"), 2 * 2 + 2 * 2);  // forward A and backward d_down, 2 groups × 2 layers
  EXPECT_EQ(count_ops(batched.plan.graph, "split"), 2 * 2 + 2 * 2);
  expect_same_loss_and_adapter_gradients(separate, batched);
}

// Dropout draws one mask per distinct adapter input (q/k/v share the first norm's, gate/up the
// second's), so batching stays on under dropout and gives the separate products' loss and
// gradients; the forward has one dropout per input: 4 per layer (ln1, attention output, ln2, SwiGLU).
TEST(LoraGraph, AdaptersOnOneInputShareOneDropoutMaskAndStayBatched) {
  Model separate(all_linear(false, 0.3), true, compiler::RecomputePolicy::none());
  Model batched(all_linear(true, 0.3), true, compiler::RecomputePolicy::none());
  auto forward_dropouts = [](const graph::Graph& graph) {
    return std::count_if(graph.nodes.begin(), graph.nodes.end(), [](const graph::Node& node) {
      return node.op == "dropout" && node.phase == graph::NodePhase::Forward;
    });
  };
  EXPECT_EQ(forward_dropouts(separate.plan.graph), 4 * 2);
  EXPECT_EQ(forward_dropouts(batched.plan.graph), 4 * 2);
  EXPECT_EQ(count_ops(batched.plan.graph, "concat"), 2 * 2 + 2 * 2);
  expect_same_loss_and_adapter_gradients(separate, batched);
}

TEST(LoraGraph, SharedInputAdaptersRecomputeBitForBit) {
  Model saved(all_linear(true), true, compiler::RecomputePolicy::none());
  Model recomputed(all_linear(true), true, compiler::RecomputePolicy::all());
  EXPECT_GT(recomputed.plan.recomputed_nodes, 0u);
  EXPECT_EQ(saved.loss(), recomputed.loss());
  for (const auto& adapter : saved.adapters) {
    auto a = saved.backend.view<float>(saved.plan.parameter_gradients.at(saved.plan.tensor(adapter.a.name)));
    auto b = recomputed.backend.view<float>(recomputed.plan.parameter_gradients.at(recomputed.plan.tensor(adapter.a.name)));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0) << adapter.a.name;
  }
}

TEST(LoraGraph, ZeroBLeavesTheBaseModelUnchanged) {
  Model base(std::nullopt, false, compiler::RecomputePolicy::none());
  Model adapted(options(0.0), false, compiler::RecomputePolicy::none(), /*zero_b=*/true);
  EXPECT_EQ(base.loss(), adapted.loss());
}

TEST(LoraGraph, MergedWeightsGiveTheAdapterGraphsLoss) {
  Model adapted(options(0.0), false, compiler::RecomputePolicy::none());
  Model merged(std::nullopt, false, compiler::RecomputePolicy::none());
  const auto specs = models::parameter_specs(adapted.config);
  std::vector<std::vector<float>> weights;
  for (const auto& spec : specs) {
    auto view = adapted.backend.view<float>(adapted.plan.tensor(spec.name));
    weights.emplace_back(view.begin(), view.end());
  }
  models::PeftAdapter adapter;
  adapter.scaling = models::lora_scaling(options(0.0));
  for (const auto& entry : adapted.adapters) {
    auto a = adapted.backend.view<float>(adapted.plan.tensor(entry.a.name));
    auto b = adapted.backend.view<float>(adapted.plan.tensor(entry.b.name));
    adapter.matrices.push_back({entry.base, {a.begin(), a.end()}, {b.begin(), b.end()}, 3});
  }
  models::merge_peft_adapter(adapter, specs, weights);
  for (size_t i = 0; i < specs.size(); ++i) {
    auto view = merged.backend.view<float>(merged.plan.tensor(specs[i].name));
    std::copy(weights[i].begin(), weights[i].end(), view.begin());
  }
  const double expected = adapted.loss(), actual = merged.loss();
  // fp32: a different summation order (x·(W + sBA) vs x·W + s·(x·A)·B) — relative 1e-5.
  EXPECT_NEAR(actual, expected, 1e-5 * std::abs(expected));
}

// Forward-only 16-bit graphs with fuse_inference_products (generation's decode graphs): each group
// of adapters on one input (q/k/v, gate/up; o and down alone) is one low_rank_products node whose
// outputs are the base products' addends, with no concat, split or rank-r linear left; q/k/v with
// a bias keep the unfused form (their base nodes have no addend); a training graph is unchanged.
TEST(LoraGraph, ForwardOnlyGraphsFuseEachInputsAdapters) {
  auto build = [](bool qkv_bias, bool batch, bool training) {
    io::ModelConfig config = tiny_llama();
    config.qkv_bias = qkv_bias;
    config.o_proj_bias = false;
    graph::OpRegistry registry = ops::make_model_registry();
    models::DecoderGraphOptions shape{kBatch, kSequence, 1, false};
    shape.dtype = DType::BF16;
    graph::Graph forward = models::build_decoder_graph(config, registry, shape).graph;
    models::LoraOptions lora = all_linear(batch);
    lora.fuse_inference_products = true;
    return models::apply_lora(forward, registry, models::lora_adapters(config, lora), lora, training);
  };
  const graph::Graph batched = build(false, true, false), separate = build(false, false, false);
  EXPECT_EQ(count_ops(batched, "low_rank_products"), 4 * 2);  // q/k/v, o, gate/up, down × 2 layers
  EXPECT_EQ(count_ops(separate, "low_rank_products"), 7 * 2);
  for (const graph::Graph* graph : {&batched, &separate}) {
    EXPECT_EQ(count_ops(*graph, "concat"), 0);
    EXPECT_EQ(count_ops(*graph, "split"), 0);
    EXPECT_EQ(count_ops(*graph, "linear_add"), 7 * 2);
    for (const graph::Node& node : graph->nodes) {
      if (node.op != "linear_add") continue;
      const graph::NodeId producer = graph->tensor(node.inputs[2]).producer;
      ASSERT_NE(producer, graph::kNoNode) << node.name;
      EXPECT_EQ(graph->nodes[producer].op, "low_rank_products") << node.name;
    }
  }
  const graph::Graph biased = build(true, true, false);
  EXPECT_EQ(count_ops(biased, "low_rank_products"), 3 * 2);  // o, gate/up, down; q/k/v keep their biases
  EXPECT_EQ(count_ops(build(false, true, true), "low_rank_products"), 0);
}

}  // namespace
}  // namespace surogate::train
