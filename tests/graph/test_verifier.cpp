// verify_graph: accepts built graphs and names the problem in broken ones.
#include <gtest/gtest.h>

#include "graph/builder.h"
#include "graph/verifier.h"

namespace surogate::graph {
namespace {

OpRegistry make_registry() {
  OpRegistry registry;
  register_core_ops(registry);
  return registry;
}

Graph small_graph(const OpRegistry& registry) {
  GraphBuilder b(registry);
  TensorId x = b.input("x", DType::F32, {3});
  TensorId w = b.parameter("w", DType::F32, {3});
  TensorId y = b.op("mul", {x, w}, {}, "y");
  TensorId loss = b.op("sum", {y}, {}, "loss");
  b.mark_output(loss);
  return b.finish();
}

void expect_error(const Graph& graph, const OpRegistry& registry, const std::string& fragment) {
  try {
    verify_graph(graph, registry);
    FAIL() << "expected a UserError containing: " << fragment;
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(Verifier, AcceptsABuiltGraph) {
  OpRegistry registry = make_registry();
  EXPECT_NO_THROW(verify_graph(small_graph(registry), registry));
}

TEST(Verifier, CatchesStaleOutputTypes) {
  OpRegistry registry = make_registry();
  Graph graph = small_graph(registry);
  graph.tensor(graph.require_tensor("y")).type.shape = {4};
  expect_error(graph, registry, "recorded as F32[4] but the op infers F32[3]");
}

TEST(Verifier, CatchesUseBeforeProduction) {
  OpRegistry registry = make_registry();
  Graph graph = small_graph(registry);
  std::swap(graph.nodes[0], graph.nodes[1]);
  expect_error(graph, registry, "input 'y' is used before any node produces it");
}

TEST(Verifier, CatchesDanglingTensorsAndMissingOutputs) {
  OpRegistry registry = make_registry();
  Graph graph = small_graph(registry);
  graph.add_tensor(TensorInfo{"orphan", {DType::F32, {2}}, TensorRole::Activation, false, kNoNode});
  expect_error(graph, registry, "'orphan'");

  Graph no_outputs = small_graph(registry);
  no_outputs.outputs.clear();
  expect_error(no_outputs, registry, "marks no outputs");
}

TEST(Verifier, CatchesRoleMistakes) {
  OpRegistry registry = make_registry();
  Graph graph = small_graph(registry);
  graph.tensor(graph.require_tensor("x")).trainable = true;
  expect_error(graph, registry, "marked trainable");

  Graph unlisted = small_graph(registry);
  unlisted.parameters.clear();
  expect_error(unlisted, registry, "missing from the graph's parameters list");
}

}  // namespace
}  // namespace surogate::graph
