// Builds the Qwen2.5-VL vision tower graph; see vision_tower.h.
#include "models/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "graph/builder.h"
#include "models/vision_tower_parts.h"

namespace surogate::models {
namespace {
using graph::GraphBuilder;
using graph::TensorId;

// Qwen2_5_VLRMSNorm's eps, fixed in transformers (not in the config).
constexpr double kVisionNormEps = 1e-6;

using vision_parts::biased_linear;
using vision_parts::TowerParameters;

// One Qwen2_5_VLVisionBlock: pre-norm attention and SwiGLU MLP, each added to the stream.
TensorId vision_block(GraphBuilder& b, const TowerParameters& p, const VisionTowerConfig& config, int64_t block,
                      TensorId hidden, TensorId cos, TensorId sin, TensorId documents) {
  const std::string prefix = fmt::format("visual.blocks.{}", block);
  auto scope = b.scope(fmt::format("vision.blocks.{}", block));
  TensorId normed = b.op("rmsnorm", {hidden, p.get(prefix + ".norm1.weight")}, {{"eps", kVisionNormEps}}, "norm1");
  hidden = vision_parts::vision_attention_residual(b, p, hidden, normed, prefix, cos, sin, documents, config.hidden_size,
                                                   config.num_heads);
  normed = b.op("rmsnorm", {hidden, p.get(prefix + ".norm2.weight")}, {{"eps", kVisionNormEps}}, "norm2");
  TensorId gate = biased_linear(b, p, normed, prefix + ".mlp.gate_proj", "gate");
  TensorId up = biased_linear(b, p, normed, prefix + ".mlp.up_proj", "up");
  TensorId activated = b.op("swiglu", {gate, up}, nlohmann::json::object(), "swiglu");
  return b.op("add", {hidden, biased_linear(b, p, activated, prefix + ".mlp.down_proj", "down")}, nlohmann::json::object(), "mlp_residual");
}

}  // namespace

graph::OpOutputs vision_parts::vision_rope_tables(GraphBuilder& b, TensorId position_ids, int64_t head_dim,
                                                  double rope_theta, DType dtype) {
  const int64_t quarter = head_dim / 4;
  return b.op("mrope_cos_sin", {position_ids},
              {{"inv_freq", vision_inverse_frequencies(head_dim, rope_theta)},
               {"mrope_section", {int64_t{0}, quarter, quarter}},
               {"dtype", std::string(dtype_safetensors_name(dtype))}},
              "vision.rope");
}

std::vector<double> vision_inverse_frequencies(int64_t head_dim, double rope_theta) {
  const int64_t spatial = head_dim / 2;
  std::vector<double> frequencies;
  for (int64_t i = 0; i < spatial; i += 2) {
    // As torch computes it: float32 arange / spatial, base ** that in float32, 1 / that.
    const float exponent = static_cast<float>(i) / static_cast<float>(spatial);
    frequencies.push_back(static_cast<double>(1.0f / std::pow(static_cast<float>(rope_theta), exponent)));
  }
  std::vector<double> both = frequencies;
  both.insert(both.end(), frequencies.begin(), frequencies.end());
  return both;
}

TensorId add_vision_tower(GraphBuilder& b, const VisionTowerConfig& config, int64_t patches, DType dtype,
                          bool trainable) {
  if (patches <= 0 || patches % config.merge_unit() != 0) {
    fail_user("vision tower: {} patches is not a positive multiple of spatial_merge_size² = {}", patches,
              config.merge_unit());
  }
  const int64_t merged = patches / config.merge_unit();
  TensorId pixel_values = b.input(kVisionPixelValues, dtype, {patches, config.patch_columns()});
  TensorId patch_order = b.input(kVisionPatchOrder, DType::I32, {1, patches});
  TensorId position_ids = b.input(kVisionPositionIds, DType::I32, {3, 1, patches});
  TensorId window_documents = b.input(kVisionWindowDocuments, DType::I32, {1, patches});
  TensorId frame_documents = b.input(kVisionFrameDocuments, DType::I32, {1, patches});
  TensorId merged_restore = b.input(kVisionMergedRestore, DType::I32, {merged});
  TowerParameters p;
  for (const VisionTowerParameter& parameter : vision_tower_parameters(config)) {
    p.ids[parameter.name] = b.parameter(parameter.name, dtype, parameter.shape, trainable);
  }

  TensorId embedded = b.op("linear", {pixel_values, p.get("visual.patch_embed.proj.weight")},
                           nlohmann::json::object(), "vision.patch_embed");
  TensorId hidden = b.op("embedding", {patch_order, embedded}, nlohmann::json::object(), "vision.window_order");
  graph::OpOutputs tables = vision_parts::vision_rope_tables(b, position_ids, config.head_dim(), config.rope_theta, dtype);
  for (int64_t block = 0; block < config.depth; ++block) {
    const bool full = std::find(config.fullatt_block_indexes.begin(), config.fullatt_block_indexes.end(), block) !=
                      config.fullatt_block_indexes.end();
    hidden = vision_block(b, p, config, block, hidden, tables[0], tables[1], full ? frame_documents : window_documents);
  }
  TensorId normed = b.op("rmsnorm", {hidden, p.get("visual.merger.ln_q.weight")}, {{"eps", kVisionNormEps}},
                         "vision.merger.ln_q");
  TensorId grouped = b.op("reshape", {normed}, {{"shape", {merged, config.hidden_size * config.merge_unit()}}},
                          "vision.merger.group");
  TensorId up = biased_linear(b, p, grouped, "visual.merger.mlp.0", "vision.merger.fc1");
  TensorId activated = b.op("gelu", {up}, nlohmann::json::object(), "vision.merger.gelu");
  TensorId out = biased_linear(b, p, activated, "visual.merger.mlp.2", "vision.merger.fc2");
  return b.op("embedding", {merged_restore, out}, nlohmann::json::object(), "vision.features");
}

VisionTowerGraph build_vision_tower_graph(const VisionTowerConfig& config, const graph::OpRegistry& registry,
                                          int64_t patches, DType dtype, bool trainable) {
  GraphBuilder b(registry);
  VisionTowerGraph result;
  result.features = add_vision_tower(b, config, patches, dtype, trainable);
  b.mark_output(result.features);
  result.graph = b.finish();
  return result;
}

}  // namespace surogate::models

namespace surogate::models {

std::vector<runtime::InputBinding> vision_tower_bindings(const compiler::ExecutionPlan& plan,
                                                         const vision::VisionTowerIndices& indices,
                                                         std::span<const std::byte> pixel_values) {
  auto ints = [](const std::vector<int32_t>& values) { return std::as_bytes(std::span<const int32_t>(values)); };
  return {{plan.tensor(kVisionPixelValues), pixel_values},
          {plan.tensor(kVisionPatchOrder), ints(indices.patch_order)},
          {plan.tensor(kVisionPositionIds), ints(indices.position_ids)},
          {plan.tensor(kVisionWindowDocuments), ints(indices.window_document_ids)},
          {plan.tensor(kVisionFrameDocuments), ints(indices.frame_document_ids)},
          {plan.tensor(kVisionMergedRestore), ints(indices.merged_restore)}};
}

}  // namespace surogate::models
