// generate/decode_fusion.h on the fixtures' decode graphs: each layer's q, k, v become one
// linear_group and its gate, up, swiglu one linear_swiglu, with a bf16 LoRA adapter's outputs as
// the addends (its own rank-r products stay apart), and Qwen3's q and k norms folded into the
// attention where the CUDA kernel takes the head size; what is not exact stays unfused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "generate/decode_fusion.h"
#include "generate/decode_graph.h"
#include "models/defined_weights.h"
#include "models/lora.h"
#include "models/model_definition.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"

namespace surogate::generate {
namespace {

using graph::Graph;

const graph::OpRegistry& registry() {
  static const graph::OpRegistry built = ops::make_model_registry();
  return built;
}

io::ModelConfig config_of(const std::string& name) {
  return models::load_model_config(std::filesystem::path(SUROGATE_FIXTURES_DIR) / name, {});
}

// The decode graph of one row of one token in `dtype`, with a rank-4 adapter on every projection
// when `lora`; head_dim (all rotated) when given.
Graph decode_of(const std::string& name, DType dtype, bool lora, int64_t head_dim = 0) {
  io::ModelConfig config = config_of(name);
  if (head_dim > 0) config.head_dim = config.rope.rotary_dim = head_dim;
  models::DecoderGraphOptions options{1, 1, 1, false};
  options.dtype = dtype;
  Graph forward = models::build_model_graph(config, registry(), options).graph;
  if (lora) {
    models::LoraOptions adapter;
    adapter.rank = 4;
    adapter.alpha = 8.0;
    adapter.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    forward = models::apply_lora(forward, registry(), models::lora_adapters(config, adapter), adapter, false);
  }
  return build_decode_graph(forward, registry(), {2, 16}, "the test's definition");
}

std::vector<const graph::Node*> nodes_of(const Graph& graph, const std::string& op) {
  std::vector<const graph::Node*> found;
  for (const graph::Node& node : graph.nodes) {
    if (node.op == op) found.push_back(&node);
  }
  return found;
}

std::vector<std::string> output_names(const Graph& graph, const graph::Node& node) {
  std::vector<std::string> names;
  for (graph::TensorId id : node.outputs) names.push_back(graph.tensor(id).name);
  return names;
}

TEST(DecodeFusion, EachLayersQkvAndGateUpSwigluBecomeOneNodeEach) {
  const Graph decode = decode_of("qwen3_qknorm", DType::BF16, false);  // 2 layers
  const Graph fused = fuse_decode_products(decode, registry());
  const auto groups = nodes_of(fused, "linear_group"), swiglus = nodes_of(fused, "linear_swiglu");
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(swiglus.size(), 2u);
  EXPECT_TRUE(nodes_of(fused, "swiglu").empty());
  // o_proj, down_proj of each layer and the head remain plain products.
  EXPECT_EQ(nodes_of(fused, "linear").size(), 5u);
  EXPECT_EQ(nodes_of(decode, "linear").size(), 15u);
  // The group writes the tensors q, k and v wrote, so their readers are unchanged.
  const std::vector<std::string> outputs = output_names(fused, *groups[0]);
  ASSERT_EQ(outputs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(fused.tensor(groups[0]->outputs[i]).type, decode.tensor(*decode.find_tensor(outputs[i])).type);
  EXPECT_EQ(fused.tensor(groups[0]->inputs[1]).name, "layers.0.attn.q_proj.weight");
  EXPECT_EQ(fused.tensor(swiglus[1]->inputs[2]).name, "layers.1.mlp.up_proj.weight");
  EXPECT_EQ(output_names(fused, *swiglus[1]), output_names(decode, *nodes_of(decode, "swiglu")[1]));
  // The products the SwiGLU replaced are gone with their tensors; every parameter stays.
  EXPECT_EQ(fused.parameters.size(), decode.parameters.size());
  EXPECT_EQ(fused.tensors.size(), decode.tensors.size() - 4);
  EXPECT_EQ(fused.tensor(fused.outputs[0]).name, "logits");
}

// With a LoRA adapter (linear_add nodes) the products are left as they are (decode_fusion.h says
// why): Llama's graph, which has no q/k norms, comes back node for node.
TEST(DecodeFusion, AGraphWithAnAdapterKeepsItsProductsUnfused) {
  const Graph decode = decode_of("llama_gqa_llama3", DType::BF16, true);
  ASSERT_GT(std::count_if(decode.nodes.begin(), decode.nodes.end(),
                          [](const graph::Node& node) { return node.op == "linear_add"; }),
            0);
  const Graph fused = fuse_decode_products(decode, registry());
  EXPECT_EQ(fused.nodes.size(), decode.nodes.size());
  EXPECT_TRUE(nodes_of(fused, "linear_group").empty());
  EXPECT_TRUE(nodes_of(fused, "linear_swiglu").empty());
}

// Qwen3 with an adapter: the products stay, the q and k norms go into the attention all the same.
TEST(DecodeFusion, AGraphWithAnAdapterStillFoldsTheQkNormsIntoTheAttention) {
  const Graph decode = decode_of("qwen3_qknorm", DType::BF16, true, 16);
  const Graph fused = fuse_decode_products(decode, registry());
  EXPECT_EQ(nodes_of(fused, "qk_norm_rope_cached_attention").size(), 2u);
  EXPECT_TRUE(nodes_of(fused, "cached_attention").empty());
  EXPECT_TRUE(nodes_of(fused, "fused_rmsnorm_rope").empty());
  EXPECT_TRUE(nodes_of(fused, "linear_group").empty());
  EXPECT_EQ(nodes_of(fused, "linear_add").size(), nodes_of(decode, "linear_add").size());
  EXPECT_EQ(nodes_of(fused, "linear").size(), nodes_of(decode, "linear").size());
  // q as its linear_add wrote it, with the adapter's output in.
  const graph::Node& attention = *nodes_of(fused, "qk_norm_rope_cached_attention")[0];
  EXPECT_EQ(fused.nodes[static_cast<size_t>(fused.tensor(attention.inputs[0]).producer)].op, "linear_add");
  EXPECT_EQ(fused.tensor(attention.inputs[8]).name, "layers.0.attn.q_norm.weight");
}

TEST(DecodeFusion, QwenQAndKNormsFoldIntoTheAttentionWhereTheKernelTakesTheHeadSize) {
  // The fixture's head_dim 8 is below the pair kernel's sizes: the two norms and the attention stay.
  const Graph small = fuse_decode_products(decode_of("qwen3_qknorm", DType::BF16, false), registry());
  EXPECT_TRUE(nodes_of(small, "qk_norm_rope_cached_attention").empty());
  EXPECT_EQ(nodes_of(small, "fused_rmsnorm_rope").size(), 4u);
  EXPECT_EQ(nodes_of(small, "cached_attention").size(), 2u);
  // At 16 the q and k norms become one pair, which the attention, their only reader, takes in.
  const Graph decode = decode_of("qwen3_qknorm", DType::BF16, false, 16);
  const Graph fused = fuse_decode_products(decode, registry());
  const auto attentions = nodes_of(fused, "qk_norm_rope_cached_attention");
  ASSERT_EQ(attentions.size(), 2u);
  EXPECT_TRUE(nodes_of(fused, "fused_rmsnorm_rope").empty());
  EXPECT_TRUE(nodes_of(fused, "fused_qk_rmsnorm_rope").empty());
  EXPECT_TRUE(nodes_of(fused, "cached_attention").empty());
  const graph::Node& first = *attentions[0];
  // q and k as the projections wrote them (the group's first two outputs), v, the caches and the
  // rows as cached_attention read them, then the norms' weights and the positions.
  const graph::Node& group = *nodes_of(fused, "linear_group")[0];
  EXPECT_EQ(first.inputs[0], group.outputs[0]);
  EXPECT_EQ(first.inputs[1], group.outputs[1]);
  EXPECT_EQ(first.inputs[2], group.outputs[2]);
  EXPECT_EQ(fused.tensor(first.inputs[3]).name, "layers.0.k_cache");
  EXPECT_EQ(fused.tensor(first.inputs[8]).name, "layers.0.attn.q_norm.weight");
  EXPECT_EQ(fused.tensor(first.inputs[9]).name, "layers.0.attn.k_norm.weight");
  const graph::Node& cached = *nodes_of(decode, "cached_attention")[0];
  EXPECT_EQ(fused.tensor(first.inputs[10]).name, decode.tensor(nodes_of(decode, "fused_rmsnorm_rope")[0]->inputs[2]).name);
  EXPECT_EQ(output_names(fused, first), output_names(decode, cached));
  EXPECT_EQ(first.attrs.at("query_heads"), 4);
  EXPECT_EQ(first.attrs.at("kv_heads"), 2);
  EXPECT_EQ(first.attrs.at("inv_freq").size(), 8u);
  EXPECT_TRUE(first.attrs.contains("eps"));
  // The normalised q and k and the rstd are no tensors of the fused graph any more.
  for (const std::string& name : output_names(decode, *nodes_of(decode, "fused_rmsnorm_rope")[0])) {
    EXPECT_FALSE(fused.find_tensor(name)) << name;
  }
}

// When something besides the attention reads a normalised q (here: it is made a graph output), the
// attention keeps its q and k, and the two norms after the group become one pair.
TEST(DecodeFusion, NormsTheAttentionCannotTakeBecomeOnePair) {
  Graph decode = decode_of("qwen3_qknorm", DType::BF16, false, 16);
  const graph::Node& q_norm = *nodes_of(decode, "fused_rmsnorm_rope")[0];
  decode.outputs.push_back(q_norm.outputs[0]);
  const Graph fused = fuse_decode_products(decode, registry());
  EXPECT_EQ(nodes_of(fused, "fused_qk_rmsnorm_rope").size(), 1u);  // layer 0's
  EXPECT_EQ(nodes_of(fused, "cached_attention").size(), 1u);
  EXPECT_EQ(nodes_of(fused, "qk_norm_rope_cached_attention").size(), 1u);  // layer 1's
  EXPECT_EQ(nodes_of(fused, "fused_qk_rmsnorm_rope")[0]->outputs[0], *fused.find_tensor(decode.tensor(q_norm.outputs[0]).name));
}

TEST(DecodeFusion, ProductsWithABiasStayUnfused) {
  // Qwen2's q, k and v have biases (three-input linear): not the fused op's form.
  const Graph fused = fuse_decode_products(decode_of("qwen2_bias_tied", DType::BF16, false), registry());
  EXPECT_TRUE(nodes_of(fused, "linear_group").empty());
  EXPECT_FALSE(nodes_of(fused, "linear_swiglu").empty());
}

}  // namespace
}  // namespace surogate::generate
