// generate/decode_graph.h on the built-in graphs of the fixtures: every attention node becomes
// cached_attention over constant caches of [slots, capacity, Hkv, D], the loss goes, the logits
// come at each row's last token; graphs it cannot turn are refused naming the definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "generate/batch_reshape.h"
#include "generate/decode_graph.h"
#include "graph/builder.h"
#include "models/defined_weights.h"
#include "models/model_definition.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "user_error_of.h"

namespace surogate::generate {
namespace {

using graph::Graph;
using graph::Shape;
using graph::TensorRole;

std::filesystem::path fixture(const std::string& name) { return std::filesystem::path(SUROGATE_FIXTURES_DIR) / name; }

Graph decode_of(const std::string& name, int64_t batch, int64_t sequence, const DecodeShape& shape) {
  static const graph::OpRegistry registry = ops::make_model_registry();
  const io::ModelConfig config = models::load_model_config(fixture(name), {});
  const Graph forward = models::build_model_graph(config, registry, {batch, sequence, 1, false}).graph;
  return build_decode_graph(forward, registry, shape, "the test's definition");
}

size_t count_op(const Graph& graph, const std::string& op) {
  return static_cast<size_t>(std::count_if(graph.nodes.begin(), graph.nodes.end(),
                                           [&](const graph::Node& node) { return node.op == op; }));
}

std::vector<std::string> input_names(const Graph& graph) {
  std::vector<std::string> names;
  for (graph::TensorId id : graph.inputs) names.push_back(graph.tensor(id).name);
  return names;
}

TEST(DecodeGraph, AttentionReadsConstantCachesAndTheLogitsAreOnePerRow) {
  const Graph decode = decode_of("qwen3_qknorm", 2, 4, {3, 16});  // 2 layers, 2 kv heads of 8
  EXPECT_EQ(count_op(decode, "attention"), 0u);
  EXPECT_EQ(count_op(decode, "cached_attention"), 2u);
  EXPECT_EQ(cache_layers(decode), 2);
  EXPECT_EQ(count_op(decode, "lm_head_loss"), 0u);
  for (const char* name : {"layers.0.k_cache", "layers.0.v_cache", "layers.1.k_cache", "layers.1.v_cache"}) {
    const graph::TensorInfo& cache = decode.tensor(decode.require_tensor(name));
    EXPECT_EQ(cache.role, TensorRole::Constant) << name;
    EXPECT_EQ(cache.type, (graph::TensorType{DType::F32, Shape{3, 16, 2, 8}})) << name;
    EXPECT_NE(std::find(decode.parameters.begin(), decode.parameters.end(), decode.require_tensor(name)),
              decode.parameters.end()) << name;
  }
  EXPECT_EQ(input_names(decode), (std::vector<std::string>{"slot_ids", "cache_lengths", "new_lengths", "input_ids",
                                                          "position_ids", "last_rows", "last_row_positions"}));
  ASSERT_EQ(decode.outputs.size(), 1u);
  EXPECT_EQ(decode.tensor(decode.outputs[0]).name, "logits");
  EXPECT_EQ(decode.tensor(decode.outputs[0]).type.shape, (Shape{2, 96}));
  // Every checkpoint weight is still a parameter, so the checkpoint loads by name.
  const io::ModelConfig config = models::load_model_config(fixture("qwen3_qknorm"), {});
  for (const models::ParameterSpec& spec : models::parameter_specs(config)) {
    ASSERT_TRUE(decode.find_tensor(spec.name).has_value()) << spec.name;
    EXPECT_EQ(decode.tensor(*decode.find_tensor(spec.name)).role, TensorRole::Parameter) << spec.name;
  }
}

TEST(DecodeGraph, OneTokenPerRowNeedsNoGather) {
  const Graph decode = decode_of("llama_gqa_llama3", 3, 1, {3, 8});
  EXPECT_EQ(count_op(decode, "moe_permute"), 0u);
  EXPECT_FALSE(decode.find_tensor("last_rows").has_value());
  EXPECT_EQ(decode.tensor(decode.outputs[0]).type.shape, (Shape{3, 1, 96}));
  // Llama reads rope tables from the positions; document ids are no longer read.
  EXPECT_FALSE(decode.find_tensor("document_ids").has_value());
  EXPECT_FALSE(decode.find_tensor("targets").has_value());
  EXPECT_FALSE(decode.find_tensor("loss_scale").has_value());
}

TEST(DecodeGraph, TheSlidingWindowIsCarriedOver) {
  const Graph decode = decode_of("mistral_sliding", 1, 4, {1, 32});
  ASSERT_EQ(count_op(decode, "cached_attention"), 2u);
  for (const graph::Node& node : decode.nodes) {
    if (node.op == "cached_attention") EXPECT_EQ(node.attrs.at("window").get<int64_t>(), 4) << node.name;
  }
}

TEST(DecodeGraph, MoeModelsKeepTheirRouting) {
  const Graph decode = decode_of("qwen3_moe_topk", 2, 3, {2, 8});
  EXPECT_EQ(count_op(decode, "cached_attention"), 3u);
  EXPECT_GT(count_op(decode, "router_topk"), 0u);
  EXPECT_EQ(count_op(decode, "router_aux_loss"), 0u);
}

// input_ids → embedding → `loss_op`; no attention.
Graph graph_without_attention(const graph::OpRegistry& registry, bool lm_head_loss) {
  graph::GraphBuilder b(registry);
  const auto ids = b.input("input_ids", DType::I32, {1, 4});
  const auto targets = b.input("targets", DType::I32, {1, 4});
  const auto scale = b.input("loss_scale", DType::F32, {});
  const auto table = b.parameter("embed", DType::F32, {16, 8});
  const auto hidden = b.op("embedding", {ids, table});
  b.mark_output(lm_head_loss ? b.op("lm_head_loss", {hidden, table, targets, scale}) : b.op("sum", {hidden}));
  return b.finish();
}

TEST(DecodeGraph, AGraphItCannotTurnIsRefusedNamingTheDefinition) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const std::string no_attention = error_of([&] {
    build_decode_graph(graph_without_attention(registry, true), registry, {1, 8}, "config.yaml:3: model_definition");
  });
  EXPECT_NE(no_attention.find("config.yaml:3: model_definition"), std::string::npos) << no_attention;
  EXPECT_NE(no_attention.find("no attention node"), std::string::npos) << no_attention;
  const std::string other_loss = error_of([&] {
    build_decode_graph(graph_without_attention(registry, false), registry, {1, 8}, "config.yaml:3: model_definition");
  });
  EXPECT_NE(other_loss.find("config.yaml:3: model_definition"), std::string::npos) << other_loss;
  EXPECT_NE(other_loss.find("not lm_head_loss"), std::string::npos) << other_loss;
}

TEST(BatchReshape, AGraphIsReinferredAtAnotherBatchShape) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const io::ModelConfig config = models::load_model_config(fixture("qwen3_moe_topk"), {});
  const Graph forward = models::build_model_graph(config, registry, {2, 8, 1, false}).graph;
  const Graph reshaped = reshape_batch(forward, registry, 3, 1, "the definition");
  const Graph built = models::build_model_graph(config, registry, {3, 1, 1, false}).graph;
  ASSERT_EQ(reshaped.tensors.size(), built.tensors.size());
  for (size_t i = 0; i < built.tensors.size(); ++i) {
    EXPECT_EQ(reshaped.tensors[i].type, built.tensors[i].type) << built.tensors[i].name;
  }
}

TEST(BatchReshape, ANodeThatKeepsTheOldShapeIsNamed) {
  const graph::OpRegistry registry = ops::make_model_registry();
  graph::GraphBuilder b(registry);
  const auto ids = b.input("input_ids", DType::I32, {1, 4});
  const auto table = b.parameter("embed", DType::F32, {16, 8});
  const auto bias = b.op("broadcast", {b.input("bias", DType::F32, {})}, {{"shape", {1, 4, 8}}}, "bias_rows");
  b.mark_output(b.op("add", {b.op("embedding", {ids, table}), bias}, nlohmann::json::object(), "biased"));
  const std::string message = error_of([&] { reshape_batch(b.finish(), registry, 2, 3, "config.yaml:4: model_definition"); });
  EXPECT_NE(message.find("config.yaml:4: model_definition"), std::string::npos) << message;
  EXPECT_NE(message.find("[1, 4] tokens"), std::string::npos) << message;
  EXPECT_NE(message.find("'biased'"), std::string::npos) << message;
}

}  // namespace
}  // namespace surogate::generate
