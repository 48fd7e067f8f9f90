// The trainable-head loss rewrite (compiler/loss_input_grad.h): with a trainable LM head (full
// fine-tuning, tied or untied), compile_training turns lm_head_loss into lm_head_loss_with_grads,
// which writes ∂loss/∂hidden and ∂loss/∂weight in the forward's pass over the logits; the backward
// only scales them by d_loss (scale_by), so it never recomputes the logits. A one-layer decoder's
// training step (F32, the CPU trainer's dtype) gives the same loss and every parameter gradient —
// the head or the tied embedding included — bit for bit as the plan compiled without the rewrite
// (lm_head_loss_backward recomputing the logits): the seeded d_loss is exactly 1, so scale_by
// changes no bit, and the contributions meet in the same order. Token weights, several chunks and
// a head trained alone (nothing below it needs d_hidden) are covered too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

struct HeadCase {
  bool tied = true;
  bool weighted = false;      // the optional token-weights input (loss_scale strategies)
  int64_t chunks = 1;
  bool head_only = false;     // every other parameter frozen: only the head is trained
};

std::string describe(const HeadCase& c) {
  return std::string(c.tied ? "tied" : "untied") + (c.weighted ? ", weighted" : "") + ", chunks " +
         std::to_string(c.chunks) + (c.head_only ? ", head only" : "");
}

constexpr int64_t kBatch = 2, kSeq = 5, kHidden = 8, kHeads = 4, kKvHeads = 2, kHeadDim = 2, kInter = 6, kVocab = 13;
const std::vector<int32_t> kIds{1, 5, 12, 0, 3, 7, 7, 2, 9, 11};
const std::vector<int32_t> kPositions{0, 1, 2, 0, 1, 0, 1, 2, 3, 4};
const std::vector<int32_t> kDocuments{0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
const std::vector<int32_t> kTargets{5, 12, -100, 3, -100, 7, 2, 9, 11, 4};
const std::vector<float> kTokenWeights{1.0f, 0.5f, 0.0f, 2.0f, 0.0f, 1.0f, 1.0f, 0.25f, 1.0f, 3.0f};

// One decoder layer (GQA attention with RoPE over packed documents, SwiGLU MLP), the final norm
// and the loss over the tied embedding or an own head. Returns the loss.
TensorId build_decoder(GraphBuilder& b, const HeadCase& c) {
  const bool body = !c.head_only;
  TensorId ids = b.input("input_ids", DType::I32, {kBatch, kSeq});
  TensorId positions = b.input("position_ids", DType::I32, {kBatch, kSeq});
  TensorId docs = b.input("document_ids", DType::I32, {kBatch, kSeq});
  TensorId targets = b.input("targets", DType::I32, {kBatch, kSeq});
  TensorId embed = b.parameter("embed.weight", DType::F32, {kVocab, kHidden}, body || c.tied);
  auto param = [&](const std::string& name, Shape shape) { return b.parameter(name, DType::F32, shape, body); };
  auto tables = b.op("rope_cos_sin", {positions}, {{"rotary_dim", kHeadDim}, {"theta", 10000.0}, {"dtype", "F32"}});
  TensorId h = b.op("embedding", {ids, embed});
  TensorId n1 = b.op("rmsnorm", {h, param("ln1.weight", {kHidden})}, {{"eps", 1e-6}});
  TensorId q = b.op("linear", {n1, param("q.weight", {kHeads * kHeadDim, kHidden})});
  TensorId k = b.op("linear", {n1, param("k.weight", {kKvHeads * kHeadDim, kHidden})});
  TensorId v = b.op("linear", {n1, param("v.weight", {kKvHeads * kHeadDim, kHidden})});
  q = b.op("rope", {q, tables[0], tables[1]}, {{"heads", kHeads}, {"head_dim", kHeadDim}});
  k = b.op("rope", {k, tables[0], tables[1]}, {{"heads", kKvHeads}, {"head_dim", kHeadDim}});
  TensorId context = b.op("attention", {q, k, v, docs},
                          {{"query_heads", kHeads}, {"kv_heads", kKvHeads}, {"head_dim", kHeadDim}, {"window", 0}});
  TensorId attention_out = b.op("linear", {context, param("o.weight", {kHidden, kHeads * kHeadDim})});
  auto fused = b.op("fused_residual_rmsnorm", {h, attention_out, param("ln2.weight", {kHidden})}, {{"eps", 1e-6}});
  TensorId gate = b.op("linear", {fused[0], param("gate.weight", {kInter, kHidden})});
  TensorId up = b.op("linear", {fused[0], param("up.weight", {kInter, kHidden})});
  TensorId down = b.op("linear", {b.op("swiglu", {gate, up}), param("down.weight", {kHidden, kInter})});
  h = b.op("add", {fused[1], down});
  TensorId final_hidden = b.op("rmsnorm", {h, param("final_norm.weight", {kHidden})}, {{"eps", 1e-6}});
  TensorId head = c.tied ? embed : b.parameter("lm_head.weight", DType::F32, {kVocab, kHidden});
  TensorId scale = b.parameter("loss_scale", DType::F32, {}, false);
  std::vector<TensorId> inputs{final_hidden, head, targets, scale};
  if (c.weighted) inputs.push_back(b.input("loss_weights", DType::F32, {kBatch, kSeq}));
  return b.op("lm_head_loss", inputs, {{"chunks", c.chunks}}, "loss")[0];
}

struct StepResult {
  std::vector<float> loss;
  std::vector<std::vector<float>> gradients;  // by parameter name, in the plan's map order
  std::vector<std::string> names;
};

StepResult train_step(const HeadCase& c, bool rewrite) {
  GraphBuilder builder(registry());
  TensorId loss = build_decoder(builder, c);
  builder.mark_output(loss);
  compiler::CompileOptions options;
  options.loss_input_grad_in_forward = rewrite;
  Run run{compiler::compile_training(builder.finish(), loss, registry(), options), {}};
  const graph::Graph& g = run.plan.graph;
  int trainable_form = 0, recomputes_logits = 0;
  for (const graph::Node& node : g.nodes) {
    trainable_form += node.op == "lm_head_loss_with_grads";
    recomputes_logits += node.op == "lm_head_loss_backward";
  }
  EXPECT_EQ(trainable_form, rewrite ? 1 : 0) << describe(c);
  EXPECT_EQ(recomputes_logits, rewrite ? 0 : 1) << describe(c);
  run.backend.load(run.plan, registry());
  uint32_t seed = 21;
  for (TensorId id : g.parameters) {
    const std::vector<double> values = random_doubles(static_cast<size_t>(g.tensor(id).type.numel()), seed++, 0.5);
    std::vector<float> floats(values.begin(), values.end());
    if (g.tensor(id).name == "loss_scale") floats.assign(1, 1.0f / 6.0f);
    run.backend.write(id, std::as_bytes(std::span<const float>(floats)));
  }
  auto write_ints = [&](const char* name, const std::vector<int32_t>& values) {
    run.backend.write(g.require_tensor(name), std::as_bytes(std::span<const int32_t>(values)));
  };
  write_ints("input_ids", kIds);
  write_ints("position_ids", kPositions);
  write_ints("document_ids", kDocuments);
  write_ints("targets", kTargets);
  if (c.weighted) run.backend.write(g.require_tensor("loss_weights"), std::as_bytes(std::span<const float>(kTokenWeights)));
  run.backend.zero_gradients();
  run.backend.execute({});
  StepResult result;
  result.loss.resize(1);
  run.backend.read(run.plan.loss, std::as_writable_bytes(std::span<float>(result.loss)));
  for (const auto& [parameter, gradient] : run.plan.parameter_gradients) {
    std::vector<float> values(static_cast<size_t>(g.tensor(parameter).type.numel()));
    run.backend.read(gradient, std::as_writable_bytes(std::span<float>(values)));
    result.names.push_back(g.tensor(parameter).name);
    result.gradients.push_back(std::move(values));
  }
  return result;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(OpsDefs, LmHeadLossTrainableHeadGradientsComeFromTheForward) {
  const std::vector<HeadCase> cases = {
      {.tied = true},
      {.tied = false},
      {.tied = true, .weighted = true},
      {.tied = false, .weighted = true, .chunks = 3},
      {.tied = true, .chunks = 4},
      {.tied = false, .head_only = true},
  };
  for (const HeadCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const StepResult rewritten = train_step(c, true), reference = train_step(c, false);
    EXPECT_TRUE(std::isfinite(reference.loss[0]));
    EXPECT_TRUE(same_bits(rewritten.loss, reference.loss)) << rewritten.loss[0] << " vs " << reference.loss[0];
    ASSERT_EQ(rewritten.names, reference.names);
    const std::string head = c.tied ? "embed.weight" : "lm_head.weight";
    EXPECT_NE(std::find(reference.names.begin(), reference.names.end(), head), reference.names.end());
    EXPECT_EQ(reference.names.size(), c.head_only ? 1u : c.tied ? 11u : 12u);
    for (size_t i = 0; i < reference.names.size(); ++i) {
      bool nonzero = false;
      for (float value : reference.gradients[i]) nonzero |= value != 0.0f;
      EXPECT_TRUE(nonzero) << reference.names[i] << ": a zero gradient would make the comparison vacuous";
      EXPECT_TRUE(same_bits(rewritten.gradients[i], reference.gradients[i])) << "gradient of " << reference.names[i];
    }
  }
}

// A gradient can reach only the loss output: the saved derivatives are not differentiable.
TEST(OpsDefs, LmHeadLossWithGradsRefusesGradientsOfItsDerivatives) {
  GraphBuilder b(registry());
  TensorId labels = b.input("targets", DType::I32, {2, 4});
  TensorId hidden = b.parameter("hidden", DType::F64, {2, 4, 6});
  TensorId weight = b.parameter("weight", DType::F64, {11, 6});
  TensorId scale = b.parameter("loss_scale", DType::F64, {}, false);
  auto outs = b.op("lm_head_loss_with_grads", {hidden, weight, labels, scale});
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_EQ(b.type(outs[3]), b.type(weight));
  TensorId loss = b.op("add", {outs[0], probe_loss(b, outs[3])});
  b.mark_output(loss);
  EXPECT_THROW(compiler::compile_training(b.finish(), loss, registry()), UserError);
}

}  // namespace
}  // namespace surogate
