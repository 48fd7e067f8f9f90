// Parameter lists and HF name mapping for every fixture config: names, shapes, flags, and the
// engine <-> HF round trip.
#include <gtest/gtest.h>

#include <set>

#include "io/model_config.h"
#include "models/model_spec.h"

namespace surogate::models {
namespace {

io::ModelConfig fixture_config(const std::string& name) {
  return io::load_model_config(std::filesystem::path(SUROGATE_FIXTURES_DIR) / name);
}

const ParameterSpec* find(const std::vector<ParameterSpec>& specs, const std::string& name) {
  for (const ParameterSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

TEST(ModelSpec, LlamaGqaNamesAndShapes) {
  io::ModelConfig config = fixture_config("llama_gqa_llama3");
  std::vector<ParameterSpec> specs = parameter_specs(config);
  // embed + 2 × (ln1, q, k, v, o, ln2, gate, up, down) + final norm + lm head
  EXPECT_EQ(specs.size(), 1u + 2u * 9u + 2u);
  const ParameterSpec* q = find(specs, "layers.1.attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->hf_name, "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(q->shape, (graph::Shape{32, 32}));
  const ParameterSpec* k = find(specs, "layers.0.attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (graph::Shape{16, 32}));  // 2 kv heads × head_dim 8
  EXPECT_EQ(find(specs, "lm_head.weight")->hf_name, "lm_head.weight");
  EXPECT_EQ(find(specs, "final_norm.weight")->hf_name, "model.norm.weight");
  EXPECT_EQ(find(specs, "layers.0.mlp.down_proj.weight")->shape, (graph::Shape{32, 48}));
  EXPECT_EQ(find(specs, "layers.0.attn.q_proj.bias"), nullptr);
}

TEST(ModelSpec, FlagsAddAndRemoveTensors) {
  std::vector<ParameterSpec> qwen2 = parameter_specs(fixture_config("qwen2_bias_tied"));
  EXPECT_NE(find(qwen2, "layers.0.attn.q_proj.bias"), nullptr);
  EXPECT_NE(find(qwen2, "layers.0.attn.v_proj.bias"), nullptr);
  EXPECT_EQ(find(qwen2, "layers.0.attn.o_proj.bias"), nullptr);
  EXPECT_EQ(find(qwen2, "lm_head.weight"), nullptr) << "tied: no lm_head";

  std::vector<ParameterSpec> qwen3 = parameter_specs(fixture_config("qwen3_qknorm"));
  const ParameterSpec* q_norm = find(qwen3, "layers.1.attn.q_norm.weight");
  ASSERT_NE(q_norm, nullptr);
  EXPECT_EQ(q_norm->hf_name, "model.layers.1.self_attn.q_norm.weight");
  EXPECT_EQ(q_norm->shape, (graph::Shape{8}));

  std::vector<ParameterSpec> biased = parameter_specs(fixture_config("llama_bias_untied"));
  EXPECT_NE(find(biased, "layers.0.attn.o_proj.bias"), nullptr);
  EXPECT_NE(find(biased, "layers.1.mlp.down_proj.bias"), nullptr);
  EXPECT_EQ(find(biased, "layers.0.attn.k_proj.weight")->shape, (graph::Shape{32, 32}));  // MHA
}

TEST(ModelSpec, Olmo2NormsFollowEachHalf) {
  io::ModelConfig config = fixture_config("llama_gqa_llama3");  // 4 heads, 2 kv heads, head_dim 8
  config.architecture = io::Architecture::Olmo2;
  config.qk_norm = true;
  std::vector<ParameterSpec> specs = parameter_specs(config);
  EXPECT_EQ(find(specs, "layers.0.ln1.weight"), nullptr) << "OLMo-2 has no input norm";
  EXPECT_EQ(find(specs, "layers.0.attn.q_norm.weight")->shape, (graph::Shape{32}));  // the whole q projection
  EXPECT_EQ(find(specs, "layers.0.attn.k_norm.weight")->shape, (graph::Shape{16}));
  EXPECT_EQ(find(specs, "layers.1.ln2.weight")->hf_name, "model.layers.1.post_attention_layernorm.weight");
  const ParameterSpec* post_mlp = find(specs, "layers.1.post_mlp_norm.weight");
  ASSERT_NE(post_mlp, nullptr);
  EXPECT_EQ(post_mlp->hf_name, "model.layers.1.post_feedforward_layernorm.weight");
  EXPECT_EQ(engine_name_for(io::Architecture::Olmo2, post_mlp->hf_name), post_mlp->name);
  EXPECT_EQ(engine_name_for(io::Architecture::Llama, post_mlp->hf_name), std::nullopt);
}

TEST(ModelSpec, NamesAreUniqueAndRoundTrip) {
  for (const char* name : {"llama_gqa_llama3", "llama_bias_untied", "mistral_sliding", "qwen2_bias_tied",
                           "qwen3_qknorm", "llama_rope_parameters_yarn"}) {
    io::ModelConfig config = fixture_config(name);
    std::set<std::string> engine, hf;
    for (const ParameterSpec& spec : parameter_specs(config)) {
      EXPECT_TRUE(engine.insert(spec.name).second) << spec.name;
      EXPECT_TRUE(hf.insert(spec.hf_name).second) << spec.hf_name;
      EXPECT_EQ(engine_name_for(config.architecture, spec.hf_name), spec.name);
      EXPECT_EQ(hf_name_for(config.architecture, spec.name), spec.hf_name);
    }
  }
}

TEST(ModelSpec, MoeExpertsAreStackedWithPerExpertHfNames) {
  const io::ModelConfig qwen3 = fixture_config("qwen3_moe_topk");  // 3 layers, layer 1 dense, 4 experts
  const std::vector<ParameterSpec> specs = parameter_specs(qwen3);
  const ParameterSpec* router = find(specs, "layers.0.mlp.router.weight");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->hf_name, "model.layers.0.mlp.gate.weight");
  EXPECT_EQ(router->shape, (graph::Shape{4, 32}));
  const ParameterSpec* down = find(specs, "layers.2.mlp.experts.down_proj.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape, (graph::Shape{4, 32, 16}));
  EXPECT_EQ(down->experts, 4);
  const std::vector<HfPiece> pieces = hf_pieces(*down);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[3].name, "model.layers.2.mlp.experts.3.down_proj.weight");
  EXPECT_EQ(pieces[3].shape, (graph::Shape{32, 16}));
  EXPECT_EQ(pieces[3].offset, 3 * 32 * 16);
  EXPECT_NE(find(specs, "layers.1.mlp.gate_proj.weight"), nullptr) << "mlp_only_layers keeps the dense MLP";
  EXPECT_EQ(find(specs, "layers.1.mlp.router.weight"), nullptr);

  const std::vector<ParameterSpec> qwen2 = parameter_specs(fixture_config("qwen2_moe_shared"));
  EXPECT_EQ(find(qwen2, "layers.1.mlp.shared_expert.up_proj.weight")->shape, (graph::Shape{24, 32}));
  EXPECT_EQ(find(qwen2, "layers.1.mlp.shared_expert_gate.weight")->hf_name, "model.layers.1.mlp.shared_expert_gate.weight");
  EXPECT_EQ(find(qwen2, "layers.0.mlp.router.weight"), nullptr) << "decoder_sparse_step 2: layer 0 is dense";

  const io::ModelConfig mixtral = fixture_config("mixtral_topk");
  const std::vector<ParameterSpec> mixtral_specs = parameter_specs(mixtral);
  EXPECT_EQ(hf_pieces(*find(mixtral_specs, "layers.1.mlp.experts.up_proj.weight"))[2].name,
            "model.layers.1.block_sparse_moe.experts.2.w3.weight");
  EXPECT_EQ(find(mixtral_specs, "layers.1.mlp.router.weight")->hf_name, "model.layers.1.block_sparse_moe.gate.weight");

  // Every checkpoint tensor names its engine parameter, per expert too; names are unique.
  for (const io::ModelConfig* config : {&qwen3, &mixtral}) {
    std::set<std::string> hf;
    for (const ParameterSpec& spec : parameter_specs(*config)) {
      for (const HfPiece& piece : hf_pieces(spec)) {
        EXPECT_TRUE(hf.insert(piece.name).second) << piece.name;
        EXPECT_EQ(engine_name_for(config->architecture, piece.name), spec.name) << piece.name;
      }
      EXPECT_EQ(hf_name_for(config->architecture, spec.name), spec.hf_name);
    }
  }
  EXPECT_EQ(engine_name_for(io::Architecture::Qwen3Moe, "model.layers.0.mlp.experts.01.up_proj.weight"), std::nullopt);
  EXPECT_TRUE(is_router_weight("layers.4.mlp.router.weight"));
  EXPECT_TRUE(is_router_weight("layers.4.mlp.shared_expert_gate.weight"));
  EXPECT_FALSE(is_router_weight("layers.4.mlp.gate_proj.weight"));
}

TEST(ModelSpec, UnknownNamesAreRejected) {
  EXPECT_EQ(engine_name_for(io::Architecture::Llama, "model.layers.x.self_attn.q_proj.weight"), std::nullopt);
  EXPECT_EQ(engine_name_for(io::Architecture::Llama, "model.layers.01.self_attn.q_proj.weight"), std::nullopt);
  EXPECT_EQ(engine_name_for(io::Architecture::Llama, "model.layers..self_attn.q_proj.weight"), std::nullopt);
  EXPECT_EQ(engine_name_for(io::Architecture::Qwen2, "transformer.wte.weight"), std::nullopt);
  EXPECT_EQ(hf_name_for(io::Architecture::Mistral, "layers.12.attn.qkv.weight"), std::nullopt);
  EXPECT_EQ(hf_name_for(io::Architecture::Mistral, "layers.12.attn.q_proj.weight"),
            "model.layers.12.self_attn.q_proj.weight");
}

}  // namespace
}  // namespace surogate::models
