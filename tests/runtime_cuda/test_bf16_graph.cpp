// BF16 decoder graphs without a GPU (runs in CI): the shape rules accept BF16 parameters and
// activations and keep the side outputs F32 (rstd, logsumexp, loss), autodiff gives BF16
// gradients, and the CPU backend refuses the plan with a message naming the dtype (its kernels
// are fp32 / fp64 only). LoRA on a BF16 graph: adapters and the dropout path take BF16, F32 graphs
// keep F32 adapters; the adapter output is one linear_add in BF16 graphs, an add in F32 ones.
// F16 graphs (torch_dtype: float16 on the CUDA backend) are the BF16 graphs with F16: the same
// training plan, op for op, with every BF16 tensor F16 (full and LoRA with the CUDA forms).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/lora.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"

namespace surogate {
namespace {

io::ModelConfig fixture_config(const std::string& name) {
  return io::load_model_config(std::filesystem::path(SUROGATE_FIXTURES_DIR) / name);
}

TEST(Bf16DecoderGraph, SideOutputsStayF32AndGradientsAreBf16) {
  const graph::OpRegistry registry = ops::make_model_registry();
  models::DecoderGraphOptions options{.batch = 2, .sequence = 8, .lmhead_chunks = 2};
  options.dtype = DType::BF16;
  models::DecoderGraph decoder = models::build_decoder_graph(fixture_config("qwen3_qknorm"), registry, options);
  compiler::ExecutionPlan plan = compiler::compile_training(std::move(decoder.graph), decoder.loss, registry);
  EXPECT_EQ(plan.graph.tensor(plan.loss).type.dtype, DType::F32);
  int rstd = 0, logsumexp = 0;
  for (const graph::TensorInfo& tensor : plan.graph.tensors) {
    if (tensor.name.ends_with(".rstd")) {
      EXPECT_EQ(tensor.type.dtype, DType::F32) << tensor.name;
      ++rstd;
    }
    if (tensor.name.ends_with(".logsumexp")) {
      EXPECT_EQ(tensor.type.dtype, DType::F32) << tensor.name;
      ++logsumexp;
    }
    if (tensor.name.ends_with("q_proj.weight")) EXPECT_EQ(tensor.type.dtype, DType::BF16) << tensor.name;
  }
  EXPECT_GT(rstd, 0);
  EXPECT_GT(logsumexp, 0);
  ASSERT_FALSE(plan.parameter_gradients.empty());
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    EXPECT_EQ(plan.graph.tensor(gradient).type.dtype, DType::BF16) << plan.graph.tensor(gradient).name;
  }
}

TEST(Bf16DecoderGraph, F16TrainingPlansAreTheBf16PlansWithF16) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const io::ModelConfig config = fixture_config("qwen3_qknorm");
  models::LoraOptions lora{.rank = 4, .alpha = 8.0, .dropout = 0.1,
                           .target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
                           .batch_shared_inputs = true, .fuse_low_rank_backward = true};
  const std::vector<models::LoraAdapter> adapters = models::lora_adapters(config, lora);
  for (const bool with_lora : {false, true}) {
    SCOPED_TRACE(with_lora ? "LoRA" : "full");
    auto plan_in = [&](DType dtype) {
      models::DecoderGraphOptions options{.batch = 2, .sequence = 8, .lmhead_chunks = 2};
      options.dtype = dtype;
      models::DecoderGraph decoder = models::build_decoder_graph(config, registry, options);
      graph::Graph graph = std::move(decoder.graph);
      if (with_lora) graph = models::apply_lora(graph, registry, adapters, lora, true);
      return compiler::compile_training(std::move(graph), decoder.loss, registry);
    };
    const compiler::ExecutionPlan bf16 = plan_in(DType::BF16), f16 = plan_in(DType::F16);
    ASSERT_EQ(f16.graph.nodes.size(), bf16.graph.nodes.size());
    for (size_t i = 0; i < bf16.graph.nodes.size(); ++i) {
      EXPECT_EQ(f16.graph.nodes[i].op, bf16.graph.nodes[i].op) << bf16.graph.nodes[i].name;
    }
    ASSERT_EQ(f16.graph.tensors.size(), bf16.graph.tensors.size());
    int sixteen_bit = 0;
    for (size_t i = 0; i < bf16.graph.tensors.size(); ++i) {
      const DType expected = bf16.graph.tensors[i].type.dtype == DType::BF16 ? DType::F16 : bf16.graph.tensors[i].type.dtype;
      EXPECT_EQ(f16.graph.tensors[i].type.dtype, expected) << bf16.graph.tensors[i].name;
      sixteen_bit += expected == DType::F16;
    }
    EXPECT_GT(sixteen_bit, 20);
    EXPECT_EQ(f16.parameter_gradients.size(), bf16.parameter_gradients.size());
  }
}

TEST(Bf16DecoderGraph, CpuBackendRefusesWithTheDtype) {
  const graph::OpRegistry registry = ops::make_model_registry();
  models::DecoderGraphOptions options{.batch = 1, .sequence = 8};
  options.dtype = DType::BF16;
  models::DecoderGraph decoder = models::build_decoder_graph(fixture_config("llama_bias_untied"), registry, options);
  compiler::ExecutionPlan plan = compiler::compile_training(std::move(decoder.graph), decoder.loss, registry);
  runtime::CpuBackend backend;
  try {
    backend.load(plan, registry);
    FAIL() << "the CPU backend accepted a BF16 plan";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("BF16"), std::string::npos) << error.what();
  }
}


TEST(Bf16DecoderGraph, LoraAdaptersTakeTheBaseWeightDtype) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const io::ModelConfig config = fixture_config("qwen3_qknorm");
  models::LoraOptions lora{.rank = 4, .alpha = 8.0, .dropout = 0.1,
                           .target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}};
  const std::vector<models::LoraAdapter> adapters = models::lora_adapters(config, lora);
  for (DType dtype : {DType::F32, DType::BF16}) {
    models::DecoderGraphOptions options{.batch = 2, .sequence = 8, .lmhead_chunks = 2};
    options.dtype = dtype;
    models::DecoderGraph decoder = models::build_decoder_graph(config, registry, options);
    graph::Graph forward = models::apply_lora(decoder.graph, registry, adapters, lora, true);
    compiler::ExecutionPlan plan = compiler::compile_training(std::move(forward), decoder.loss, registry);
    ASSERT_EQ(plan.parameter_gradients.size(), 2 * adapters.size());
    for (const auto& [parameter, gradient] : plan.parameter_gradients) {
      EXPECT_EQ(plan.graph.tensor(parameter).type.dtype, dtype) << plan.graph.tensor(parameter).name;
      EXPECT_EQ(plan.graph.tensor(gradient).type.dtype, dtype) << plan.graph.tensor(gradient).name;
    }
    int forward_dropouts = 0, backward_dropouts = 0;
    for (const graph::Node& node : plan.graph.nodes) {
      if (node.op != "dropout" && node.op != "dropout_add") continue;
      (node.phase == graph::NodePhase::Forward ? forward_dropouts : backward_dropouts) += 1;
      EXPECT_EQ(plan.graph.tensor(node.outputs[0]).type.dtype, dtype) << node.name;
      // BF16 graphs fold the input's other gradient contributions into the dropout's backward.
      if (node.phase == graph::NodePhase::Backward) EXPECT_EQ(node.op == "dropout_add", dtype == DType::BF16) << node.name;
    }
    // One mask per distinct adapter input (ln1, attention output, ln2, SwiGLU output per layer),
    // and one backward per forward where the input gradient is needed.
    EXPECT_EQ(forward_dropouts, 4 * static_cast<int>(config.num_hidden_layers));
    EXPECT_GT(backward_dropouts, 0);
  }
}

// The adapter output: F32 graphs add(y, scale(linear(linear(x, A), B))) as before; BF16 graphs
// turn each adapted base node into linear_add(x, W, linear(linear(x, A), B){scale}) (the adapter
// output is the base matmul's addend), input gradients fold the fan-out sums
// (linear_backward_input_add) instead of separate products and adds, and the adapter gradients
// are written into their persistent gradients by the matmul (no accumulate nodes).
TEST(Bf16DecoderGraph, LoraOutputIsOneLinearAddInBf16Graphs) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const io::ModelConfig config = fixture_config("qwen3_qknorm");
  models::LoraOptions lora{.rank = 4, .alpha = 8.0, .dropout = 0.0,
                           .target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}};
  const std::vector<models::LoraAdapter> adapters = models::lora_adapters(config, lora);
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_safetensors_name(dtype));
    models::DecoderGraphOptions options{.batch = 2, .sequence = 8, .lmhead_chunks = 2};
    options.dtype = dtype;
    models::DecoderGraph decoder = models::build_decoder_graph(config, registry, options);
    graph::Graph forward = models::apply_lora(decoder.graph, registry, adapters, lora, true);
    std::map<std::string, int> lora_out_ops, lora_b_ops, base_ops;
    for (const graph::Node& node : forward.nodes) {
      if (node.name.ends_with(".lora_out")) ++lora_out_ops[node.op];
      if (node.name.ends_with(".lora_b")) ++lora_b_ops[node.op];
      if (node.inputs.size() >= 2 && forward.tensor(node.inputs[1]).name.ends_with("_proj.weight")) ++base_ops[node.op];
    }
    const int count = static_cast<int>(adapters.size());
    EXPECT_EQ(lora_b_ops, (std::map<std::string, int>{{"linear", count}}));
    if (dtype == DType::BF16) {
      EXPECT_TRUE(lora_out_ops.empty());
      EXPECT_EQ(base_ops, (std::map<std::string, int>{{"linear_add", count}}));
    } else {
      EXPECT_EQ(lora_out_ops, (std::map<std::string, int>{{"add", count}}));
      EXPECT_EQ(base_ops, (std::map<std::string, int>{{"linear", count}}));
    }
    compiler::ExecutionPlan plan = compiler::compile_training(std::move(forward), decoder.loss, registry);
    int folded = 0, accumulates = 0, fused_accumulates = 0;
    for (const graph::Node& node : plan.graph.nodes) {
      folded += node.op == "linear_backward_input_add";
      accumulates += node.op == "accumulate";
      fused_accumulates += node.op == "linear_backward_weight_accumulate";
    }
    // Every adapter gradient is one weight product: BF16 graphs compute it into the persistent
    // gradient (beta = 1), F32 graphs keep product + accumulate.
    EXPECT_EQ(accumulates, dtype == DType::BF16 ? 0 : 2 * count);
    EXPECT_EQ(fused_accumulates, dtype == DType::BF16 ? 2 * count : 0);
    if (dtype == DType::BF16) {
      // With fuse_low_rank_backward each B product's two gradients come from one op, which also
      // writes B's persistent gradient; the A gradients stay weight products.
      models::LoraOptions fused = lora;
      fused.fuse_low_rank_backward = true;
      models::DecoderGraph again = models::build_decoder_graph(config, registry, options);
      compiler::ExecutionPlan fused_plan = compiler::compile_training(
          models::apply_lora(again.graph, registry, adapters, fused, true), again.loss, registry);
      std::map<std::string, int> ops, unfused_ops;
      for (const graph::Node& node : fused_plan.graph.nodes) ++ops[node.op];
      for (const graph::Node& node : plan.graph.nodes) ++unfused_ops[node.op];
      EXPECT_EQ(ops["linear_backward_low_rank_accumulate"], count);
      EXPECT_EQ(ops["linear_backward_weight_accumulate"], count);
      EXPECT_EQ(ops["accumulate"], 0);
      EXPECT_EQ(unfused_ops["linear_backward_input"] - ops["linear_backward_input"], count)
          << "d_x of every B product comes from the fused op";
    }
    if (dtype == DType::F32) {
      EXPECT_EQ(folded, 0);
    } else {
      // Per layer, one per consumer of a projection input after the first: the first norm's
      // output feeds q/k/v and their three lora_A (5), the attention output o and its lora_A (1),
      // the second norm's gate/up and theirs (3), the swiglu output down and its lora_A (1).
      // Layer 0's first norm output depends on no adapter, so it gets no gradient at all.
      EXPECT_EQ(folded, 10 * static_cast<int>(config.num_hidden_layers) - 5);
    }
  }
}

}  // namespace
}  // namespace surogate
