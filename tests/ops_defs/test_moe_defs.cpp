// The mixture-of-experts ops (ops/defs/moe_router_def.cpp, moe_dispatch_def.cpp,
// expert_linear_def.cpp) in F64 on the CPU backend: every gradient of a whole MoE block (router,
// top-k with and without renormalisation, dispatch, permute, grouped expert matmuls, weighted
// combine, Qwen2-MoE's sigmoid-gated shared expert and the router load-balancing loss) against
// finite differences (ops_defs_test_util.h), and the dispatch's stable sort and the row movement
// ops exactly.
#include <gtest/gtest.h>

#include "ops/moe_routing.h"
#include "ops_defs_test_util.h"

namespace surogate {
namespace {

using namespace ops_defs_testing;

TensorId moe_block(GraphBuilder& b, bool normalize) {
  const int64_t experts = 4, hidden = 8, width = 6;
  TensorId x = b.parameter("x", DType::F64, {2, 5, hidden});
  TensorId router = b.parameter("router", DType::F64, {experts, hidden});
  TensorId gate_w = b.parameter("experts_gate", DType::F64, {experts, width, hidden});
  TensorId up_w = b.parameter("experts_up", DType::F64, {experts, width, hidden});
  TensorId down_w = b.parameter("experts_down", DType::F64, {experts, hidden, width});
  TensorId shared = b.parameter("shared", DType::F64, {2, 5, hidden});
  TensorId shared_gate = b.parameter("shared_gate", DType::F64, {2, 5, 1});
  graph::OpOutputs route = b.op("router_topk", {b.op("linear", {x, router})}, {{"top_k", 2}, {"normalize", normalize}});
  graph::OpOutputs dispatch = b.op("moe_dispatch", {route[1]}, {{"experts", experts}});
  TensorId sorted = b.op("moe_permute", {x, dispatch[0], dispatch[1]});
  TensorId gate = b.op("expert_linear", {sorted, gate_w, dispatch[2]});
  TensorId up = b.op("expert_linear", {sorted, up_w, dispatch[2]});
  TensorId down = b.op("expert_linear", {b.op("swiglu", {gate, up}), down_w, dispatch[2]});
  TensorId combined = b.op("moe_unpermute", {down, route[0], dispatch[1]});
  TensorId out = b.op("sigmoid_gated_add", {combined, shared, shared_gate});
  graph::OpOutputs statistics = b.op("router_statistics", {route[2], route[1]});
  TensorId aux = b.op("router_aux_loss", {statistics[0], statistics[1]}, {{"scale", 0.3}});
  return b.op("add", {probe_loss(b, out), aux});
}

TEST(MoeDefs, BlockGradientsMatchFiniteDifferences) {
  for (bool normalize : {false, true}) {
    SCOPED_TRACE(normalize ? "normalised top-k" : "raw top-k");
    EXPECT_EQ(check_gradients([&](GraphBuilder& b) { return moe_block(b, normalize); }, {}), 7u);
  }
}

TEST(MoeDefs, BlockWithoutTheRouterLossHasNoProbabilityGradient) {
  // Without the load-balancing loss the router's backward takes no probability gradient (4 inputs).
  EXPECT_EQ(check_gradients(
                [](GraphBuilder& b) {
                  TensorId x = b.parameter("x", DType::F64, {2, 3, 8});
                  TensorId router = b.parameter("router", DType::F64, {4, 8});
                  TensorId weight = b.parameter("experts", DType::F64, {4, 5, 8});
                  graph::OpOutputs route = b.op("router_topk", {b.op("linear", {x, router})}, {{"top_k", 2}, {"normalize", true}});
                  graph::OpOutputs dispatch = b.op("moe_dispatch", {route[1]}, {{"experts", 4}});
                  TensorId y = b.op("expert_linear", {b.op("moe_permute", {x, dispatch[0], dispatch[1]}), weight, dispatch[2]});
                  return probe_loss(b, b.op("moe_unpermute", {y, route[0], dispatch[1]}));
                },
                {}),
            3u);
}

TEST(MoeDefs, RouterLossGradientReachesTheRouterAlone) {
  // Only the load-balancing loss: its gradient flows to the router through the probabilities.
  EXPECT_EQ(check_gradients(
                [](GraphBuilder& b) {
                  TensorId x = b.parameter("x", DType::F64, {3, 7, 5}, false);
                  TensorId router = b.parameter("router", DType::F64, {6, 5});
                  graph::OpOutputs route = b.op("router_topk", {b.op("linear", {x, router})}, {{"top_k", 3}});
                  graph::OpOutputs statistics = b.op("router_statistics", {route[2], route[1]});
                  return b.op("router_aux_loss", {statistics[0], statistics[1]}, {{"scale", 1.5}});
                },
                {}),
            1u);
}

TEST(MoeDefs, DispatchIsAStableSortByExpert) {
  // Tokens 0..3 choose (2, 0), (2, 1), (0, 2), (3, 0); expert 1 gets one row, none is empty but 4.
  const std::vector<int32_t> indices{2, 0, 2, 1, 0, 2, 3, 0};
  std::vector<int32_t> order(8), position(8), offsets(6);
  ops::moe_dispatch(indices.data(), 8, 5, order.data(), position.data(), offsets.data());
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 3, 4, 7, 8, 8}));
  EXPECT_EQ(order, (std::vector<int32_t>{1, 4, 7, 3, 0, 2, 5, 6}));
  for (int32_t a = 0; a < 8; ++a) EXPECT_EQ(order[static_cast<size_t>(position[a])], a);
  const std::vector<int32_t> bad{0, 5};
  EXPECT_THROW(ops::moe_dispatch(bad.data(), 2, 5, order.data(), position.data(), offsets.data()), UserError);
}

TEST(MoeDefs, PermuteThenUnpermuteWithUnitWeightsSumsEachTokensCopies) {
  const std::vector<int32_t> indices{1, 0, 0, 2, 2, 1};  // 3 tokens, top 2
  std::vector<int32_t> order(6), position(6), offsets(4);
  ops::moe_dispatch(indices.data(), 6, 3, order.data(), position.data(), offsets.data());
  const std::vector<double> x{1, 2, 3, 4, 5, 6};  // [3, 2]
  std::vector<double> sorted(12), back(6);
  ops::moe_permute(x.data(), order.data(), 6, 2, 2, sorted.data());
  const std::vector<double> ones(6, 1.0);
  ops::moe_unpermute(sorted.data(), ones.data(), position.data(), 3, 2, 2, back.data());
  EXPECT_EQ(back, (std::vector<double>{2, 4, 6, 8, 10, 12}));
}

TEST(MoeDefs, ShapeRulesNameTheProblem) {
  GraphBuilder b(registry());
  TensorId logits = b.parameter("logits", DType::F32, {4, 3});
  try {
    b.op("router_topk", {logits}, {{"top_k", 5}});
    ADD_FAILURE() << "top_k larger than the experts was accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("top_k"), std::string::npos) << error.what();
  }
  TensorId x = b.parameter("x", DType::F32, {6, 8});
  TensorId weight = b.parameter("weight", DType::F32, {4, 5, 8});
  TensorId offsets = b.input("offsets", DType::I32, {4});
  try {
    b.op("expert_linear", {x, weight, offsets});
    ADD_FAILURE() << "offsets of the wrong size were accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("one offset per expert"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace surogate
