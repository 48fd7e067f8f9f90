// The memory-driven recompute choice (compiler/recompute_choice.h) on a real decoder: keeping the
// matmul and attention outputs leaves only cheap ops in the recompute phase and gradients
// bit-identical; the choice recomputes nothing when everything fits, keeps every layer's
// expensive outputs when that fits and every output of as many layers as fit beside them, the
// literal options when only they fit, the largest fitting layer count in between, attention's
// outputs alone in as many more layers as the last tiers leave room for, and `recommended` allows
// every group.
#include <gtest/gtest.h>

#include <cstring>

#include <fmt/format.h>

#include "compiler/recompute_choice.h"
#include "compiler/recompute_cost.h"
#include "models/decoder_graph.h"
#include "models/fp8_recipe.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "fixture_util.h"

namespace surogate::models {
namespace {

constexpr const char* kFixture = "qwen3_qknorm";

struct Decoder {
  testing::Fixture fixture = testing::open_fixture(kFixture);
  graph::OpRegistry registry = ops::make_model_registry();
  DecoderGraph decoder =
      build_decoder_graph(fixture.config, registry, {.batch = fixture.batch, .sequence = fixture.sequence});
  int64_t layers() const { return fixture.config.num_hidden_layers; }
  // The same decoder `count` layers deep, for plans (the fixture's weights cover its own layers).
  void deepen(int64_t count) {
    fixture.config.num_hidden_layers = count;
    decoder = build_decoder_graph(fixture.config, registry, {.batch = fixture.batch, .sequence = fixture.sequence});
  }
};

// Loss, then every parameter gradient, after one training step of `plan`.
std::vector<std::vector<float>> run_step(Decoder& model, const compiler::ExecutionPlan& plan) {
  runtime::CpuBackend backend;
  backend.load(plan, model.registry);
  testing::load_weights(backend, plan, kFixture, model.fixture.config,
                        1.0f / static_cast<float>(model.fixture.scored_tokens()));
  backend.zero_gradients();
  backend.execute(testing::bindings(plan, model.fixture));
  std::vector<std::vector<float>> results;
  auto keep = [&](graph::TensorId id) {
    std::span<float> values = backend.view<float>(id);
    results.emplace_back(values.begin(), values.end());
  };
  keep(plan.loss);
  for (const ParameterSpec& spec : parameter_specs(model.fixture.config)) {
    keep(plan.parameter_gradients.at(plan.tensor(spec.name)));
  }
  return results;
}

// One training step of `want` and of `got`: the same loss and gradients, bit for bit.
void expect_same_step(Decoder& model, const compiler::ExecutionPlan& want_plan, const compiler::ExecutionPlan& got_plan) {
  const auto want = run_step(model, want_plan), got = run_step(model, got_plan);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].size(), got[i].size());
    EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)), 0)
        << "result " << i << " (0 = loss, then gradients) differs";
  }
}

compiler::ExecutionPlan compile(Decoder& model, compiler::RecomputePolicy policy) {
  return compiler::compile_training(model.decoder.graph, model.decoder.loss, model.registry, {.recompute = policy});
}

TEST(RecomputeChoice, KeepingExpensiveOutputsRecomputesOnlyCheapOpsWithTheSameGradients) {
  Decoder model;
  compiler::RecomputePolicy keeping = compiler::RecomputePolicy::all();
  keeping.keep_expensive_layers = model.layers();
  const compiler::ExecutionPlan saved = compile(model, compiler::RecomputePolicy::none());
  const compiler::ExecutionPlan cheap = compile(model, keeping);
  const compiler::ExecutionPlan literal = compile(model, compiler::RecomputePolicy::all());
  int expensive_recomputed = 0;
  for (const graph::Node& node : cheap.graph.nodes) {
    if (node.phase == graph::NodePhase::Recompute && compiler::is_expensive_to_recompute(node.op)) ++expensive_recomputed;
  }
  EXPECT_EQ(expensive_recomputed, 0);
  EXPECT_GT(cheap.recomputed_nodes, 0u);
  EXPECT_LT(cheap.recomputed_nodes, literal.recomputed_nodes);
  EXPECT_LE(literal.memory.peak_live_bytes, cheap.memory.peak_live_bytes);
  EXPECT_LT(cheap.memory.peak_live_bytes, saved.memory.peak_live_bytes);
  expect_same_step(model, saved, cheap);
}

// fp8_hybrid's products (linear_fp8) are matmuls too: keeping every layer's expensive outputs
// leaves none of them to the recompute phase, as in bf16 (they were counted as cheap once, so a
// plan that said "matmul outputs kept" recomputed every FP8 matmul).
TEST(RecomputeChoice, KeepingExpensiveOutputsKeepsTheFp8Matmuls) {
  Decoder model;
  Fp8Options options{.layers = model.layers(), .amax_history = 4};
  const graph::Graph forward = apply_fp8_recipe(model.decoder.graph, model.registry, options);
  compiler::RecomputePolicy keeping = compiler::RecomputePolicy::all();
  keeping.keep_expensive_layers = model.layers();
  const compiler::ExecutionPlan cheap =
      compiler::compile_training(forward, model.decoder.loss, model.registry, {.recompute = keeping});
  int fp8_matmuls = 0, recomputed = 0;
  for (const graph::Node& node : cheap.graph.nodes) {
    fp8_matmuls += node.op == "linear_fp8";
    recomputed += node.phase == graph::NodePhase::Recompute && compiler::is_expensive_to_recompute(node.op);
  }
  EXPECT_GT(fp8_matmuls, 0);
  EXPECT_EQ(recomputed, 0);
  EXPECT_TRUE(compiler::is_expensive_to_recompute("linear_fp8"));
  EXPECT_GT(cheap.recomputed_nodes, 0u);
}

// keep_all_layers: the kept layers re-run nothing, the others only their cheap ops, and the
// gradients are those of the plan that keeps everything, bit for bit.
TEST(RecomputeChoice, KeepingEveryOutputOfALayerReRunsNothingOfIt) {
  Decoder model;
  ASSERT_GE(model.layers(), 2);
  compiler::RecomputePolicy partly = compiler::RecomputePolicy::all();
  partly.keep_expensive_layers = model.layers();
  partly.keep_all_layers = 1;
  compiler::RecomputePolicy cheap = partly;
  cheap.keep_all_layers = 0;
  const compiler::ExecutionPlan saved = compile(model, compiler::RecomputePolicy::none());
  const compiler::ExecutionPlan plan = compile(model, partly);
  int in_kept_layer = 0, in_other_layers = 0;
  for (const graph::Node& node : plan.graph.nodes) {
    if (node.phase != graph::NodePhase::Recompute) continue;
    (compiler::layer_of(node) == 0 ? in_kept_layer : in_other_layers) += 1;
    EXPECT_FALSE(compiler::is_expensive_to_recompute(node.op)) << node.name;
  }
  EXPECT_EQ(in_kept_layer, 0);
  EXPECT_GT(in_other_layers, 0);
  EXPECT_LT(plan.recomputed_nodes, compile(model, cheap).recomputed_nodes);
  expect_same_step(model, saved, plan);
}

// Memory between the plan that re-runs every layer's cheap ops and the one that keeps everything:
// the choice keeps every output of the largest number of layers that fits (one more would not).
TEST(RecomputeChoice, KeepsEveryOutputOfAsManyLayersAsFit) {
  Decoder model;
  constexpr int64_t kLayers = 8;
  model.deepen(kLayers);
  auto arena_of = [&](int64_t kept) {
    compiler::RecomputePolicy policy = compiler::RecomputePolicy::all();
    policy.keep_expensive_layers = kLayers;
    policy.keep_all_layers = kept;
    return compile(model, policy).memory.arena_bytes;
  };
  const size_t cheap_everywhere = arena_of(0), saved = compile(model, compiler::RecomputePolicy::none()).memory.arena_bytes;
  ASSERT_LT(cheap_everywhere, saved);
  const size_t limit = arena_of(kLayers / 2);
  ASSERT_LT(limit, saved);
  ASSERT_LT(cheap_everywhere, limit);
  compiler::RecomputeChoice choice;
  const compiler::CompileOptions options{.recompute = compiler::RecomputePolicy::all()};
  const compiler::ExecutionPlan plan = compiler::compile_training_to_fit(
      model.decoder.graph, model.decoder.loss, model.registry, options, kLayers, false,
      [limit](const compiler::ExecutionPlan& candidate) { return candidate.memory.arena_bytes <= limit; }, &choice);
  EXPECT_TRUE(choice.fits);
  EXPECT_EQ(choice.policy.keep_expensive_layers, kLayers);
  EXPECT_GE(choice.policy.keep_all_layers, kLayers / 2);
  EXPECT_LT(choice.policy.keep_all_layers, kLayers);
  EXPECT_LE(plan.memory.arena_bytes, limit);
  EXPECT_GT(arena_of(choice.policy.keep_all_layers + 1), limit);
  EXPECT_NE(choice.summary.find(fmt::format("every activation kept in the other {}", choice.policy.keep_all_layers)),
            std::string::npos) << choice.summary;
}

// keep_attention_layers: under the literal plan and under "only each block's input", the layers
// that keep attention's outputs re-run their products and norms (attention's inputs) but not
// attention; the others re-run attention too; the gradients are those of the plan that keeps
// everything, bit for bit.
TEST(RecomputeChoice, KeepingAttentionsOutputsReRunsItsInputsButNotAttention) {
  Decoder model;
  ASSERT_GE(model.layers(), 2);
  const compiler::ExecutionPlan saved = compile(model, compiler::RecomputePolicy::none());
  for (const bool inputs_only : {false, true}) {
    compiler::RecomputePolicy policy = compiler::RecomputePolicy::all();
    policy.block_inputs_only = inputs_only;
    const compiler::ExecutionPlan everything = compile(model, policy);
    policy.keep_attention_layers = 1;
    const compiler::ExecutionPlan plan = compile(model, policy);
    int attention_in_kept = 0, attention_in_others = 0, products_in_kept = 0;
    for (const graph::Node& node : plan.graph.nodes) {
      if (node.phase != graph::NodePhase::Recompute) continue;
      const bool kept_layer = compiler::layer_of(node) == 0;
      if (compiler::is_attention(node.op)) (kept_layer ? attention_in_kept : attention_in_others) += 1;
      if (kept_layer && compiler::is_expensive_to_recompute(node.op) && !compiler::is_attention(node.op)) {
        ++products_in_kept;
      }
    }
    EXPECT_EQ(attention_in_kept, 0) << "inputs_only " << inputs_only;
    EXPECT_EQ(attention_in_others, model.layers() - 1) << "inputs_only " << inputs_only;
    EXPECT_GT(products_in_kept, 0) << "the products that give attention its inputs still re-run";
    EXPECT_LT(plan.recomputed_nodes, everything.recomputed_nodes);
    EXPECT_GT(plan.memory.peak_live_bytes, everything.memory.peak_live_bytes) << "the kept outputs take memory";
    expect_same_step(model, saved, plan);
  }
}

// What the last tiers leave goes to attention's outputs: with room for "only each block's input"
// and attention's outputs of some layers, the choice keeps them in the largest number of layers
// that fits; between the literal plan's tiers, the layers past those keeping every expensive
// output keep attention's outputs as far as memory allows.
TEST(RecomputeChoice, SpendsWhatTheLastTiersLeaveOnAttentionsOutputs) {
  Decoder model;
  constexpr int64_t kLayers = 32;
  model.deepen(kLayers);
  const compiler::CompileOptions options{.recompute = compiler::RecomputePolicy::all()};
  auto peak_of = [&](compiler::RecomputePolicy policy) { return compile(model, policy).memory.peak_live_bytes; };
  auto under = [](size_t limit) {
    return [limit](const compiler::ExecutionPlan& plan) { return plan.memory.peak_live_bytes <= limit; };
  };
  compiler::RecomputePolicy deeper = compiler::RecomputePolicy::all();
  deeper.block_inputs_only = true;
  auto deeper_keeping = [&](int64_t layers) {
    compiler::RecomputePolicy policy = deeper;
    policy.keep_attention_layers = layers;
    return peak_of(policy);
  };
  const size_t limit = deeper_keeping(kLayers / 4);
  ASSERT_LT(deeper_keeping(0), limit);
  ASSERT_LT(limit, peak_of(compiler::RecomputePolicy::all())) << "the literal plan must not fit";
  compiler::RecomputeChoice choice;
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, options, kLayers, false,
                                    under(limit), &choice);
  EXPECT_TRUE(choice.fits);
  EXPECT_TRUE(choice.policy.block_inputs_only);
  EXPECT_GE(choice.policy.keep_attention_layers, kLayers / 4);
  ASSERT_LT(choice.policy.keep_attention_layers, kLayers);
  EXPECT_GT(deeper_keeping(choice.policy.keep_attention_layers + 1), limit) << "one more layer would have fit";
  EXPECT_NE(choice.summary.find("only each block's input is kept; attention's outputs kept in " +
                                std::to_string(choice.policy.keep_attention_layers) + " of the 32 layers"),
            std::string::npos) << choice.summary;

  // The literal plan fits and half the layers keep every expensive output: two more layers' worth
  // of attention's outputs fit beside them, a third layer's expensive outputs do not.
  auto literal_keeping = [&](int64_t expensive, int64_t attention) {
    compiler::RecomputePolicy policy = compiler::RecomputePolicy::all();
    policy.keep_expensive_layers = expensive;
    policy.keep_attention_layers = attention;
    return peak_of(policy);
  };
  const size_t between = literal_keeping(kLayers / 2, kLayers / 2 + 2);
  ASSERT_LT(between, literal_keeping(kLayers / 2 + 1, 0));
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, options, kLayers, false,
                                    under(between), &choice);
  EXPECT_TRUE(choice.fits);
  EXPECT_FALSE(choice.policy.block_inputs_only);
  EXPECT_EQ(choice.policy.keep_expensive_layers, kLayers / 2);
  EXPECT_GE(choice.policy.keep_attention_layers, kLayers / 2 + 2);
  if (choice.policy.keep_attention_layers < kLayers) {
    EXPECT_GT(literal_keeping(kLayers / 2, choice.policy.keep_attention_layers + 1), between);
  }
  EXPECT_NE(choice.summary.find("attention itself is re-run only in the other"), std::string::npos) << choice.summary;

  // Without an attention group to recompute there is nothing to keep.
  compiler::CompileOptions no_attention{.recompute = {.rmsnorm = true, .swiglu = true, .ffn = true}};
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, no_attention, kLayers,
                                    false, under(0), &choice);
  EXPECT_EQ(choice.policy.keep_attention_layers, 0);
}

// Between the literal plan and every layer's expensive outputs, the memory goes first to what saves
// the most FLOPs a byte (recompute_cost.h): over long documents attention's outputs in every layer,
// then the products' of as many layers as fit beside them; over short ones the products' first
// (then attention's in more layers, as above). Gradients stay bit-identical either way.
TEST(RecomputeChoice, KeepsAttentionFirstOverLongDocuments) {
  Decoder model;
  constexpr int64_t kLayers = 32;
  model.deepen(kLayers);
  auto plan_of = [&](int64_t expensive, int64_t attention) {
    compiler::RecomputePolicy policy = compiler::RecomputePolicy::all();
    policy.keep_expensive_layers = expensive;
    policy.keep_attention_layers = attention;
    return compile(model, policy);
  };
  auto peak_of = [&](int64_t expensive, int64_t attention) {
    return plan_of(expensive, attention).memory.peak_live_bytes;
  };
  auto under = [](size_t limit) {
    return [limit](const compiler::ExecutionPlan& plan) { return plan.memory.peak_live_bytes <= limit; };
  };
  const size_t limit = peak_of(kLayers / 4, kLayers);  // attention everywhere, a quarter keeps its products
  ASSERT_LT(limit, peak_of(kLayers, kLayers)) << "every layer's expensive outputs must not fit";

  compiler::CompileOptions options{.recompute = compiler::RecomputePolicy::all(), .attention_span = 1 << 20};
  compiler::RecomputeChoice longer, shorter;
  const compiler::ExecutionPlan long_plan = compiler::compile_training_to_fit(
      model.decoder.graph, model.decoder.loss, model.registry, options, kLayers, false, under(limit), &longer);
  EXPECT_TRUE(longer.fits);
  EXPECT_EQ(longer.policy.keep_attention_layers, kLayers);
  EXPECT_GE(longer.policy.keep_expensive_layers, kLayers / 4);
  EXPECT_GT(peak_of(longer.policy.keep_expensive_layers + 1, kLayers), limit) << "one more layer would have fit";
  EXPECT_NE(longer.summary.find("attention's outputs kept in the other " +
                                std::to_string(kLayers - longer.policy.keep_expensive_layers) +
                                " layers too, so attention itself is never re-run — before any matmul's: over the "
                                "data's documents a byte of attention's outputs kept saves re-running 1048576 FLOPs"),
            std::string::npos) << longer.summary;

  options.attention_span = 1;
  const compiler::ExecutionPlan short_plan = compiler::compile_training_to_fit(
      model.decoder.graph, model.decoder.loss, model.registry, options, kLayers, false, under(limit), &shorter);
  EXPECT_TRUE(shorter.fits);
  EXPECT_GT(shorter.policy.keep_expensive_layers, longer.policy.keep_expensive_layers)
      << "products first keeps more layers' products";
  EXPECT_GT(peak_of(shorter.policy.keep_expensive_layers + 1, shorter.policy.keep_expensive_layers + 1), limit);
  EXPECT_EQ(shorter.summary.find("before any matmul's"), std::string::npos) << shorter.summary;
  // Each took the order that re-runs fewer FLOPs at its span.
  EXPECT_LT(compiler::recompute_flops(long_plan.graph, 1 << 20), compiler::recompute_flops(short_plan.graph, 1 << 20));
  EXPECT_LT(compiler::recompute_flops(short_plan.graph, 1), compiler::recompute_flops(long_plan.graph, 1));

  // The mix the long documents' order makes (attention kept beyond the layers keeping products), on
  // the fixture's own layers: the same step as keeping everything.
  Decoder own;
  compiler::RecomputePolicy mix = compiler::RecomputePolicy::all();
  mix.keep_expensive_layers = 1;
  mix.keep_attention_layers = own.layers();
  ASSERT_GT(own.layers(), 1);
  expect_same_step(own, compile(own, compiler::RecomputePolicy::none()), compile(own, mix));
}

TEST(RecomputeChoice, LayerOfANodeComesFromItsScope) {
  graph::Node node;
  node.name = "layers.12.attn.q";
  EXPECT_EQ(compiler::layer_of(node), 12);
  node.name = "final_norm";
  EXPECT_EQ(compiler::layer_of(node), -1);
  node.name = "layers.x";
  EXPECT_EQ(compiler::layer_of(node), -1);
}

TEST(RecomputeChoice, PicksTheLargestKeptLayerCountThatFits) {
  Decoder model;
  const compiler::CompileOptions options{.recompute = compiler::RecomputePolicy::all()};
  auto arena_of = [&](int64_t kept) {
    compiler::RecomputePolicy policy = compiler::RecomputePolicy::all();
    policy.keep_expensive_layers = kept;
    return compile(model, policy).memory.arena_bytes;
  };
  const int64_t layers = model.layers();
  ASSERT_GE(layers, 2);
  const size_t all_kept = arena_of(layers), none_kept = arena_of(0);
  ASSERT_LT(none_kept, all_kept);

  compiler::RecomputeChoice choice;
  auto under = [](size_t limit) {
    return [limit](const compiler::ExecutionPlan& plan) { return plan.memory.arena_bytes <= limit; };
  };
  // Room for every activation: nothing is recomputed, one plan compiled.
  const size_t saved = compile(model, compiler::RecomputePolicy::none()).memory.arena_bytes;
  ASSERT_LT(all_kept, saved);
  const compiler::ExecutionPlan fastest = compiler::compile_training_to_fit(
      model.decoder.graph, model.decoder.loss, model.registry, options, layers, false, under(saved), &choice);
  EXPECT_FALSE(choice.policy.any());
  EXPECT_EQ(fastest.recomputed_nodes, 0u);
  EXPECT_EQ(choice.compiled_plans, 1);
  EXPECT_NE(choice.summary.find("none needed"), std::string::npos) << choice.summary;
  // Room for the plan that re-runs only cheap ops: every layer keeps its expensive outputs.
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, options, layers, false,
                                    under(all_kept), &choice);
  EXPECT_EQ(choice.policy.keep_expensive_layers, layers);
  EXPECT_EQ(choice.policy.keep_all_layers, 0) << "no room for a layer's cheap outputs";
  EXPECT_TRUE(choice.fits);
  EXPECT_NE(choice.summary.find("all"), std::string::npos) << choice.summary;
  // Room for the literal plan only.
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, options, layers, false,
                                    under(none_kept), &choice);
  EXPECT_TRUE(choice.fits);
  for (int64_t kept = choice.policy.keep_expensive_layers + 1; kept <= layers; ++kept) {
    EXPECT_GT(arena_of(kept), none_kept) << "keeping " << kept << " layers would have fit";
  }
  // Room for nothing: the literal plan, marked as not fitting (the device reports it).
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, options, layers, false,
                                    under(0), &choice);
  EXPECT_FALSE(choice.fits);
  EXPECT_FALSE(choice.policy.block_inputs_only);
  EXPECT_EQ(choice.policy.keep_expensive_layers, 0);
  // Between: the chosen count fits and one more would not.
  const size_t middle = arena_of(layers / 2);
  const compiler::ExecutionPlan plan = compiler::compile_training_to_fit(
      model.decoder.graph, model.decoder.loss, model.registry, options, layers, false, under(middle), &choice);
  EXPECT_TRUE(choice.fits);
  EXPECT_LE(plan.memory.arena_bytes, middle);
  EXPECT_GE(choice.policy.keep_expensive_layers, layers / 2);
  if (choice.policy.keep_expensive_layers < layers) EXPECT_GT(arena_of(choice.policy.keep_expensive_layers + 1), middle);
}

// Deep enough (here 32 layers), keeping only each block's input is the last tier: chosen when the
// literal plan does not fit and it does (when neither fits, the literal plan is reported); never
// with offload_residual, which moves the stream to the host instead.
TEST(RecomputeChoice, KeepsOnlyEachBlocksInputWhenTheLiteralPlanDoesNotFit) {
  Decoder model;
  model.deepen(32);
  const compiler::CompileOptions options{.recompute = compiler::RecomputePolicy::all()};
  compiler::RecomputePolicy deeper = compiler::RecomputePolicy::all();
  deeper.block_inputs_only = true;
  const size_t literal = compile(model, compiler::RecomputePolicy::all()).memory.peak_live_bytes;
  const size_t inputs_only = compile(model, deeper).memory.peak_live_bytes;
  ASSERT_LT(inputs_only, literal);
  auto under = [](size_t limit) {
    return [limit](const compiler::ExecutionPlan& plan) { return plan.memory.peak_live_bytes <= limit; };
  };
  compiler::RecomputeChoice choice;
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, options, 32, false,
                                    under(inputs_only), &choice);
  EXPECT_TRUE(choice.fits);
  EXPECT_TRUE(choice.policy.block_inputs_only);
  EXPECT_NE(choice.summary.find("only each block's input is kept"), std::string::npos) << choice.summary;
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, options, 32, false,
                                    under(0), &choice);
  EXPECT_FALSE(choice.fits);
  EXPECT_FALSE(choice.policy.block_inputs_only) << "nothing fits: the literal plan is reported";
  compiler::CompileOptions offloading = options;
  offloading.offload_residual = true;
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, offloading, 32, false,
                                    under(0), &choice);
  EXPECT_FALSE(choice.policy.block_inputs_only);
  // Without recompute_block the stream inside a block is never recomputed.
  compiler::CompileOptions no_block{.recompute = {.rmsnorm = true, .qkv = true, .att = true, .swiglu = true,
                                                  .ffn = true}};
  compiler::compile_training_to_fit(model.decoder.graph, model.decoder.loss, model.registry, no_block, 32, false,
                                    under(0), &choice);
  EXPECT_FALSE(choice.policy.block_inputs_only);
}

TEST(RecomputeChoice, RecommendedValuesAllowEveryGroup) {
  Decoder model;
  compiler::RecomputeChoice choice;
  const compiler::CompileOptions no_recompute{.recompute = compiler::RecomputePolicy::none()};
  const compiler::ExecutionPlan plan = compiler::compile_training_to_fit(
      model.decoder.graph, model.decoder.loss, model.registry, no_recompute, model.layers(), true,
      [](const compiler::ExecutionPlan&) { return true; }, &choice);
  EXPECT_EQ(plan.recomputed_nodes, 0u);
  EXPECT_FALSE(choice.policy.any());
  // With nothing fitting but the most frugal plan, every group is allowed even though the
  // options enabled none.
  const compiler::ExecutionPlan frugal = compiler::compile_training_to_fit(
      model.decoder.graph, model.decoder.loss, model.registry, no_recompute, model.layers(), true,
      [&](const compiler::ExecutionPlan& candidate) { return candidate.recomputed_nodes > 0; }, &choice);
  EXPECT_TRUE(choice.policy.block);
  EXPECT_GT(frugal.recomputed_nodes, 0u);
}

}  // namespace
}  // namespace surogate::models
