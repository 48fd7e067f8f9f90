// The decoder graph through JSON IR (what `surogate ir` writes and `surogate eval --ir` reads):
// export → import gives the same graph (same JSON) and, run on a fixture, the same loss bits;
// check_model_graph turns a graph that does not fit the runner into one clear UserError.
#include <gtest/gtest.h>

#include <cstring>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "graph/json_ir.h"
#include "models/decoder_graph.h"
#include "models/model_eval.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "fixture_util.h"
#include "user_error_of.h"

namespace surogate::models {
namespace {

float forward_loss(const graph::OpRegistry& registry, graph::Graph forward, const std::string& name,
                   const testing::Fixture& fixture) {
  const graph::TensorId loss = forward.outputs.at(0);
  compiler::ExecutionPlan plan = compiler::compile_forward(std::move(forward), registry);
  runtime::CpuBackend backend;
  backend.load(plan, registry);
  testing::load_weights(backend, plan, name, fixture.config, 1.0f);
  backend.execute(testing::bindings(plan, fixture));
  return backend.view<float>(loss)[0];
}

class DecoderIr : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderIr, RoundTripKeepsGraphAndLoss) {
  const std::string name = GetParam();
  testing::Fixture fixture = testing::open_fixture(name);
  const graph::OpRegistry registry = ops::make_model_registry();
  const DecoderGraphOptions options{.batch = fixture.batch, .sequence = fixture.sequence, .lmhead_chunks = 2};
  graph::Graph built = build_decoder_graph(fixture.config, registry, options).graph;
  const nlohmann::json exported = graph::graph_to_json(built);
  graph::Graph imported = graph::graph_from_json(nlohmann::json::parse(exported.dump()), registry);
  EXPECT_EQ(graph::graph_to_json(imported), exported);
  EXPECT_NO_THROW(check_model_graph(imported, fixture.config, {fixture.batch, fixture.sequence}, "ir.json"));

  const float direct = forward_loss(registry, std::move(built), name, fixture);
  const float through_ir = forward_loss(registry, std::move(imported), name, fixture);
  EXPECT_EQ(std::memcmp(&direct, &through_ir, sizeof(float)), 0) << direct << " vs " << through_ir;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderIr,
                         ::testing::Values("llama_gqa_llama3", "mistral_sliding", "qwen2_bias_tied", "qwen3_qknorm",
                                           "qwen2_moe_shared", "mixtral_topk"));

TEST(DecoderIrCheck, GraphsThatDoNotFitTheRunnerAreNamed) {
  testing::Fixture fixture = testing::open_fixture("qwen3_qknorm");
  const graph::OpRegistry registry = ops::make_model_registry();
  const BatchShape shape{fixture.batch, fixture.sequence};
  const graph::Graph graph =
      build_decoder_graph(fixture.config, registry, {.batch = fixture.batch, .sequence = fixture.sequence}).graph;

  // Another batch shape than the run feeds.
  EXPECT_NE(error_of([&] { check_model_graph(graph, fixture.config, {shape.batch + 1, shape.sequence}, "g.json"); })
                .find("g.json: input 'input_ids'"),
            std::string::npos);
  // A config that implies parameters the graph lacks (q/k/v biases).
  io::ModelConfig biased = fixture.config;
  biased.qkv_bias = true;
  const std::string missing = error_of([&] { check_model_graph(graph, biased, shape, "g.json"); });
  EXPECT_NE(missing.find("no parameter 'layers.0.attn.q_proj.bias'"), std::string::npos) << missing;
  // A parameter of the wrong shape.
  io::ModelConfig wider = fixture.config;
  wider.intermediate_size += 8;
  const std::string shape_error = error_of([&] { check_model_graph(graph, wider, shape, "g.json"); });
  EXPECT_NE(shape_error.find("layers.0.mlp.gate_proj.weight' has shape"), std::string::npos) << shape_error;
}

}  // namespace
}  // namespace surogate::models
