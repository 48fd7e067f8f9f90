// low_rank_products (src/ops/defs/low_rank_products_def.cpp) on the CPU backend: each output is
// scale · (x · a_iᵀ) · b_iᵀ as the linear, linear, scale chain computes it, for one to three
// adapters over one x with leading dimensions; the shape rules name the factor that is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

TEST(OpsDefs, LowRankProductsAreTheChainOfLinears) {
  for (size_t adapters = 1; adapters <= 3; ++adapters) {
    SCOPED_TRACE(::testing::Message() << adapters << " adapters");
    GraphBuilder b(registry());
    TensorId x = b.parameter("x", DType::F64, {2, 3, 32}, false);
    std::vector<TensorId> factors{x}, a, bs;
    const int64_t ranks[] = {4, 16, 8}, widths[] = {24, 8, 40};
    for (size_t i = 0; i < adapters; ++i) a.push_back(b.parameter("a" + std::to_string(i), DType::F64, {ranks[i], 32}, false));
    for (size_t i = 0; i < adapters; ++i) bs.push_back(b.parameter("b" + std::to_string(i), DType::F64, {widths[i], ranks[i]}, false));
    factors.insert(factors.end(), a.begin(), a.end());
    factors.insert(factors.end(), bs.begin(), bs.end());
    graph::OpOutputs fused = b.op("low_rank_products", factors, {{"scale", 1.5}});
    std::vector<TensorId> chained;
    for (size_t i = 0; i < adapters; ++i) {
      TensorId down = b.op("linear", {x, a[i]});
      chained.push_back(b.op("scale", {b.op("linear", {down, bs[i]})}, {{"factor", 1.5}}));
      EXPECT_EQ(b.type(fused[i]), (graph::TensorType{DType::F64, {2, 3, widths[i]}}));
      b.mark_output(fused[i]);
      b.mark_output(chained.back());
    }
    ForwardRun run(b, 3);
    run.backend.execute({});
    for (size_t i = 0; i < adapters; ++i) {
      const std::vector<double> got = run.read(fused[i]), want = run.read(chained[i]);
      ASSERT_EQ(got.size(), want.size());
      double largest = 0.0;
      for (size_t j = 0; j < want.size(); ++j) {
        largest = std::max(largest, std::abs(want[j]));
        EXPECT_NEAR(got[j], want[j], 1e-12 * std::max(1.0, std::abs(want[j]))) << "adapter " << i << " element " << j;
      }
      EXPECT_GT(largest, 0.1);  // not a comparison of zeros
    }
  }
}

TEST(OpsDefs, LowRankProductsShapeRules) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F64, {4, 32}, false);
  TensorId a = b.parameter("a", DType::F64, {8, 32}, false), wide = b.parameter("wide", DType::F64, {8, 16}, false);
  TensorId up = b.parameter("up", DType::F64, {24, 8}, false), narrow = b.parameter("narrow", DType::F64, {24, 4}, false);
  TensorId single = b.parameter("single", DType::F32, {24, 8}, false);
  EXPECT_THROW(b.op("low_rank_products", {x, a}), UserError);                // a without its b
  EXPECT_THROW(b.op("low_rank_products", {x, wide, up}), UserError);         // a's K is not x's
  EXPECT_THROW(b.op("low_rank_products", {x, a, narrow}), UserError);        // b's rank is not a's
  EXPECT_THROW(b.op("low_rank_products", {x, a, single}), UserError);        // dtype
  EXPECT_THROW(b.op("low_rank_products", {x, a, a, a, a, up, up, up, up}), UserError);  // four adapters
  try {
    b.op("low_rank_products", {x, a, narrow});
    FAIL() << "expected a UserError";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("b_0 (input 2)"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace surogate
