// Graph-level tests of the model op registrations (src/ops/defs): every op is put in a small
// graph built with GraphBuilder, compiled with compile_training, run on the CpuBackend in F64,
// and every parameter gradient is checked against central finite differences of the whole
// graph's loss (directional derivative along a random direction, step 1e-5, relative error
// < 1e-6; ops_defs_test_util.h). Floating operands are trainable parameters so activation
// gradients are checked too; the loss is sum(out · probe) with a frozen random probe. Plus a
// 2-layer Llama-shaped decoder, shape-rule errors, and the names the trainer's decoder builder
// relies on. The linear family is in test_linear_defs.cpp, concat / split in test_concat_split_defs.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

TEST(OpsDefs, Embedding) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId ids = b.input("ids", DType::I32, {2, 3});
        TensorId table = b.parameter("table", DType::F64, {7, 4});
        return probe_loss(b, b.op("embedding", {ids, table}));
      },
      {{"ids", {1, 3, 3, 0, 6, 1}}});
  EXPECT_EQ(checked, 1u);
}

TEST(OpsDefs, RmsnormGrouped) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3, 8});
        TensorId w = b.parameter("w", DType::F64, {4});
        return probe_loss(b, b.op("rmsnorm", {x, w}, {{"eps", 1e-5}}));
      },
      {});
  EXPECT_EQ(checked, 2u);
}

TEST(OpsDefs, FusedResidualRmsnormBothOutputs) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId r = b.parameter("r", DType::F64, {3, 6});
        TensorId x = b.parameter("x", DType::F64, {3, 6});
        TensorId w = b.parameter("w", DType::F64, {6});
        auto outs = b.op("fused_residual_rmsnorm", {r, x, w}, {{"eps", 1e-6}});  // (out, residual_out, rstd)
        return b.op("add", {probe_loss(b, outs[1], "probe_r"), probe_loss(b, outs[0], "probe_y")});
      },
      {});
  EXPECT_EQ(checked, 3u);
}

TEST(OpsDefs, FusedResidualRmsnormNormOnly) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId r = b.parameter("r", DType::F64, {3, 6});
        TensorId x = b.parameter("x", DType::F64, {3, 6});
        TensorId w = b.parameter("w", DType::F64, {6});
        auto outs = b.op("fused_residual_rmsnorm", {r, x, w}, {{"eps", 1e-6}});
        return probe_loss(b, outs[0]);
      },
      {});
  EXPECT_EQ(checked, 3u);
}

// A frozen norm weight (LoRA's base model): the backward node carries weight_grad false and has
// d_x as its only output, and the activations' gradients still match finite differences.
TEST(OpsDefs, NormsWithAFrozenWeightGiveNoWeightGradient) {
  const json rope_attrs{{"heads", 2}, {"head_dim", 8}, {"eps", 1e-6}, {"inv_freq", {1.0, 0.1, 0.01, 0.001}}};
  auto rmsnorm = [](GraphBuilder& b) {
    TensorId x = b.parameter("x", DType::F64, {2, 3, 8});
    return probe_loss(b, b.op("rmsnorm", {x, b.parameter("w", DType::F64, {4}, false)}, {{"eps", 1e-5}}));
  };
  auto fused_residual = [](GraphBuilder& b) {
    TensorId r = b.parameter("r", DType::F64, {3, 6});
    TensorId x = b.parameter("x", DType::F64, {3, 6});
    auto outs = b.op("fused_residual_rmsnorm", {r, x, b.parameter("w", DType::F64, {6}, false)}, {{"eps", 1e-6}});
    return b.op("add", {probe_loss(b, outs[1], "probe_r"), probe_loss(b, outs[0], "probe_y")});
  };
  auto fused_rope = [&](GraphBuilder& b) {
    TensorId positions = b.input("position_ids", DType::I32, {2, 3});
    TensorId q = b.parameter("q", DType::F64, {2, 3, 2 * 8});
    return probe_loss(b, b.op("fused_rmsnorm_rope", {q, b.parameter("w", DType::F64, {8}, false), positions}, rope_attrs));
  };
  const IntInputs positions{{"position_ids", {0, 1, 2, 0, 1, 2}}};
  EXPECT_EQ(check_gradients(rmsnorm, {}), 1u);
  EXPECT_EQ(check_gradients(fused_residual, {}), 2u);
  EXPECT_EQ(check_gradients(fused_rope, positions), 1u);
  const std::pair<std::function<TensorId(GraphBuilder&)>, const char*> cases[] = {
      {rmsnorm, "rmsnorm_backward"},
      {fused_residual, "fused_residual_rmsnorm_backward"},
      {fused_rope, "fused_rmsnorm_rope_backward"}};
  for (const auto& [build, backward_op] : cases) {
    GraphBuilder b(registry());
    TensorId loss = build(b);
    b.mark_output(loss);
    compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
    int found = 0;
    for (const graph::Node& node : plan.graph.nodes) {
      if (node.op != backward_op) continue;
      ++found;
      EXPECT_EQ(node.outputs.size(), 1u) << backward_op;
      EXPECT_EQ(node.attrs.value("weight_grad", true), false) << backward_op;
    }
    EXPECT_EQ(found, 1) << backward_op;
  }
}

// scale_by: a tensor times a scalar tensor (the frozen-head loss backward's d_loss · d_hidden);
// the gradient of x matches finite differences; the factor must be a scalar of the statistic dtype
// and is not differentiable.
TEST(OpsDefs, ScaleBy) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId x = b.parameter("x", DType::F64, {2, 3});
        TensorId factor = b.parameter("factor", DType::F64, {}, false);
        return probe_loss(b, b.op("scale_by", {x, factor}));
      },
      {}, {{"factor", -1.75}});
  EXPECT_EQ(checked, 1u);
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {2, 3});
  EXPECT_THROW(b.op("scale_by", {x, b.parameter("v", DType::F32, {1})}), UserError);    // not a scalar
  EXPECT_THROW(b.op("scale_by", {x, b.parameter("d", DType::F64, {})}), UserError);     // not x's dtype
  TensorId bf16 = b.parameter("h", DType::BF16, {2, 3});
  EXPECT_THROW(b.op("scale_by", {bf16, b.parameter("s16", DType::BF16, {})}), UserError);  // F32 for BF16 x
  EXPECT_EQ(b.type(b.op("scale_by", {bf16, b.parameter("s32", DType::F32, {})})), b.type(bf16));
  GraphBuilder with_trainable_factor(registry());
  TensorId x2 = with_trainable_factor.parameter("x", DType::F32, {2, 3});
  TensorId factor = with_trainable_factor.parameter("factor", DType::F32, {});
  TensorId loss = with_trainable_factor.op("sum", {with_trainable_factor.op("scale_by", {x2, factor})});
  with_trainable_factor.mark_output(loss);
  try {
    compiler::compile_training(with_trainable_factor.finish(), loss, registry());
    ADD_FAILURE() << "a trainable factor was accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("not differentiable"), std::string::npos) << error.what();
  }
}

TEST(OpsDefs, Swiglu) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId gate = b.parameter("gate", DType::F64, {2, 3, 5});
        TensorId up = b.parameter("up", DType::F64, {2, 3, 5});
        TensorId gate_up = b.parameter("gate_up", DType::F64, {4, 6});
        return b.op("add", {probe_loss(b, b.op("swiglu", {gate, up}), "p1"),
                            probe_loss(b, b.op("swiglu_fused", {gate_up}), "p2")});
      },
      {});
  EXPECT_EQ(checked, 3u);
}

TEST(OpsDefs, RopeFromConfigAttrsPartialRotary) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId positions = b.input("position_ids", DType::I32, {2, 5});
        json config{{"rope_type", "llama3"}, {"theta", 500000.0}, {"rotary_dim", 4}, {"factor", 8.0},
                    {"original_max_position_embeddings", 8}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                    {"dtype", "F64"}};
        auto tables = b.op("rope_cos_sin", {positions}, config);
        TensorId x4 = b.parameter("x4", DType::F64, {2, 5, 3, 6});
        TensorId flat = b.parameter("flat", DType::F64, {2, 5, 12});
        TensorId a = b.op("rope", {x4, tables[0], tables[1]});
        TensorId c = b.op("rope", {flat, tables[0], tables[1]}, {{"heads", 2}, {"head_dim", 6}});
        return b.op("add", {probe_loss(b, a, "p1"), probe_loss(b, c, "p2")});
      },
      {{"position_ids", {0, 1, 2, 0, 1, 3, 4, 5, 6, 7}}});
  EXPECT_EQ(checked, 2u);
}

// Qwen3's q/k norm + RoPE: full rotary on a flat projection, partial rotary with a scaling.
TEST(OpsDefs, FusedRmsnormRopeFullAndPartialRotary) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId positions = b.input("position_ids", DType::I32, {2, 5});
        TensorId q = b.parameter("q", DType::F64, {2, 5, 3 * 8});
        TensorId wq = b.parameter("wq", DType::F64, {8});
        TensorId k = b.parameter("k", DType::F64, {2, 5, 2 * 8});
        TensorId wk = b.parameter("wk", DType::F64, {8});
        json full{{"heads", 3}, {"head_dim", 8}, {"eps", 1e-6}, {"inv_freq", {1.0, 0.1, 0.01, 0.001}}};
        json partial{{"heads", 2},       {"head_dim", 8},          {"eps", 1e-6},
                     {"inv_freq", {0.7, 0.05}}, {"attention_scaling", 1.2}};
        TensorId a = b.op("fused_rmsnorm_rope", {q, wq, positions}, full);
        TensorId c = b.op("fused_rmsnorm_rope", {k, wk, positions}, partial);
        return b.op("add", {probe_loss(b, a, "p1"), probe_loss(b, c, "p2")});
      },
      {{"position_ids", {0, 1, 2, 0, 1, 3, 4, 5, 6, 7}}});
  EXPECT_EQ(checked, 4u);
}

// In F32 (the CPU oracle's dtype) the fused op's output and gradients are the unfused graph's
// rmsnorm → rope_cos_sin → rope bit for bit: the decoder's switch to it changes no CPU result.
TEST(OpsDefs, FusedRmsnormRopeEqualsUnfusedGraphInF32) {
  const std::vector<int32_t> positions{0, 1, 2, 3, 0, 1, 0, 1, 2, 3, 4, 5};
  const json inv_freq = {1.0, 0.31622776601683794, 0.1, 0.031622776601683794};
  auto run = [&](bool fused) {
    GraphBuilder b(registry());
    TensorId ids = b.input("position_ids", DType::I32, {2, 6});
    TensorId x = b.parameter("x", DType::F32, {2, 6, 2 * 8});
    TensorId w = b.parameter("w", DType::F32, {8});
    TensorId out;
    if (fused) {
      out = b.op("fused_rmsnorm_rope", {x, w, ids},
                 {{"heads", 2}, {"head_dim", 8}, {"eps", 1e-6}, {"inv_freq", inv_freq}, {"attention_scaling", 1.1}});
    } else {
      TensorId normed = b.op("rmsnorm", {x, w}, {{"eps", 1e-6}});
      auto tables = b.op("rope_cos_sin", {ids}, {{"inv_freq", inv_freq}, {"attention_scaling", 1.1}});
      out = b.op("rope", {normed, tables[0], tables[1]}, {{"heads", 2}, {"head_dim", 8}});
    }
    TensorId probe = b.parameter("probe", DType::F32, b.type(out).shape, false);
    TensorId loss = b.op("sum", {b.op("mul", {out, probe})});
    b.mark_output(out);
    b.mark_output(loss);
    compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
    runtime::CpuBackend backend;
    backend.load(plan, registry());
    uint32_t seed = 5;
    for (const char* name : {"x", "w", "probe"}) {
      TensorId id = plan.tensor(name);
      auto values = random_doubles(static_cast<size_t>(plan.graph.tensor(id).type.numel()), seed++, 1.5);
      std::vector<float> floats(values.begin(), values.end());
      backend.write(id, std::as_bytes(std::span<const float>(floats)));
    }
    runtime::InputBinding input{plan.tensor("position_ids"), std::as_bytes(std::span<const int32_t>(positions))};
    backend.zero_gradients();
    backend.execute(std::span<const runtime::InputBinding>(&input, 1));
    std::vector<std::vector<float>> results;
    const TensorId d_x = plan.parameter_gradients.at(plan.tensor("x"));
    const TensorId d_w = plan.parameter_gradients.at(plan.tensor("w"));
    for (TensorId id : {out, d_x, d_w}) {
      std::vector<float> values(static_cast<size_t>(plan.graph.tensor(id).type.numel()));
      backend.read(id, std::as_writable_bytes(std::span<float>(values)));
      results.push_back(std::move(values));
    }
    return results;
  };
  const auto fused = run(true), unfused = run(false);
  EXPECT_EQ(fused[0], unfused[0]) << "out";
  EXPECT_EQ(fused[1], unfused[1]) << "d_x";
  EXPECT_EQ(fused[2], unfused[2]) << "d_weight";
}

TEST(OpsDefs, FusedRmsnormRopeShapeRules) {
  GraphBuilder b(registry());
  TensorId ids = b.input("ids", DType::I32, {2, 3});
  TensorId x = b.parameter("x", DType::F32, {2, 3, 16});
  TensorId w = b.parameter("w", DType::F32, {8});
  const json attrs{{"heads", 2}, {"head_dim", 8}, {"eps", 1e-6}, {"inv_freq", {1.0, 0.1, 0.01, 0.001}}};
  EXPECT_NO_THROW(b.op("fused_rmsnorm_rope", {x, w, ids}, attrs));
  json wide_rotary = attrs;
  wide_rotary["inv_freq"] = {1.0, 0.5, 0.25, 0.125, 0.0625};  // rotary_dim 10 > head_dim 8
  EXPECT_THROW(b.op("fused_rmsnorm_rope", {x, w, ids}, wide_rotary), UserError);
  json three_heads = attrs;
  three_heads["heads"] = 3;  // 3 · 8 != 16
  EXPECT_THROW(b.op("fused_rmsnorm_rope", {x, w, ids}, three_heads), UserError);
  EXPECT_THROW(b.op("fused_rmsnorm_rope", {x, w, b.input("few", DType::I32, {2})}, attrs), UserError);
  EXPECT_THROW(b.op("fused_rmsnorm_rope", {x, b.parameter("w16", DType::F32, {16}), ids}, attrs), UserError);
}

// Gradients of attention over two rows of 5 tokens (row 0: documents of 3 and 2 tokens), kv heads 2,
// head_dim 3, by finite differences; the number of gradients checked.
size_t attention_gradients_checked(int64_t query_heads, const json& attrs) {
  return check_gradients(
      [&](GraphBuilder& b) {
        TensorId docs = b.input("document_ids", DType::I32, {2, 5});
        TensorId q = b.parameter("q", DType::F64, {2, 5, query_heads, 3});
        TensorId k = b.parameter("k", DType::F64, {2, 5, 2, 3});
        TensorId v = b.parameter("v", DType::F64, {2, 5, 2, 3});
        return probe_loss(b, b.op("attention", {q, k, v, docs}, attrs));
      },
      {{"document_ids", {0, 0, 0, 1, 1, 0, 0, 0, 0, 0}}});
}

TEST(OpsDefs, AttentionGqaDocumentsWindow) { EXPECT_EQ(attention_gradients_checked(4, {{"window", 3}}), 3u); }

// causal: false (a vision tower's attention): every token sees its whole document; the gradient
// rule passes the attribute to the backward.
TEST(OpsDefs, BidirectionalAttentionWithinDocuments) {
  EXPECT_EQ(attention_gradients_checked(2, {{"causal", false}}), 3u);
  GraphBuilder b(registry());
  TensorId q = b.parameter("q", DType::F32, {1, 4, 2, 3});
  EXPECT_THROW(b.op("attention", {q, q, q}, {{"causal", false}, {"window", 2}}), UserError);
}

// attn_bwd_chunks: the backward over slices of the batch rows (2 + 1 rows, one row each, more
// chunks than rows) gives exactly the gradients of one pass (rows are independent).
TEST(OpsDefs, AttentionBackwardInChunksEqualsOnePass) {
  const std::vector<int32_t> documents{0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2};
  auto gradients = [&](int64_t chunks) {
    GraphBuilder b(registry());
    TensorId docs = b.input("document_ids", DType::I32, {3, 5});
    TensorId q = b.parameter("q", DType::F64, {3, 5, 4, 3});
    TensorId k = b.parameter("k", DType::F64, {3, 5, 2, 3});
    TensorId v = b.parameter("v", DType::F64, {3, 5, 2, 3});
    json attrs = {{"window", 4}};
    if (chunks > 1) attrs["backward_chunks"] = chunks;
    TensorId loss = probe_loss(b, b.op("attention", {q, k, v, docs}, attrs));
    b.mark_output(loss);
    compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
    runtime::CpuBackend backend;
    backend.load(plan, registry());
    uint32_t seed = 3;
    for (TensorId id : plan.graph.parameters) {
      auto values = random_doubles(static_cast<size_t>(plan.graph.tensor(id).type.numel()), seed++, 1.0);
      backend.write(id, std::as_bytes(std::span<const double>(values)));
    }
    runtime::InputBinding input{plan.tensor("document_ids"), std::as_bytes(std::span<const int32_t>(documents))};
    backend.zero_gradients();
    backend.execute(std::span<const runtime::InputBinding>(&input, 1));
    std::vector<std::vector<double>> result;
    for (const char* name : {"q", "k", "v"}) {
      const TensorId gradient = plan.parameter_gradients.at(plan.tensor(name));
      std::vector<double> values(static_cast<size_t>(plan.graph.tensor(gradient).type.numel()));
      backend.read(gradient, std::as_writable_bytes(std::span<double>(values)));
      result.push_back(std::move(values));
    }
    return result;
  };
  const auto whole = gradients(1);
  for (int64_t chunks : {2, 3, 5}) EXPECT_EQ(gradients(chunks), whole) << chunks << " chunks";
  GraphBuilder b(registry());
  TensorId q = b.parameter("q", DType::F64, {1, 2, 2, 2});
  EXPECT_THROW(b.op("attention", {q, q, q}, {{"backward_chunks", 0}}), UserError);
}

// round_fp16: the values an fp16 tensor holds (ties to even, overflow to inf, fp16 subnormals,
// NaN kept), F32 in and out; its gradient is the output gradient rounded the same way.
TEST(OpsDefs, RoundFp16RoundsAsFp16HoldsAndRoundsItsGradient) {
  const std::vector<float> inputs{1.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65519.0f, 65520.0f,
                                  -1e6f, 0x1p-24f, 0x1p-26f, 3.14159265f, std::nanf("")};
  const std::vector<float> expected{1.0f, 1.0f, 1.0f + 4 * 0x1p-11f, 65504.0f, 65504.0f, INFINITY,
                                    -INFINITY, 0x1p-24f, 0.0f, 3.140625f, std::nanf("")};
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {static_cast<int64_t>(inputs.size())});
  TensorId out = b.op("round_fp16", {x});
  TensorId probe = b.parameter("probe", DType::F32, {static_cast<int64_t>(inputs.size())}, false);
  TensorId loss = b.op("sum", {b.op("mul", {out, probe})});
  b.mark_output(out);
  b.mark_output(loss);
  compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());
  backend.write(plan.tensor("x"), std::as_bytes(std::span<const float>(inputs)));
  std::vector<float> probe_values(inputs.size(), 1.0f + 0x1p-12f);  // rounds to 1 in fp16
  probe_values[0] = 70000.0f;                                         // overflows in fp16
  backend.write(plan.tensor("probe"), std::as_bytes(std::span<const float>(probe_values)));
  backend.zero_gradients();
  backend.execute({});
  std::vector<float> values(inputs.size()), gradient(inputs.size());
  backend.read(out, std::as_writable_bytes(std::span<float>(values)));
  backend.read(plan.parameter_gradients.at(plan.tensor("x")), std::as_writable_bytes(std::span<float>(gradient)));
  for (size_t i = 0; i + 1 < inputs.size(); ++i) EXPECT_EQ(values[i], expected[i]) << "input " << inputs[i];
  EXPECT_TRUE(std::isnan(values.back()));
  EXPECT_EQ(gradient[0], INFINITY);
  for (size_t i = 1; i < inputs.size(); ++i) EXPECT_EQ(gradient[i], 1.0f) << i;
}

TEST(OpsDefs, AttentionFlatNoDocumentsCustomScale) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId q = b.parameter("q", DType::F64, {1, 6, 8});
        TensorId k = b.parameter("k", DType::F64, {1, 6, 4});
        TensorId v = b.parameter("v", DType::F64, {1, 6, 4});
        return probe_loss(b, b.op("attention", {q, k, v},
                                  {{"query_heads", 4}, {"kv_heads", 2}, {"head_dim", 2}, {"scale", 0.7}}));
      },
      {});
  EXPECT_EQ(checked, 3u);
}

const std::vector<int32_t> kLabels{3, -100, 0, 10, 5, -100, 7, 2};  // 6 valid of 8

TEST(OpsDefs, LmHeadCrossEntropyScaledMean) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId labels = b.input("labels", DType::I32, {2, 4});
        TensorId hidden = b.parameter("hidden", DType::F64, {2, 4, 6});
        TensorId weight = b.parameter("weight", DType::F64, {11, 6});
        TensorId scale = b.parameter("loss_scale", DType::F64, {}, false);
        auto outs = b.op("lm_head_cross_entropy", {hidden, weight, labels}, {{"chunks", 3}});
        return b.op("mul", {outs[0], scale});
      },
      {{"labels", kLabels}}, {{"loss_scale", 1.0 / 6.0}});
  EXPECT_EQ(checked, 2u);
}

TEST(OpsDefs, LmHeadCrossEntropyCountsValidTokens) {
  GraphBuilder b(registry());
  TensorId labels = b.input("labels", DType::I32, {8});
  TensorId hidden = b.parameter("hidden", DType::F64, {8, 6});
  TensorId weight = b.parameter("weight", DType::F64, {11, 6});
  auto outs = b.op("lm_head_cross_entropy", {hidden, weight, labels});
  b.mark_output(outs[0]);
  b.mark_output(outs[1]);
  auto plan = compiler::compile_forward(b.finish(), registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());
  auto h = random_doubles(48, 1, 0.5), w = random_doubles(66, 2, 0.5);
  backend.write(hidden, std::as_bytes(std::span<const double>(h)));
  backend.write(weight, std::as_bytes(std::span<const double>(w)));
  runtime::InputBinding input{labels, std::as_bytes(std::span<const int32_t>(kLabels))};
  backend.execute(std::span<const runtime::InputBinding>(&input, 1));
  double loss_sum = 0.0, valid = 0.0;
  backend.read(outs[0], std::as_writable_bytes(std::span<double>(&loss_sum, 1)));
  backend.read(outs[1], std::as_writable_bytes(std::span<double>(&valid, 1)));
  EXPECT_EQ(valid, 6.0);
  EXPECT_GT(loss_sum, 6.0 * std::log(11.0) * 0.5);  // near-uniform logits: about ln V per token
}

TEST(OpsDefs, LmHeadLossStopGapConvention) {
  size_t checked = check_gradients(
      [](GraphBuilder& b) {
        TensorId labels = b.input("targets", DType::I32, {2, 4});
        TensorId hidden = b.parameter("hidden", DType::F64, {2, 4, 6});
        TensorId weight = b.parameter("weight", DType::F64, {11, 6});
        TensorId scale = b.parameter("loss_scale", DType::F64, {}, false);
        return b.op("lm_head_loss", {hidden, weight, labels, scale}, {{"chunks", 2}})[0];
      },
      {{"targets", kLabels}}, {{"loss_scale", 0.25}});
  EXPECT_EQ(checked, 2u);
}

// A frozen head: compile_training rewrites lm_head_loss to lm_head_loss_with_input_grad
// (compiler/loss_input_grad.h), whose backward only scales the saved ∂loss/∂hidden by d_loss.
// The hidden gradient still matches finite differences, and equals bit for bit the one of the plan
// compiled without the rewrite (lm_head_loss_backward); a trainable head becomes
// lm_head_loss_with_grads instead (test_lm_head_grads_defs.cpp), with the same hidden gradient.
TEST(OpsDefs, LmHeadLossFrozenHeadGradientComesFromTheForward) {
  auto build = [](bool trainable_head) {
    return [trainable_head](GraphBuilder& b) {
      TensorId labels = b.input("targets", DType::I32, {2, 4});
      TensorId hidden = b.parameter("hidden", DType::F64, {2, 4, 6});
      TensorId weight = b.parameter("weight", DType::F64, {11, 6}, trainable_head);
      TensorId scale = b.parameter("loss_scale", DType::F64, {}, false);
      return b.op("lm_head_loss", {hidden, weight, labels, scale}, {{"chunks", 2}})[0];
    };
  };
  EXPECT_EQ(check_gradients(build(false), {{"targets", kLabels}}, {{"loss_scale", 0.25}}), 1u);

  auto hidden_gradient = [&](bool trainable_head, bool rewrite) {
    GraphBuilder builder(registry());
    TensorId loss = build(trainable_head)(builder);
    builder.mark_output(loss);
    compiler::CompileOptions options;
    options.loss_input_grad_in_forward = rewrite;
    ops_defs_testing::Run run{compiler::compile_training(builder.finish(), loss, registry(), options), {}};
    const graph::Graph& g = run.plan.graph;
    bool frozen_form = false, trainable_form = false, recomputes_logits = false;
    for (const graph::Node& node : g.nodes) {
      frozen_form |= node.op == "lm_head_loss_with_input_grad";
      trainable_form |= node.op == "lm_head_loss_with_grads";
      recomputes_logits |= node.op == "lm_head_loss_backward";
    }
    EXPECT_EQ(frozen_form, rewrite && !trainable_head);
    EXPECT_EQ(trainable_form, rewrite && trainable_head);
    EXPECT_EQ(recomputes_logits, !rewrite);
    run.backend.load(run.plan, registry());
    const std::vector<double> hidden = random_doubles(48, 3, 0.5), weight = random_doubles(66, 4, 0.5);
    const double scale = 0.25;
    run.backend.write(g.require_tensor("hidden"), std::as_bytes(std::span<const double>(hidden)));
    run.backend.write(g.require_tensor("weight"), std::as_bytes(std::span<const double>(weight)));
    run.backend.write(g.require_tensor("loss_scale"), std::as_bytes(std::span<const double>(&scale, 1)));
    run.backend.write(g.require_tensor("targets"), std::as_bytes(std::span<const int32_t>(kLabels)));
    run.step();
    std::vector<double> gradient(48);
    run.backend.read(run.plan.parameter_gradients.at(g.require_tensor("hidden")),
                     std::as_writable_bytes(std::span<double>(gradient)));
    return gradient;
  };
  const std::vector<double> from_forward = hidden_gradient(false, true);
  EXPECT_EQ(from_forward, hidden_gradient(false, false));
  EXPECT_EQ(from_forward, hidden_gradient(true, true));
}

// A 2-layer Llama-shaped decoder: tied embedding, GQA with RoPE (flat projections, attrs give
// the heads), packed documents, SwiGLU MLP, chunked loss scaled to a token mean.
TEST(OpsDefs, TwoLayerLlamaComposition) {
  const int64_t batch = 2, seq = 5, hidden_size = 8, heads = 4, kv_heads = 2, head_dim = 2, inter = 6, vocab = 13;
  size_t checked = check_gradients(
      [&](GraphBuilder& b) {
        TensorId ids = b.input("input_ids", DType::I32, {batch, seq});
        TensorId positions = b.input("position_ids", DType::I32, {batch, seq});
        TensorId docs = b.input("document_ids", DType::I32, {batch, seq});
        TensorId targets = b.input("targets", DType::I32, {batch, seq});
        TensorId embed = b.parameter("embed.weight", DType::F64, {vocab, hidden_size});
        auto tables = b.op("rope_cos_sin", {positions}, {{"rotary_dim", head_dim}, {"theta", 10000.0}, {"dtype", "F64"}});
        TensorId h = b.op("embedding", {ids, embed});
        for (int layer = 0; layer < 2; ++layer) {
          std::string p = "layers." + std::to_string(layer);
          auto param = [&](const std::string& name, Shape shape) { return b.parameter(p + name, DType::F64, shape); };
          TensorId n1 = b.op("rmsnorm", {h, param(".ln1.weight", {hidden_size})}, {{"eps", 1e-6}});
          TensorId q = b.op("linear", {n1, param(".q.weight", {heads * head_dim, hidden_size}), param(".q.bias", {heads * head_dim})});
          TensorId k = b.op("linear", {n1, param(".k.weight", {kv_heads * head_dim, hidden_size})});
          TensorId v = b.op("linear", {n1, param(".v.weight", {kv_heads * head_dim, hidden_size})});
          q = b.op("rope", {q, tables[0], tables[1]}, {{"heads", heads}, {"head_dim", head_dim}});
          k = b.op("rope", {k, tables[0], tables[1]}, {{"heads", kv_heads}, {"head_dim", head_dim}});
          TensorId context = b.op("attention", {q, k, v, docs},
                                  {{"query_heads", heads}, {"kv_heads", kv_heads}, {"head_dim", head_dim}, {"window", 0}});
          TensorId attention_out = b.op("linear", {context, param(".o.weight", {hidden_size, heads * head_dim})});
          auto fused = b.op("fused_residual_rmsnorm", {h, attention_out, param(".ln2.weight", {hidden_size})}, {{"eps", 1e-6}});
          TensorId gate = b.op("linear", {fused[0], param(".gate.weight", {inter, hidden_size})});
          TensorId up = b.op("linear", {fused[0], param(".up.weight", {inter, hidden_size})});
          TensorId down = b.op("linear", {b.op("swiglu", {gate, up}), param(".down.weight", {hidden_size, inter})});
          h = b.op("add", {fused[1], down});
        }
        TensorId final_hidden = b.op("rmsnorm", {h, b.parameter("final_norm.weight", DType::F64, {hidden_size})}, {{"eps", 1e-6}});
        TensorId scale = b.parameter("loss_scale", DType::F64, {}, false);
        auto loss = b.op("lm_head_cross_entropy", {final_hidden, embed, targets}, {{"chunks", 2}});
        return b.op("mul", {loss[0], scale});
      },
      {{"input_ids", {1, 5, 12, 0, 3, 7, 7, 2, 9, 11}},
       {"position_ids", {0, 1, 2, 0, 1, 0, 1, 2, 3, 4}},
       {"document_ids", {0, 0, 0, 1, 1, 0, 0, 0, 0, 0}},
       {"targets", {5, 12, -100, 3, -100, 7, 2, 9, 11, 4}}},
      {{"loss_scale", 1.0 / 8.0}});
  EXPECT_EQ(checked, 2u + 2u * 10u);
}

TEST(OpsDefs, ShapeRulesGiveReadableErrors) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {3, 5});
  TensorId w = b.parameter("w", DType::F32, {4, 6});
  try {
    b.op("linear", {x, w}, json::object(), "proj");
    FAIL() << "expected a UserError";
  } catch (const UserError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("proj"), std::string::npos) << message;
  }
  TensorId q = b.parameter("q", DType::F32, {1, 4, 3, 2});
  TensorId kv = b.parameter("kv", DType::F32, {1, 4, 2, 2});
  EXPECT_THROW(b.op("attention", {q, kv, kv}), UserError);  // 3 query heads over 2 kv heads
  TensorId ids = b.input("ids", DType::F32, {4});
  EXPECT_THROW(b.op("embedding", {ids, w}), UserError);
  EXPECT_THROW(b.op("rmsnorm", {x, b.parameter("n", DType::F32, {5})}), UserError);  // eps missing
}

// The ops the decoder builder (src/models/decoder_graph.cpp) emits.
TEST(OpsDefs, DecoderOpNamesAreRegistered) {
  for (const char* name : {"embedding", "embedding_backward", "rmsnorm", "rmsnorm_backward", "linear", "linear_backward",
                           "bias_gradient", "swiglu", "swiglu_backward", "rope_cos_sin", "rope", "rope_backward",
                           "attention", "attention_backward", "lm_head_loss", "lm_head_loss_backward", "lm_head_accuracy",
                           "lm_head_loss_with_input_grad", "lm_head_loss_with_grads", "scale_by",
                           "linear_backward_weight_accumulate", "linear_backward_low_rank",
                           "linear_backward_low_rank_accumulate", "concat", "split",
                           "fused_residual_rmsnorm", "fused_residual_rmsnorm_backward", "fused_rmsnorm_rope",
                           "fused_rmsnorm_rope_backward", "round_fp16"}) {
    EXPECT_NE(registry().find(name), nullptr) << name;
  }
}

}  // namespace
}  // namespace surogate
