// config.json of the mixture-of-experts architectures (io/model_config_moe.h): samples modelled
// on the released Qwen3-30B-A3B (transformers 4.x keys), Qwen1.5-MoE-A2.7B and Mixtral-8x7B
// configs, the spellings transformers 5 writes (num_local_experts for Qwen3-MoE, rope_parameters,
// Qwen2-MoE's qkv_bias, Mixtral's null head_dim), layer sparsity, the errors, and save → load.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io_test_helpers.h"

namespace surogate::io {
namespace {

using nlohmann::json;
using testing::expect_user_error;

json qwen3_30b_a3b() {
  return {{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"}, {"vocab_size", 151936},
          {"hidden_size", 2048}, {"intermediate_size", 6144}, {"num_hidden_layers", 48},
          {"num_attention_heads", 32}, {"num_key_value_heads", 4}, {"head_dim", 128}, {"rms_norm_eps", 1e-6},
          {"max_position_embeddings", 40960}, {"rope_theta", 1000000.0}, {"rope_scaling", nullptr},
          {"attention_bias", false}, {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"},
          {"decoder_sparse_step", 1}, {"moe_intermediate_size", 768}, {"num_experts", 128},
          {"num_experts_per_tok", 8}, {"norm_topk_prob", true}, {"mlp_only_layers", json::array()},
          {"output_router_logits", false}, {"router_aux_loss_coef", 0.001}, {"use_sliding_window", false},
          {"sliding_window", nullptr}, {"max_window_layers", 48}, {"bos_token_id", 151643}, {"eos_token_id", 151645}};
}

json qwen15_moe() {
  return {{"architectures", {"Qwen2MoeForCausalLM"}}, {"model_type", "qwen2_moe"}, {"vocab_size", 151936},
          {"hidden_size", 2048}, {"intermediate_size", 5632}, {"num_hidden_layers", 24},
          {"num_attention_heads", 16}, {"num_key_value_heads", 16}, {"rms_norm_eps", 1e-6},
          {"max_position_embeddings", 8192}, {"rope_theta", 1000000.0}, {"moe_intermediate_size", 1408},
          {"shared_expert_intermediate_size", 5632}, {"num_experts", 60}, {"num_experts_per_tok", 4},
          {"norm_topk_prob", false}, {"decoder_sparse_step", 1}, {"output_router_logits", false},
          {"router_aux_loss_coef", 0.001}, {"use_sliding_window", false}, {"sliding_window", 32768},
          {"max_window_layers", 21}, {"tie_word_embeddings", false}};
}

json mixtral_8x7b() {
  return {{"architectures", {"MixtralForCausalLM"}}, {"model_type", "mixtral"}, {"vocab_size", 32000},
          {"hidden_size", 4096}, {"intermediate_size", 14336}, {"num_hidden_layers", 32},
          {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"rms_norm_eps", 1e-5},
          {"max_position_embeddings", 32768}, {"rope_theta", 1e6}, {"sliding_window", nullptr},
          {"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"output_router_logits", false},
          {"router_aux_loss_coef", 0.02}, {"router_jitter_noise", 0.0}, {"tie_word_embeddings", false}};
}

ModelConfig parse(const json& config) { return parse_model_config(config.dump(), "model/config.json"); }

TEST(ModelConfigMoe, Qwen3MoeAsReleased) {
  const ModelConfig config = parse(qwen3_30b_a3b());
  EXPECT_EQ(config.architecture, Architecture::Qwen3Moe);
  EXPECT_TRUE(config.qk_norm);
  EXPECT_EQ(config.head_dim, 128);
  ASSERT_TRUE(config.moe.has_value());
  EXPECT_EQ(config.moe->experts, 128);
  EXPECT_EQ(config.moe->experts_per_token, 8);
  EXPECT_EQ(config.moe->expert_intermediate_size, 768);
  EXPECT_TRUE(config.moe->normalize_top_k);
  EXPECT_EQ(config.moe->shared_expert_intermediate_size, 0);
  EXPECT_EQ(config.moe->sparse_layers, std::vector<bool>(48, true));
  EXPECT_FALSE(config.moe->output_router_logits);
  EXPECT_DOUBLE_EQ(config.moe->router_aux_loss_coef, 0.001);
}

TEST(ModelConfigMoe, Qwen3MoeAsTransformers5WritesIt) {
  json config = qwen3_30b_a3b();
  config.erase("num_experts");
  config["num_local_experts"] = 16;  // transformers 5's attribute map writes this key
  config.erase("rope_theta");
  config.erase("rope_scaling");
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  config.erase("head_dim");  // Qwen3-MoE's default is hidden / heads, unlike Qwen3's 128
  config["num_hidden_layers"] = 6;
  config["mlp_only_layers"] = {0};
  config["decoder_sparse_step"] = 2;
  config["output_router_logits"] = true;
  const ModelConfig model = parse(config);
  EXPECT_EQ(model.moe->experts, 16);
  EXPECT_EQ(model.head_dim, 64);
  EXPECT_DOUBLE_EQ(model.rope.theta, 1e6);
  // Sparse where (i + 1) % 2 == 0 and i is not listed: layers 1, 3, 5.
  EXPECT_EQ(model.moe->sparse_layers, (std::vector<bool>{false, true, false, true, false, true}));
  EXPECT_TRUE(model.moe->output_router_logits);
}

TEST(ModelConfigMoe, Qwen2MoeSharedExpertAndBiases) {
  ModelConfig config = parse(qwen15_moe());
  EXPECT_EQ(config.architecture, Architecture::Qwen2Moe);
  EXPECT_TRUE(config.qkv_bias);  // transformers 4.x: always
  EXPECT_FALSE(config.o_proj_bias);
  EXPECT_FALSE(config.sliding_window.has_value());
  EXPECT_EQ(config.moe->experts, 60);
  EXPECT_EQ(config.moe->experts_per_token, 4);
  EXPECT_EQ(config.moe->expert_intermediate_size, 1408);
  EXPECT_EQ(config.moe->shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(config.moe->normalize_top_k);
  json without_bias = qwen15_moe();
  without_bias["qkv_bias"] = false;  // transformers 5's key
  EXPECT_FALSE(parse(without_bias).qkv_bias);
}

TEST(ModelConfigMoe, Mixtral) {
  json config = mixtral_8x7b();
  config["head_dim"] = nullptr;  // transformers 5 writes null
  const ModelConfig model = parse(config);
  EXPECT_EQ(model.architecture, Architecture::Mixtral);
  EXPECT_EQ(model.head_dim, 128);
  EXPECT_FALSE(model.sliding_window.has_value());
  EXPECT_EQ(model.moe->experts, 8);
  EXPECT_EQ(model.moe->experts_per_token, 2);
  EXPECT_EQ(model.moe->expert_intermediate_size, 14336);
  EXPECT_TRUE(model.moe->normalize_top_k);
  EXPECT_EQ(model.moe->sparse_layers, std::vector<bool>(32, true));
  EXPECT_DOUBLE_EQ(model.moe->router_aux_loss_coef, 0.02);
  json windowed = mixtral_8x7b();
  windowed["sliding_window"] = 4096;
  EXPECT_EQ(parse(windowed).sliding_window, 4096);
}

TEST(ModelConfigMoe, ErrorsNameTheKey) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& c) { c["num_experts_per_tok"] = 200; }, "num_experts_per_tok"},
      {[](json& c) { c["decoder_sparse_step"] = 0; }, "decoder_sparse_step"},
      {[](json& c) { c["mlp_only_layers"] = {48}; }, "mlp_only_layers"},
      {[](json& c) { c["use_sliding_window"] = true; }, "use_sliding_window"},
      {[](json& c) { c["router_aux_loss_coef"] = -1.0; }, "router_aux_loss_coef"},
  };
  for (const auto& [change, key] : cases) {
    json config = qwen3_30b_a3b();
    change(config);
    expect_user_error([&] { parse(config); }, {"model/config.json", key});
  }
  json jitter = mixtral_8x7b();
  jitter["router_jitter_noise"] = 0.01;
  expect_user_error([&] { parse(jitter); }, {"model/config.json", "router_jitter_noise"});
}

TEST(ModelConfigMoe, SaveThenLoadKeepsTheExperts) {
  for (const json& source : {qwen3_30b_a3b(), qwen15_moe(), mixtral_8x7b()}) {
    json changed = source;
    changed["output_router_logits"] = true;
    const ModelConfig model = parse(changed);
    const json written = json::parse(model_config_to_json(model));
    const ModelConfig again = parse(written);
    EXPECT_EQ(again.architecture, model.architecture);
    ASSERT_TRUE(again.moe.has_value());
    EXPECT_EQ(again.moe->experts, model.moe->experts);
    EXPECT_EQ(again.moe->experts_per_token, model.moe->experts_per_token);
    EXPECT_EQ(again.moe->expert_intermediate_size, model.moe->expert_intermediate_size);
    EXPECT_EQ(again.moe->shared_expert_intermediate_size, model.moe->shared_expert_intermediate_size);
    EXPECT_EQ(again.moe->normalize_top_k, model.moe->normalize_top_k);
    EXPECT_EQ(again.moe->sparse_layers, model.moe->sparse_layers);
    EXPECT_TRUE(again.moe->output_router_logits);
    EXPECT_EQ(again.qkv_bias, model.qkv_bias);
    // The expert count keeps the key the source used.
    EXPECT_EQ(written.contains("num_local_experts"), source.contains("num_local_experts"));
  }
}

}  // namespace
}  // namespace surogate::io
