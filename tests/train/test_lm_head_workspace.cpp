// The LM head's scratch as the memory prediction counts it (train/device/memory_budget.h's
// lm_head_workspace_bytes, mirroring runtime/cuda_loss_ops.cpp): one chunk of 16-bit logits and
// the row losses, plus the fp32 [V, C] weight-gradient accumulator only for a trainable head whose
// rows are split into several chunks. With one chunk the weight-gradient GEMM writes the 16-bit
// d_weight itself: an arena tensor of the plan (the rewritten loss's output "loss.d_weight", kept
// from the forward to the backward's first step), which the dry run counts among the activations.
#include <gtest/gtest.h>

#include <string>

#include "compiler/execution_plan.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/lora.h"
#include "ops/defs/register_ops.h"
#include "train/device/memory_budget.h"

namespace surogate::train {
namespace {

constexpr int64_t kBatch = 2, kSequence = 8, kVocab = 64, kHidden = 16;

compiler::ExecutionPlan bf16_plan(int64_t chunks, bool lora) {
  const io::ModelConfig config = io::parse_model_config(
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 16,
      "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
      "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": true,
      "hidden_act": "silu"})",
      "test config.json");
  const graph::OpRegistry registry = ops::make_model_registry();
  models::DecoderGraphOptions options{.batch = kBatch, .sequence = kSequence, .lmhead_chunks = chunks};
  options.dtype = DType::BF16;
  models::DecoderGraph decoder = models::build_decoder_graph(config, registry, options);
  graph::Graph forward = std::move(decoder.graph);
  if (lora) {
    models::LoraOptions adapters{.rank = 2, .alpha = 4.0, .target_modules = {"q_proj", "v_proj"}};
    forward = models::apply_lora(forward, registry, models::lora_adapters(config, adapters), adapters, true);
  }
  return compiler::compile_training(std::move(forward), decoder.loss, registry);
}

bool has_op(const compiler::ExecutionPlan& plan, const std::string& op) {
  for (const graph::Node& node : plan.graph.nodes) {
    if (node.op == op) return true;
  }
  return false;
}

TEST(LmHeadWorkspace, TheFp32AccumulatorOnlyForATrainableHeadOverSeveralChunks) {
  const int64_t rows = kBatch * kSequence;
  auto base = [&](int64_t chunk_rows) { return static_cast<size_t>(chunk_rows * kVocab * 2 + rows * 4 + 16); };
  const size_t accumulator = static_cast<size_t>(kVocab * kHidden) * sizeof(float);

  const compiler::ExecutionPlan one_chunk = bf16_plan(1, false);
  EXPECT_TRUE(has_op(one_chunk, "lm_head_loss_with_grads"));
  EXPECT_EQ(lm_head_workspace_bytes(one_chunk), base(rows));
  // The 16-bit d_weight lives in the arena instead, from the loss node to its scale_by.
  const graph::TensorType& d_weight = one_chunk.graph.tensor(one_chunk.tensor("loss.d_weight")).type;
  EXPECT_EQ(d_weight, (graph::TensorType{DType::BF16, graph::Shape{kVocab, kHidden}}));
  EXPECT_EQ(one_chunk.placement(one_chunk.tensor("loss.d_weight")).storage, compiler::Storage::Arena);

  EXPECT_EQ(lm_head_workspace_bytes(bf16_plan(4, false)), base(rows / 4) + accumulator);
  // A frozen head (LoRA) has no weight gradient at all.
  const compiler::ExecutionPlan frozen = bf16_plan(4, true);
  EXPECT_TRUE(has_op(frozen, "lm_head_loss_with_input_grad"));
  EXPECT_EQ(lm_head_workspace_bytes(frozen), base(rows / 4));
}

// The attention backward's scratch (attention_workspace_bytes, mirroring runtime/cuda_attention_ops.cpp):
// cu_seqlens and cuDNN's document lengths and offsets (20 bytes a token, one more entry), and an fp32
// dQ accumulator with a row statistic per query head: tokens × Hq × (D + 1) floats. The fixture's
// 4 query heads of head_dim 4 (hidden 16).
TEST(AttentionWorkspace, OneFp32DqAccumulatorAndRowStatisticPerQueryHead) {
  const int64_t tokens = kBatch * kSequence;
  const compiler::ExecutionPlan training = bf16_plan(1, false);
  ASSERT_TRUE(has_op(training, "attention_backward"));
  EXPECT_EQ(attention_workspace_bytes(training), static_cast<size_t>(20 * (tokens + 1) + tokens * 4 * (4 + 1) * 4));
  // LoRA's plan has the same attention backward.
  EXPECT_EQ(attention_workspace_bytes(bf16_plan(4, true)), attention_workspace_bytes(training));
}

}  // namespace
}  // namespace surogate::train
