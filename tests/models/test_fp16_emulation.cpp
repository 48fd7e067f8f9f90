// The fp16 emulation rewrite (models/fp16_emulation.h) on the parity fixtures: every tensor the
// bf16 twin holds in 16 bits — parameters and activations — is read only through its round_fp16
// copy, the fp32 statistics (rstd, logsumexp, the loss) are not rounded, the graph verifies and
// trains (autodiff through round_fp16), and its loss is the fp32 loss up to fp16 rounding: close,
// not equal.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/execution_plan.h"
#include "models/decoder_graph.h"
#include "models/fp16_emulation.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "fixture_util.h"

namespace surogate::models {
namespace {

class Fp16Emulation : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp16Emulation, RoundsWhatTheGpuHoldsInSixteenBitsAndNothingElse) {
  const std::string name = GetParam();
  testing::Fixture fixture = testing::open_fixture(name);
  const graph::OpRegistry registry = ops::make_model_registry();
  DecoderGraphOptions options{.batch = fixture.batch, .sequence = fixture.sequence, .lmhead_chunks = 2};
  const DecoderGraph fp32 = build_decoder_graph(fixture.config, registry, options);
  options.dtype = DType::BF16;
  const std::set<std::string> sixteen_bit = sixteen_bit_tensors(build_decoder_graph(fixture.config, registry, options).graph);
  // The CUDA backend's fp16 graph (F16 wherever the bf16 one is BF16) names the same tensors.
  options.dtype = DType::F16;
  EXPECT_EQ(sixteen_bit_tensors(build_decoder_graph(fixture.config, registry, options).graph), sixteen_bit);
  const graph::Graph emulated = apply_fp16_emulation(fp32.graph, sixteen_bit);

  size_t rounded = 0;
  for (const graph::Node& node : emulated.nodes) {
    if (node.op == "round_fp16") {
      ++rounded;
      EXPECT_TRUE(sixteen_bit.contains(emulated.tensor(node.inputs[0]).name)) << node.name;
      continue;
    }
    for (graph::TensorId input : node.inputs) {
      const graph::TensorInfo& info = emulated.tensor(input);
      EXPECT_FALSE(sixteen_bit.contains(info.name)) << node.name << " reads " << info.name << " unrounded";
    }
  }
  EXPECT_GT(rounded, 10u);
  for (const graph::TensorInfo& info : emulated.tensors) {
    if (info.name.ends_with(".rstd") || info.name.ends_with(".logsumexp") || info.name == "loss") {
      EXPECT_FALSE(emulated.find_tensor(info.name + ".fp16").has_value()) << info.name << " is a statistic";
    }
  }

  auto loss_of = [&](graph::Graph graph) {
    const graph::TensorId loss = graph.outputs.at(0);
    compiler::ExecutionPlan plan = compiler::compile_training(std::move(graph), loss, registry);
    runtime::CpuBackend backend;
    backend.load(plan, registry);
    testing::load_weights(backend, plan, name, fixture.config, 1.0f / static_cast<float>(fixture.scored_tokens()));
    backend.zero_gradients();
    backend.execute(testing::bindings(plan, fixture));
    return static_cast<double>(backend.view<float>(plan.loss)[0]);
  };
  const double exact = loss_of(fp32.graph), rounded_loss = loss_of(emulated);
  EXPECT_NE(rounded_loss, exact);
  EXPECT_NEAR(rounded_loss, exact, 1e-2 * std::abs(exact));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp16Emulation,
                         ::testing::Values("llama_gqa_llama3", "mistral_sliding", "qwen2_bias_tied", "qwen3_qknorm"));

}  // namespace
}  // namespace surogate::models
