// The FLOPs a plan re-runs (compiler/recompute_cost.h), on a hand-made graph: re-run products count
// 2 · outputs · input width, re-run attention 2 · outputs · the span (the row's length when it is
// not given, twice a sliding window at most), everything else and every forward node nothing.
#include <gtest/gtest.h>

#include <string>

#include "compiler/recompute_cost.h"

namespace surogate::compiler {
namespace {

using graph::NodePhase;

struct Builder {
  graph::Graph graph;
  graph::TensorId tensor(const std::string& name, graph::Shape shape) {
    return graph.add_tensor({.name = name, .type = {DType::BF16, std::move(shape)}});
  }
  void node(const std::string& op, graph::TensorId in, graph::TensorId out, NodePhase phase,
            nlohmann::json attrs = nlohmann::json::object()) {
    graph.add_node({.name = graph.tensor(out).name, .op = op, .inputs = {in}, .outputs = {out},
                    .attrs = std::move(attrs), .phase = phase});
  }
};

TEST(RecomputeCost, CountsReRunProductsAndAttentionOnly) {
  Builder b;
  const auto x = b.tensor("x", {2, 8, 16});
  b.node("linear", x, b.tensor("recompute.y", {2, 8, 32}), NodePhase::Recompute);       // 2 · 512 · 16
  b.node("linear_add", x, b.tensor("recompute.z", {2, 8, 4}), NodePhase::Recompute);    // 2 · 64 · 16
  b.node("linear", x, b.tensor("y", {2, 8, 32}), NodePhase::Forward);                   // not re-run
  b.node("rmsnorm", x, b.tensor("recompute.n", {2, 8, 16}), NodePhase::Recompute);      // bandwidth only
  const double products = 2.0 * 512 * 16 + 2.0 * 64 * 16;
  EXPECT_EQ(recompute_flops(b.graph, 0), products);

  const auto q = b.tensor("q", {2, 8, 4, 4});  // B 2, T 8, 4 heads of 4
  b.node("attention", q, b.tensor("recompute.o", {2, 8, 4, 4}), NodePhase::Recompute);
  EXPECT_EQ(recompute_flops(b.graph, 3), products + 2.0 * 256 * 3);
  EXPECT_EQ(recompute_flops(b.graph, 0), products + 2.0 * 256 * 8) << "unknown span: the row's 8 tokens";

  b.node("attention_fp8", q, b.tensor("recompute.o2", {2, 8, 4, 4}), NodePhase::Recompute, {{"window", 2}});
  EXPECT_EQ(recompute_flops(b.graph, 3), products + 2.0 * 256 * 3 + 2.0 * 256 * 3);
  EXPECT_EQ(recompute_flops(b.graph, 7), products + 2.0 * 256 * 7 + 2.0 * 256 * 4) << "a window of 2 caps the span at 4";
}

}  // namespace
}  // namespace surogate::compiler
