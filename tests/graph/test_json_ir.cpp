// JSON IR: export/import round trip, and clear errors for malformed documents.
#include <gtest/gtest.h>

#include "graph/builder.h"
#include "graph/json_ir.h"

namespace surogate::graph {
namespace {

using nlohmann::json;

OpRegistry make_registry() {
  OpRegistry registry;
  register_core_ops(registry);
  return registry;
}

Graph sample(const OpRegistry& registry) {
  GraphBuilder b(registry);
  TensorId x = b.input("x", DType::F32, {2, 4});
  TensorId w = b.parameter("layers.0.w", DType::F32, {2, 4}, /*trainable=*/false);
  TensorId y;
  {
    auto scope = b.scope("layers.0");
    auto group = b.recompute_group("ffn");
    y = b.op("mul", {x, w});
    y = b.op("scale", {y}, {{"factor", 0.5}});
  }
  TensorId loss = b.op("sum", {y}, {}, "loss");
  b.mark_output(loss);
  return b.finish();
}

void expect_import_error(const json& document, const OpRegistry& registry, const std::string& fragment) {
  try {
    graph_from_json(document, registry);
    FAIL() << "expected a UserError containing: " << fragment;
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(JsonIr, RoundTripPreservesEverything) {
  OpRegistry registry = make_registry();
  Graph original = sample(registry);
  json document = graph_to_json(original);
  EXPECT_EQ(document["version"], 1);
  Graph imported = graph_from_json(document, registry);
  EXPECT_EQ(graph_to_json(imported), document);
  ASSERT_EQ(imported.nodes.size(), original.nodes.size());
  EXPECT_EQ(imported.nodes[1].attrs["factor"], 0.5);
  EXPECT_EQ(imported.nodes[1].recompute_group, "ffn");
  EXPECT_FALSE(imported.tensor(imported.require_tensor("layers.0.w")).trainable);
  EXPECT_EQ(imported.tensor(imported.require_tensor("loss")).producer, 2);
}

TEST(JsonIr, ReportsStructuralErrorsWithTheirLocation) {
  OpRegistry registry = make_registry();
  json good = graph_to_json(sample(registry));

  json bad_version = good;
  bad_version["version"] = 7;
  expect_import_error(bad_version, registry, "version 7 is not supported");

  json bad_input = good;
  bad_input["nodes"][1]["inputs"][0] = "layers.0.missing";
  expect_import_error(bad_input, registry, "nodes[1] ('layers.0.scale').inputs[0] names tensor 'layers.0.missing'");

  json bad_dtype = good;
  bad_dtype["tensors"][0]["dtype"] = "F33";
  expect_import_error(bad_dtype, registry, "tensors[0] ('x'): dtype 'F33'");

  json bad_shape = good;
  bad_shape["tensors"][0]["shape"] = json::array({2, -4});
  expect_import_error(bad_shape, registry, "must list positive integers");

  json missing_op = good;
  missing_op["nodes"][0].erase("op");
  expect_import_error(missing_op, registry, "nodes[0] ('layers.0.mul') has no \"op\"");

  json unknown_op = good;
  unknown_op["nodes"][0]["op"] = "matmull";
  expect_import_error(unknown_op, registry, "unknown op 'matmull'");

  json wrong_shape = good;
  wrong_shape["tensors"][2]["shape"] = json::array({4, 2});
  expect_import_error(wrong_shape, registry, "recorded as F32[4, 2] but the op infers F32[2, 4]");

  json double_write = good;
  double_write["nodes"][1]["outputs"][0] = good["nodes"][0]["outputs"][0];
  expect_import_error(double_write, registry, "already produced by nodes[0]");

  expect_import_error(json::array(), registry, "must be a JSON object");
}

}  // namespace
}  // namespace surogate::graph
