// GraphBuilder: naming, scopes, recompute tags, shape inference errors, registry lookups.
#include <gtest/gtest.h>

#include "graph/builder.h"
#include "graph/op_registry.h"

namespace surogate::graph {
namespace {

const OpRegistry& core_registry() {
  static const OpRegistry registry = [] {
    OpRegistry built;
    register_core_ops(built);
    return built;
  }();
  return registry;
}

TEST(GraphBuilder, NamesOutputsFromScopesAndKeepsThemUnique) {
  GraphBuilder b(core_registry());
  TensorId x = b.input("x", DType::F32, {2, 3});
  TensorId y = b.input("y", DType::F32, {2, 3});
  TensorId first, second, third;
  {
    auto scope = b.scope("layers.3");
    auto inner = b.scope("attn");
    first = b.op("add", {x, y});
    second = b.op("add", {x, y});
    third = b.op("mul", {first, second}, {}, "q");
  }
  TensorId outside = b.op("scale", {third}, {{"factor", 2.0}});
  EXPECT_EQ(b.tensor(first).name, "layers.3.attn.add");
  EXPECT_EQ(b.tensor(second).name, "layers.3.attn.add.2");
  EXPECT_EQ(b.tensor(third).name, "layers.3.attn.q");
  EXPECT_EQ(b.tensor(outside).name, "scale");
  EXPECT_EQ(b.current_scope(), "");
}

TEST(GraphBuilder, RecordsRecomputeGroupPhaseAndTypes) {
  GraphBuilder b(core_registry());
  TensorId x = b.input("x", DType::F32, {4});
  TensorId y;
  {
    auto group = b.recompute_group("swiglu");
    y = b.op("mul", {x, x});
  }
  TensorId total = b.op("sum", {y});
  Graph g = b.finish();
  EXPECT_EQ(g.node(g.tensor(y).producer).recompute_group, "swiglu");
  EXPECT_EQ(g.node(g.tensor(total).producer).recompute_group, "");
  EXPECT_EQ(g.node(0).phase, NodePhase::Forward);
  EXPECT_EQ(g.tensor(total).type, (TensorType{DType::F32, {}}));
}

TEST(GraphBuilder, ShapeMismatchIsAUserErrorNamingTheNode) {
  GraphBuilder b(core_registry());
  TensorId x = b.input("x", DType::F32, {2, 3});
  TensorId y = b.input("y", DType::F32, {3, 2});
  auto scope = b.scope("block");
  try {
    b.op("add", {x, y});
    FAIL() << "expected a UserError";
  } catch (const UserError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("node 'block.add' (op add)"), std::string::npos) << message;
    EXPECT_NE(message.find("F32[3, 2]"), std::string::npos) << message;
  }
}

TEST(GraphBuilder, WrongArityAndUnknownOpsAreUserErrors) {
  GraphBuilder b(core_registry());
  TensorId x = b.input("x", DType::F32, {2});
  EXPECT_THROW(b.op("add", {x}), UserError);
  try {
    b.op("mull", {x, x});
    FAIL();
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("did you mean 'mul'"), std::string::npos) << error.what();
  }
  EXPECT_THROW(b.op("scale", {x}), UserError);  // missing attribute 'factor'
  EXPECT_THROW(b.op("scale", {x}, {{"factor", "two"}}), UserError);
  EXPECT_THROW(b.input("x", DType::F32, {2}), UserError);  // duplicate name
  EXPECT_THROW(b.input("z", DType::F32, {0}), UserError);  // empty dimension
}

TEST(GraphBuilder, AuxiliaryOutputsAreNamedAfterTheOpDef) {
  OpRegistry registry;
  register_core_ops(registry);
  registry.add(OpDef{.name = "two_outputs",
                     .inputs = {"x"},
                     .outputs = {"out", "stats"},
                     .infer = [](const InferContext& ctx) {
                       return std::vector<TensorType>{ctx.input(0), {DType::F32, {1}}};
                     },
                     .gradient = {},
                     .cpu = {}});
  GraphBuilder b(registry);
  TensorId x = b.input("x", DType::F32, {5});
  OpOutputs outs = b.op("two_outputs", {x}, {}, "norm");
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(b.tensor(outs[0]).name, "norm");
  EXPECT_EQ(b.tensor(outs[1]).name, "norm.stats");
  EXPECT_EQ(static_cast<TensorId>(outs), outs[0]);
}

TEST(OpRegistry, RejectsDuplicateRegistration) {
  OpRegistry registry;
  register_core_ops(registry);
  OpRegistry again;
  register_core_ops(again);
  EXPECT_THROW(register_core_ops(registry), InternalError);
  EXPECT_NE(registry.find("accumulate"), nullptr);
  EXPECT_EQ(registry.find("nope"), nullptr);
}

}  // namespace
}  // namespace surogate::graph
