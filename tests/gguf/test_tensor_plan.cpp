// gguf/tensor_plan.h: llama.cpp's tensor names, and the encodings convert_hf_to_gguf.py and
// llama-quantize's Q4_K_M pick.
#include <map>

#include <gtest/gtest.h>

#include "gguf/tensor_plan.h"

namespace surogate::gguf {
namespace {

io::ModelConfig llama(int64_t hidden, int64_t layers, bool tied) {
  io::ModelConfig config;
  config.architecture = io::Architecture::Llama;
  config.vocab_size = 512;
  config.hidden_size = hidden;
  config.intermediate_size = 2 * hidden;
  config.num_hidden_layers = layers;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = hidden / 4;
  config.tie_word_embeddings = tied;
  config.rope.rotary_dim = config.head_dim;
  config.sliding_window_layers.assign(static_cast<size_t>(layers), false);
  return config;
}

std::map<std::string, PlannedTensor> plan_by_name(const io::ModelConfig& config, ExportType type) {
  const ModelFacts facts{"llama", true, config.num_hidden_layers, 0, config.num_attention_heads,
                         config.num_key_value_heads};
  std::map<std::string, PlannedTensor> by_name;
  for (PlannedTensor& tensor : plan_tensors(facts, config, models::parameter_specs(config), type)) {
    by_name[tensor.info.name] = tensor;
  }
  return by_name;
}

TEST(TensorPlan, NamesShapesAndConverterTypes) {
  const auto plan = plan_by_name(llama(256, 2, false), ExportType::F16);
  ASSERT_TRUE(plan.contains("token_embd.weight"));
  EXPECT_EQ(plan.at("token_embd.weight").info.dims, (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(plan.at("token_embd.weight").info.type, GgmlType::F16);
  EXPECT_EQ(plan.at("output_norm.weight").info.type, GgmlType::F32);
  EXPECT_EQ(plan.at("output.weight").info.type, GgmlType::F16);
  EXPECT_EQ(plan.at("blk.1.attn_norm.weight").info.type, GgmlType::F32);
  EXPECT_EQ(plan.at("blk.1.ffn_down.weight").info.dims, (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(plan.at("blk.0.attn_k.weight").info.dims, (std::vector<int64_t>{256, 128}));
  EXPECT_EQ(plan.at("blk.0.attn_q.weight").permute_heads, 4);
  EXPECT_EQ(plan.at("blk.0.attn_k.weight").permute_heads, 2);
  EXPECT_EQ(plan.at("blk.0.attn_v.weight").permute_heads, 0);
  EXPECT_EQ(plan.size(), 3u + 2 * 9);
}

TEST(TensorPlan, Q8_0FallsBackToF16ForRowsThatAreNotWholeBlocks) {
  const auto plan = plan_by_name(llama(48, 1, true), ExportType::Q8_0);
  EXPECT_EQ(plan.at("blk.0.attn_q.weight").info.type, GgmlType::F16);  // rows of 48
  const auto aligned = plan_by_name(llama(64, 1, true), ExportType::Q8_0);
  EXPECT_EQ(aligned.at("blk.0.attn_q.weight").info.type, GgmlType::Q8_0);
  EXPECT_EQ(aligned.at("token_embd.weight").info.type, GgmlType::Q8_0);
}

TEST(TensorPlan, Q4_K_MMixFollowsLlamaQuantize) {
  // 16 layers: use_more_bits holds for layers 0, 1 (first eighth), 14, 15 (last eighth) and
  // 4, 7, 10, 13 ((i - 2) % 3 == 2).
  const auto plan = plan_by_name(llama(256, 16, false), ExportType::Q4_K_M);
  const std::vector<int> more_bits = {0, 1, 4, 7, 10, 13, 14, 15};
  for (int layer = 0; layer < 16; ++layer) {
    const bool more = std::find(more_bits.begin(), more_bits.end(), layer) != more_bits.end();
    EXPECT_EQ(use_more_bits(layer, 16), more) << layer;
    const GgmlType expected = more ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(plan.at("blk." + std::to_string(layer) + ".attn_v.weight").info.type, expected) << layer;
    EXPECT_EQ(plan.at("blk." + std::to_string(layer) + ".ffn_down.weight").info.type, expected) << layer;
    EXPECT_EQ(plan.at("blk." + std::to_string(layer) + ".attn_q.weight").info.type, GgmlType::Q4_K);
    EXPECT_EQ(plan.at("blk." + std::to_string(layer) + ".ffn_norm.weight").info.type, GgmlType::F32);
  }
  EXPECT_EQ(plan.at("output.weight").info.type, GgmlType::Q6_K);
  EXPECT_EQ(plan.at("token_embd.weight").info.type, GgmlType::Q4_K);
  // Tied embeddings: token_embd is the output and gets its type.
  const auto tied = plan_by_name(llama(256, 16, true), ExportType::Q4_K_M);
  EXPECT_FALSE(tied.contains("output.weight"));
  EXPECT_EQ(tied.at("token_embd.weight").info.type, GgmlType::Q6_K);
}

TEST(TensorPlan, Q4_K_MFallsBackForRowsThatAreNotSuperBlocks) {
  // Rows of 96: Q4_K → Q5_0, Q6_K → Q8_0; the output of a row not whole super-blocks is Q8_0.
  const auto plan = plan_by_name(llama(96, 8, false), ExportType::Q4_K_M);
  EXPECT_EQ(plan.at("blk.3.attn_q.weight").info.type, GgmlType::Q5_0);
  EXPECT_EQ(plan.at("blk.0.attn_v.weight").info.type, GgmlType::Q8_0);
  EXPECT_EQ(plan.at("output.weight").info.type, GgmlType::Q8_0);
  // ffn_down has rows of 192 = intermediate: Q6_K → Q8_0 where use_more_bits holds (layers 0, 3, 6, 7
  // of 8), Q4_K → Q5_0 elsewhere.
  EXPECT_EQ(plan.at("blk.0.ffn_down.weight").info.type, GgmlType::Q8_0);
  EXPECT_EQ(plan.at("blk.3.ffn_down.weight").info.type, GgmlType::Q8_0);
  EXPECT_EQ(plan.at("blk.2.ffn_down.weight").info.type, GgmlType::Q5_0);
}

}  // namespace
}  // namespace surogate::gguf
